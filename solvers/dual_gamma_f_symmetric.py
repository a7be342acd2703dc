"""γ_F's dual over orbit weights: ``solvers.dual_gamma_f`` on the symmetry-reduced problem.

The reduction (``factorize.structured.symmetry``) gives f(q) and the per-orbit sums of
``diag M_q^{1/2}`` for a weight q constant on the orbits of the workload's symmetry group.
With orbit masses ``Q_o = |o|·q_o`` on the simplex, the KKT fixed point of the dense solver,
``q_c = [M_q^{1/2}]_cc / f(q)``, summed over an orbit reads

    ``Q_o = (Σ_{c∈o} [M_q^{1/2}]_cc) / f(q)``,

iterated in log-masses with the same safeguarded Anderson acceleration. Every iterate's
value is a valid lower bound (``f(q)/√k`` with Σq = 1); the primal estimate
``f² · max_o r_o`` with ``r_o = (Σ_{c∈o}[M^{1/2}]_cc)/(Q_o f)`` (the "scaled" strategy of
``solvers.dual_gamma_f``, a bound only when every sector matrix is non-singular, so not
computed otherwise) only decides when to stop; a rank-deficient W stops when ``window``
iterations raise the dual by at most ``progress_tol`` relatively, or at ``max_iters``. The work is deterministic: at most ``max_iters`` evaluations, each one symmetric
eigendecomposition per sector (Σ_s size_s³), no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.dual_common import Deadline, SafeguardedAnderson, log_weights, simplex_from_log
from solvers.errors import SolverFailedError


@dataclass(frozen=True)
class SymmetricDualResult:
    """Per-cell weights on the orbit tensor (summing to 1 over cells), the dual value
    ``f/√k`` there (a lower estimate of γ_F), the primal estimate, iterations."""

    weights: np.ndarray
    lower_estimate: float
    upper_estimate: float
    iterations: int
    converged: bool


def solve_symmetric_gamma_f(red: Any, *, target_gap: float = 1e-7, memory: int = 5,
                            max_iters: int = 200, stall_iters: int = 25, progress_tol: float = 1e-9,
                            window: int = 10) -> SymmetricDualResult:
    """Maximise the reduced dual (module docstring) for ``red``, a
    ``factorize.structured.symmetry.Reduction`` (its ``evaluate``, ``orbit_sizes``, ``rows``,
    ``shape``)."""
    sizes = red.orbit_sizes.reshape(-1)
    k = red.rows
    x = np.log(sizes / float(np.sum(sizes)))  # uniform per cell
    loop = SafeguardedAnderson(memory, target_gap, stall_iters, Deadline(None))
    it = 0
    for it in range(1, max_iters + 1):
        Q = simplex_from_log(x)
        f, diag, zeros = red.evaluate(Q / sizes)
        if not (math.isfinite(f) and f > 0):
            raise SolverFailedError("the reduced γ_F dual has no positive value (a zero workload?)")
        diag = diag.reshape(-1)
        plain = log_weights(diag, f)
        primal = {}
        if zeros == 0 and np.all(Q > 0):  # the "scaled" strategy spans W's rows only then
            r = diag / (Q * f)
            primal["scaled"] = math.sqrt(f * f * float(np.max(r)) / k)
        if loop.record(it, f / math.sqrt(k), plain, primal, Q):
            break
        lows = [h[1] for h in loop.history]
        if len(lows) > window and lows[-1] - lows[-1 - window] <= progress_tol * lows[-1]:
            break  # no primal estimate (rank-deficient W): the dual has stopped rising
        x = loop.next_iterate(x, plain)
    if loop.lower_at is None:
        raise SolverFailedError("the reduced γ_F dual reached no finite point")
    weights = (loop.lower_at / sizes).reshape(red.shape)
    return SymmetricDualResult(weights, loop.lower, loop.upper, it, loop.converged)
