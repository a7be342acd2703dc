"""Standard strategies (pure math): the candidates a plan is compared with, or chosen from.

``is_range_workload`` / ``tree_strategy``: the b-ary hierarchical strategy for range queries
(Hay et al. 2010; Qardaji et al. 2013). ``candidate_factorizations``: exact factorizations
W = R·A of standard strategies — the histogram (A = I, R = W), the workload itself (A = W,
R = I) and, for range workloads, trees with least-squares reconstruction R = W·A⁺ — used by
``kinds.factorization.build`` when the optimal γ_F factorization does not bind the plan's noise (Laplace
noise under pure DP, or replace neighbours) and by ``report.baselines``.
"""

from __future__ import annotations

import numpy as np

from factorize.choices import NoiseFamily, Norm
from factorize.factorization import Factorization
from factorize.planner.errors import PlannerError

#: Tree branchings tried.
TREE_BRANCHING = (2, 4, 8, 16)
#: Name prefix of the candidates found by an optimiser (``factorize.pure_dp.candidates``):
#: their scores are not re-derivable without re-running the search, so a verifier recomputes
#: such a candidate's score only when it is the chosen strategy, and otherwise checks that
#: the stated score does not beat the chosen one (as for the optimal factorization).
OPTIMIZED_PREFIX = "optimized "


def is_range_workload(W_dense: np.ndarray) -> bool:
    """True when every row of W is 0/1 with its ones forming one contiguous run (an interval
    of cells; an all-zero row, the empty interval, is allowed) and some row is non-zero."""
    W_dense = np.asarray(W_dense)
    if W_dense.ndim != 2 or W_dense.size == 0:
        return False
    nz = W_dense != 0
    if not np.all(W_dense[nz] == 1.0):
        return False
    counts = nz.sum(axis=1)
    if not counts.any():
        return False
    rows = counts > 0
    first = np.argmax(nz[rows], axis=1)
    last = W_dense.shape[1] - 1 - np.argmax(nz[rows][:, ::-1], axis=1)
    return bool(np.all(last - first + 1 == counts[rows]))


def tree_strategy(N: int, branching: int) -> np.ndarray:
    """The b-ary hierarchical strategy over N cells (dense, (m, N), 0/1).

    With ``L = ⌈log_b N⌉`` the cells are padded to ``b^L``; level ``ℓ = 0..L`` has nodes of
    ``b^{L−ℓ}`` consecutive cells (level 0 the root, level L the single cells). Nodes holding
    only padding are dropped, so every column has exactly ``L + 1`` ones (one node per
    level) and ``m = Σ_ℓ ⌈N / b^{L−ℓ}⌉``.
    """
    N, b = int(N), int(branching)
    if N < 1 or b < 2:
        raise PlannerError(f"a tree needs N >= 1 cells and branching >= 2, got N={N}, b={b}")
    L = 0
    while b ** L < N:
        L += 1
    cells = np.arange(N)
    blocks = []
    for level in range(L + 1):
        size = b ** (L - level)
        nodes = -(-N // size)
        block = np.zeros((nodes, N))
        block[cells // size, cells] = 1.0
        blocks.append(block)
    return np.vstack(blocks)


def candidate_factorizations(W_dense: np.ndarray) -> list[tuple[str, Factorization]]:
    """(name, W = R·A) for the histogram, the workload itself and, for range workloads, the
    b-ary trees (R = W·A⁺ by least squares, exact since A has full column rank)."""
    W = np.asarray(W_dense, dtype=np.float64)
    k, N = W.shape
    out = [("histogram (identity strategy)", Factorization.dense(W, np.eye(N))),
           ("W directly", Factorization.dense(np.eye(k), W))]
    if is_range_workload(W):
        for b in TREE_BRANCHING:
            A = tree_strategy(N, b)
            R = np.linalg.lstsq(A.T, W.T, rcond=None)[0].T  # R A = W (A has full column rank)
            out.append((f"hierarchical tree (b={b})", Factorization.dense(R, A)))
    return out


#: Largest Kronecker factor (cells) whose standard candidates are formed densely.
KRON_FACTOR_MAX_CELLS = 4096


def per_factor_objective(fact: Factorization, family: NoiseFamily, norm: Norm) -> float:
    """``Δ·E`` of a one-factor strategy at unit noise: Δ the largest column L1 (Laplace) or L2
    norm of A (add/remove sensitivity), E = ‖R‖_F (γ_F) or the largest row norm of R (γ₂)."""
    A, R = fact.A_factors[0], fact.R_factors[0]
    sens = float(np.max(np.abs(A).sum(axis=0) if family == "laplace" else np.linalg.norm(A, axis=0)))
    err = float(np.linalg.norm(R)) if norm == "gamma_f" else float(np.max(np.linalg.norm(R, axis=1)))
    return sens * err


def kron_candidate(leaves: list[np.ndarray], family: NoiseFamily, norm: Norm) -> tuple[str, Factorization] | None:
    """The best Kronecker product of standard per-factor strategies for W = ⊗_i W_i under
    add/remove neighbours (HDMM's OPT_⊗ restricted to the standard candidates, exactly).

    Column norms of a Kronecker product multiply, ``‖(⊗A_i) e_x‖_p = Π_i ‖A_i e_{x_i}‖_p``
    (p = 1, 2), so ``Δ(⊗A_i) = Π Δ(A_i)``; ``‖⊗R_i‖_F = Π ‖R_i‖_F`` and the largest row norm
    of ``⊗R_i`` is the product of the factors'. The objective Δ·E of a Kronecker strategy is
    therefore the product of per-factor objectives, minimised factor by factor over
    :func:`candidate_factorizations` of each W_i. None when a factor is too large to form.
    """
    chosen_R, chosen_A, names = [], [], []
    for Wi in leaves:
        if Wi.shape[1] > KRON_FACTOR_MAX_CELLS:
            return None
        best = min(candidate_factorizations(Wi),
                   key=lambda c: per_factor_objective(c[1], family, norm))
        names.append(best[0])
        chosen_R.append(best[1].R_factors[0])
        chosen_A.append(best[1].A_factors[0])
    return (f"per-factor standard ({' ⊗ '.join(names)})",
            Factorization(tuple(chosen_R), tuple(chosen_A)))


def strategy_candidates(W, family: NoiseFamily, norm: Norm, relation: str,
                        max_cells: int, max_entries: int) -> list[tuple[str, Factorization]]:
    """The standard candidates a plan chooses from (and its verifier recomputes): the dense
    ones of :func:`candidate_factorizations` when W is small enough to form, and for a
    Kronecker product of two or more factors under add/remove neighbours the per-factor best
    (:func:`kron_candidate`). Deterministic in W, the noise family and the objective."""
    from workloads.structured import kron_leaves

    k, N = W.shape
    out: list[tuple[str, Factorization]] = []
    if max_cells >= N and k * N <= max_entries:
        out += candidate_factorizations(W.dense())
    leaves = kron_leaves(W)
    if (len(leaves) >= 2 and relation == "add_remove"
            and all(leaf.shape[0] * leaf.shape[1] <= max_entries for leaf in leaves)):
        cand = kron_candidate([leaf.dense() for leaf in leaves], family, norm)
        if cand is not None:
            out.append(cand)
    return out
