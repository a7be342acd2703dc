"""Shared Kronecker factors for Gaussian noise (HDMM's OPT_⊗ with L2 sensitivity).

For a union ``W = [w_o ⊗_j W_{o,j}]_o`` and one shared strategy ``A = ⊗_j A_j`` answered block
by block with ``w_o ⊗_j W_{o,j} A_j⁺`` (``structured.shared_kron``), the total squared error
per unit σ² under add/remove neighbours is

    ``Δ₂(A)² · Σ_o w_o² Π_j tr(G_{o,j} (A_jᵀA_j)⁺)``,   ``G_{o,j} = W_{o,j}ᵀW_{o,j}``,

with ``Δ₂(⊗A_j) = Π_j max column norm of A_j``. Every factor is scale-free in it, so with
``X_j = A_jᵀA_j`` and ``diag X_j ≤ 1`` the problem is ``min Σ_o w_o² Π_j tr(G_{o,j} X_j⁻¹)``.

Rule (block-coordinate descent): with the other factors fixed, attribute j's subproblem is
``min tr(H_j X_j⁻¹)`` s.t. ``diag X_j ≤ 1``, ``H_j = Σ_o c_{o,j} G_{o,j}``,
``c_{o,j} = w_o² Π_{i≠j} tr(G_{o,i} X_i⁻¹)`` — γ_F of a workload with Gram ``H_j``, solved by
the dual fixed point (``solvers.dual_gamma_f``), whose candidate strategies are scored by the
exact objective (their own column norms and pseudo-inverses). A candidate replaces the current
factor only when it lowers the objective, so no sweep increases it. Start: each attribute's
optimum for ``c_{o,j} = w_o²``. Stop when a sweep lowers the objective by less than
:data:`STALL` relatively, or after :data:`MAX_SWEEPS` sweeps (deterministic: no random start).
Attributes every block sums out are measured summed out (``A_j = 1ᵀ``, contributing 1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from solvers.errors import SolverFailedError

from .workload_blocks import WorkloadBlock

#: Relative decrease of the objective below which a sweep counts as stalled.
STALL = 1e-9
#: Most sweeps of the alternating descent.
MAX_SWEEPS = 30
#: The dual solver's gap target on each attribute's subproblem.
SUBPROBLEM_GAP = 1e-8


@dataclass
class GaussianKronResult:
    """The factors (one per attribute, ``1ᵀ`` where summed out), the objective
    ``Σ_o w_o² Π_j Δ_j² tr(W_{o,j} A_j⁺ A_j⁺ᵀ W_{o,j}ᵀ)`` after the start and after each
    sweep (``history``; non-increasing), and the seconds spent."""

    factors: list[np.ndarray]
    value: float
    history: list[float] = field(default_factory=list)
    sweeps: int = 0
    seconds: float = 0.0


def _traces(A: np.ndarray, Ws: Sequence[np.ndarray]) -> np.ndarray:
    """``Δ(A)² · ‖W A⁺‖_F²`` for each W (Δ the largest column norm of A)."""
    P = np.linalg.pinv(A)
    scale = float(np.max(np.sum(A * A, axis=0)))
    return np.array([scale * float(np.sum((W @ P) ** 2)) for W in Ws])


def _objective(w2: np.ndarray, T: np.ndarray) -> float:
    """``Σ_o w_o² Π_j T[o, j]``."""
    return float(math.fsum((w2 * np.prod(T, axis=1)).tolist()))


def _best_factor(Ws: Sequence[np.ndarray], c: np.ndarray, start: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The dual solver's best strategy for ``min Σ_o c_o tr(G_o X⁻¹)``, its traces and the
    dual weights (``start``: the attribute's weights of the sweep before, a warm start)."""
    from solvers.dual_gamma_f import solve_gamma_f_dual

    H = sum(float(ci) * (W.T @ W) for ci, W in zip(c, Ws, strict=True) if ci > 0)
    H = 0.5 * (H + H.T)
    res = solve_gamma_f_dual(H, max(1, len(Ws)), target_gap=SUBPROBLEM_GAP, start=start)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for name in sorted(res.strategies):
        A = res.strategies[name]
        A = A[np.any(A != 0.0, axis=1)]
        if A.shape[0] == 0 or not np.all(np.isfinite(A)):
            continue
        t = _traces(A, Ws)
        v = float(np.dot(c, t))
        if math.isfinite(v) and (best is None or v < best[0]):
            best = (v, A, t)
    if best is None:
        raise SolverFailedError("the dual solver returned no usable strategy for a Kronecker factor")
    return best[1], best[2], res.q


def optimize_kron_l2(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], *,
                     max_sweeps: int = MAX_SWEEPS, stall: float = STALL) -> GaussianKronResult:
    """Shared Kronecker factors minimising the Gaussian objective (module docstring)."""
    t0 = time.perf_counter()
    sizes = [int(n) for n in sizes]
    w2 = np.array([float(wb.weight) ** 2 for wb in wblocks])
    d = len(sizes)
    measured = [j for j in range(d) if any(wb.factor(j).kind != "total" for wb in wblocks)]
    dense = {j: [np.asarray(wb.factor(j).dense(), dtype=np.float64) for wb in wblocks] for j in measured}
    factors = [np.ones((1, n)) for n in sizes]
    T = np.ones((len(wblocks), d))
    q: dict[int, np.ndarray] = {}
    for j in measured:  # the start: each attribute's optimum for c = w²
        factors[j], T[:, j], q[j] = _best_factor(dense[j], w2)
    value = _objective(w2, T)
    history = [value]
    sweeps = 0
    while sweeps < max_sweeps and len(measured) > 1:
        sweeps += 1
        start = value
        for j in measured:
            others = np.prod(np.delete(T, j, axis=1), axis=1)
            A, t, q[j] = _best_factor(dense[j], w2 * others, q[j])
            T_new = T.copy()
            T_new[:, j] = t
            v = _objective(w2, T_new)
            if v < value:  # accepted only when it lowers the objective
                factors[j], T, value = A, T_new, v
        history.append(value)
        if not start - value > stall * start:
            break
    return GaussianKronResult(factors, value, history, sweeps, time.perf_counter() - t0)
