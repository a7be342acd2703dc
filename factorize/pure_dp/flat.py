"""Refining a Kronecker strategy as one p-Identity strategy over the whole (small) domain.

A Kronecker product of p-Identity factors is itself a p-Identity strategy over the N = Π n_i
cells: with ``A_i = [I; Θ_i] D_i``, the rows of ``⊗A_i`` whose every factor row is an identity
row form ``D = ⊗D_i`` times ``I_N``, and the other rows divided by D are a non-negative
``Θ`` (``Σ_i`` … rows: ``Π(n_i + p_i) − N``). So OPT_0 (McKenna et al., "Optimizing error of
high-dimensional statistical queries under differential privacy", PVLDB 2018, the explicit p-Identity
optimiser) can start
from the OPT_⊗ optimum and only improve on it. The Kronecker point is (numerically) a KKT
point of the flat problem — its zero entries have non-negative gradients — so the start is
perturbed by a seeded ``ε·U(0,1)`` (seeds recorded) before L-BFGS-B. Cost O(p N²) per
iteration: for N up to a few thousand.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from factorize.errors import InternalError
from factorize.pure_dp.errors import PureDPError

from .one_d import PIdentityResult
from .optimizer import Start, multistart
from .p_identity import PIdentityObjective

__all__ = ["flatten_kron_p_identity", "flat_rows", "refine_flat", "MAX_FLAT_ROWS",
           "DEFAULT_FLAT_WORK"]

#: Most extra rows (p of the flat strategy) a refinement accepts by default. The work budget
#: below counts p·N² per L-BFGS-B iteration, but an iteration of this problem costs several
#: evaluations (3.7 on average at p = 487, N = 512, where 312 iterations took 86 s and the
#: refinement lost to the marginal weights by 2×): at p ≤ 256 the budget's worst case stays
#: within seconds to tens of seconds. (HDMM's suite refines at p = 132: prefix32⊗prefix32.)
MAX_FLAT_ROWS = 256
#: Default work budget of a refinement: multiply-adds of its O(p N²) products (about 15 s
#: single-threaded here for N = 1024, p = 132).
DEFAULT_FLAT_WORK = 4e10


def flat_rows(thetas: Sequence[np.ndarray]) -> int:
    """p of the flattened strategy: ``Π_i (n_i + p_i) − Π_i n_i``."""
    full, cells = 1, 1
    for T in thetas:
        p, n = np.shape(T)
        full *= n + p
        cells *= n
    return full - cells


def flatten_kron_p_identity(thetas: Sequence[np.ndarray]) -> np.ndarray:
    """Θ of ``⊗_i A(Θ_i)`` as one p-Identity strategy over ``N = Π n_i`` cells (module
    docstring); factor i with ``Θ_i`` of shape ``(p_i, n_i)`` (p_i = 0 for an identity)."""
    A = np.ones((1, 1))
    ident = np.ones(1, dtype=bool)
    for T in thetas:
        T = np.asarray(T, dtype=np.float64)
        n = T.shape[1]
        Ai = np.vstack([np.eye(n), T]) / (1.0 + T.sum(axis=0))[None, :]
        A = np.kron(A, Ai)
        ident = np.kron(ident, np.concatenate([np.ones(n, bool), np.zeros(T.shape[0], bool)])).astype(bool)
    D = A[ident].max(axis=0)  # each identity-block row has one nonzero, on its own cell
    order = np.argmax(A[ident], axis=0)
    if not np.array_equal(np.sort(order), np.arange(A.shape[1])):  # pragma: no cover - defensive
        raise InternalError("the identity rows of the Kronecker product do not form a permutation")
    return A[~ident] / D[None, :]


def refine_flat(G: np.ndarray, k: int, thetas: Sequence[np.ndarray], *,
                perturbations: Sequence[float] = (0.1,), seed: int = 0, stage1_iters: int = 100,
                polish_iters: int = 1000, work_budget: float | None = DEFAULT_FLAT_WORK,
                time_budget: float | None = None, max_rows: int = MAX_FLAT_ROWS) -> PIdentityResult:
    """OPT_0 over the whole domain (Gram matrix G = WᵀW, N×N) from the flattened Kronecker
    strategy, unperturbed and perturbed by each ``ε`` in ``perturbations`` (seed ``seed + i``)."""
    t0 = time.perf_counter()
    if flat_rows(thetas) > max_rows:
        raise PureDPError(f"the flattened strategy would have {flat_rows(thetas)} extra rows, "
                         f"above max_rows={max_rows}")
    obj = PIdentityObjective(G, k)
    base = flatten_kron_p_identity(thetas)
    starts = [Start("kronecker product", base.ravel())]
    for i, eps in enumerate(perturbations):
        s = seed + i
        noise = np.random.default_rng(s).random(base.shape)
        starts.append(Start(f"kronecker product + {eps:g}·U(0,1)", (base + eps * noise).ravel(), s))
    p, N = base.shape
    search = multistart(lambda st: obj.value_and_grad, starts, stage1_iters=stage1_iters,
                        polish_top=1, polish_iters=polish_iters, work_budget=work_budget,
                        cost=lambda st: float(max(p, 1)) * N * N, time_budget=time_budget,
                        stage1_share=0.2)
    return PIdentityResult(search.best.x.reshape(-1, obj.n), search.value, int(k), search,
                           time.perf_counter() - t0)

