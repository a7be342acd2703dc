"""γ₂'s dual over row-orbit and cell-orbit weights: ``solvers.dual_gamma_2`` on the
symmetry-reduced problem (``factorize.structured.symmetry_gamma_2``).

With per-row weights π_a on sub-block a (masses ``P_a = |a| π_a``) and per-cell weights d_o on
orbit o (masses ``Q_o = |o| d_o``), both on the simplex, ``F = ‖D_p^{1/2} W D_q^{1/2}‖_tr =
Σ_s μ_s tr(M_s^{1/2})`` with ``M_s = D_s^{1/2} C_s diag(π) C_sᵀ D_s^{1/2}`` (docs/math.md §5.4c).
F is jointly concave and homogeneous of degree ½ in each of p and q (Lee, Shraibman &
Špalek, "A direct product theorem for discrepancy", CCC 2008; docs/math.md §4.2), and the KKT
point of the dense solver, ``p_i = (UΣUᵀ)_ii / F``, ``q_j = (VΣVᵀ)_jj / F``, summed over an
orbit reads

    ``Q_o = Σ_s μ_s Σ_{c ∈ o ∩ s} [M_s^{1/2}]_cc / F``,
    ``P_a = π_a Σ_s μ_s Σ_{columns x of a} x̂ᵀ M_s^{+1/2} x̂ / F``,  ``x̂ = D_s^{1/2} x``

(the second is ``2π_a ∂F/∂π_a / F``), iterated in log-masses with the dense solvers'
safeguarded Anderson acceleration. Every iterate's F is a lower bound on γ₂. The primal
estimate is the dense solver's "scaled" strategy, which in the reduction is the γ_F-optimal
strategy of the re-weighted workload (``structured.symmetric``): its rows of sub-block a have
variance ``ρ_a = 2∂F/∂π_a / |a|`` per unit of ``t = max_o Q̃_o / Q_o`` (``Q̃`` the new masses
times F), so ``γ₂ ≤ √(max_a ρ_a · max_o Q̃_o/Q_o)`` when every sector matrix spans its part of
W (every π_a > 0). The work is deterministic: at most ``max_iters`` evaluations, each one
symmetric eigendecomposition per sector plus its column products, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.dual_common import Deadline, SafeguardedAnderson, log_weights, simplex_from_log
from solvers.errors import SolverFailedError

#: Eigenvalues of a sector below this fraction of its largest are zero (per sector: a sector
#: whose cells or rows all carry small weights keeps its own range).
REL_TOL = 1e-13


@dataclass(frozen=True)
class SymmetricGamma2Result:
    """Per-row weights of each sub-block and per-cell weights on the orbit tensor (each set
    of masses summing to 1) at the best dual value F (a lower estimate of γ₂), the same at the
    best primal estimate (where the strategy is read off: the two differ before convergence),
    the estimates, iterations and whether the target gap was met."""

    row_weights: np.ndarray
    cell_weights: np.ndarray
    primal_row_weights: np.ndarray
    primal_cell_weights: np.ndarray
    lower_estimate: float
    upper_estimate: float
    iterations: int
    converged: bool


def evaluate(problem: Any, pi: np.ndarray, d: np.ndarray
             ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """``(F, new row masses·F, new cell masses·F per orbit, ρ)`` at per-row weights π and
    per-cell weights d (module docstring); ρ is infinite where a sector's eigenvectors kept
    (above :data:`REL_TOL` of its largest) do not span its columns (no valid primal there)."""
    d = np.asarray(d, dtype=np.float64).reshape(problem.shape)
    pairs = []
    for s in problem.sectors:
        root = np.sqrt(np.maximum(d[s.index], 0.0)).reshape(-1)
        Y = root[:, None] * s.columns
        M = (Y * pi[s.owner][None, :]) @ Y.T
        pairs.append((Y, np.linalg.eigh(0.5 * (M + M.T))))
    if not any(lam.size and lam[-1] > 0 for _, (lam, _) in pairs):
        raise SolverFailedError("the reduced γ₂ dual has no positive value (a zero workload?)")
    F = 0.0
    cells = np.zeros(problem.shape)
    grad = np.zeros(problem.rows.size)
    spanned = True
    for s, (Y, (lam, V)) in zip(problem.sectors, pairs, strict=True):
        keep = lam > REL_TOL * max(float(lam[-1]), 0.0)
        r = np.sqrt(lam[keep])
        Vk = V[:, keep]
        F += s.multiplicity * float(np.sum(r))
        part = cells[s.index]
        cells[s.index] = part + (s.multiplicity * ((Vk * Vk) @ r)).reshape(part.shape)
        E = Vk.T @ Y
        np.add.at(grad, s.owner, s.multiplicity * np.einsum("ij,i,ij->j", E, 1.0 / r, E))
        # the scaled strategy reconstructs a column only if the kept eigenvectors span it
        spanned = spanned and bool(np.all(np.einsum("ij,ij->j", E, E)
                                          >= (1.0 - 1e-9) * np.einsum("ij,ij->j", Y, Y)))
    rho = grad / problem.rows if spanned else np.full(problem.rows.size, math.inf)
    return F, pi * grad, cells, rho


def solve_symmetric_gamma_2(problem: Any, start_cells: np.ndarray | None = None, *,
                            target_gap: float = 1e-7, memory: int = 5, max_iters: int = 500,
                            stall_iters: int = 40) -> SymmetricGamma2Result:
    """Maximise the reduced γ₂ dual (module docstring) for ``problem``, a
    ``factorize.structured.symmetry_gamma_2.Gamma2Problem``, from uniform row masses per row
    and ``start_cells`` (per-cell weights on the orbit tensor; uniform when None)."""
    sizes = problem.orbit_sizes.reshape(-1)
    rows = problem.rows
    k = rows.size
    start = (sizes / float(np.sum(sizes)) if start_cells is None
             else np.asarray(start_cells, dtype=np.float64).reshape(-1) * sizes)
    x = np.concatenate([np.log(rows / float(np.sum(rows))), np.log(np.maximum(start, 1e-300))])
    loop = SafeguardedAnderson(memory, target_gap, stall_iters, Deadline(None))
    it = 0
    for it in range(1, max_iters + 1):
        P, Q = simplex_from_log(x[:k]), simplex_from_log(x[k:])
        F, rmass, cmass, rho = evaluate(problem, P / rows, Q / sizes)
        if not (math.isfinite(F) and F > 0):
            raise SolverFailedError("the reduced γ₂ dual has no positive value")
        cmass = cmass.reshape(-1)
        plain = np.concatenate([log_weights(rmass, F), log_weights(cmass, F)])
        top = float(np.max(rho))
        primal = {"scaled": math.sqrt(top * float(np.max(cmass / Q)))} if math.isfinite(top) else {}
        if loop.record(it, F, plain, primal, (P, Q)):
            break
        x = loop.next_iterate(x, plain)
    if loop.lower_at is None or loop.upper_at is None:
        raise SolverFailedError("the reduced γ₂ dual reached no finite dual and primal point")
    P, Q = loop.lower_at
    Pu, Qu = loop.upper_at
    return SymmetricGamma2Result(P / rows, (Q / sizes).reshape(problem.shape), Pu / rows,
                                 (Qu / sizes).reshape(problem.shape), loop.lower, loop.upper, it,
                                 loop.converged)
