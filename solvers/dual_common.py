"""What the specialised dual solvers share: their result, weights on the simplex, stopping.

The dual solvers (``dual_gamma_f``, ``dual_gamma_2``) iterate on dual weights, read a
primal strategy A off every iterate, and keep the best lower and the best upper bound
seen. Their own bound estimates decide only when to stop; the planner re-checks the
returned weights and strategy with ``factorize.planner.certificate.verify`` like any solver output.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.errors import SolverFailedError, SolverInputError

#: Eigenvalues below this fraction of the largest are treated as zero (rank detection).
REL_EIG_TOL = 1e-13

#: log-weights are floored this far below their maximum (e^-60 ≈ 1e-26: numerically zero).
LOG_FLOOR = -60.0


@dataclass(frozen=True)
class DualSolveResult:
    """Raw output of a dual solver: weights, candidate strategies and its own estimates."""

    q: np.ndarray  # column weights on the simplex (length N)
    p: np.ndarray | None  # row weights on the simplex (length k), γ₂ only
    strategies: dict[str, np.ndarray]  # candidate A matrices (m×N) by construction route
    lower_estimate: float  # the solver's own numbers, not certified
    upper_estimate: float
    iterations: int
    seconds: float
    converged: bool
    history: tuple[tuple[int, float, float], ...] = field(default=())


def simplex_from_log(x: np.ndarray) -> np.ndarray:
    """``softmax(x)``, with x floored at ``LOG_FLOOR`` below its maximum: every weight is
    positive (an extrapolated step can push log-weights arbitrarily low)."""
    w = np.exp(np.maximum(x - np.max(x), LOG_FLOOR))
    return w / np.sum(w)


def log_weights(values: np.ndarray, scale: float) -> np.ndarray:
    """``log(values / scale)`` floored at ``LOG_FLOOR`` below the maximum (zeros allowed)."""
    with np.errstate(divide="ignore"):
        out = np.log(np.maximum(values, 0.0) / scale)
    top = float(np.max(out))
    return np.maximum(out, top + LOG_FLOOR)


def positive_eigenpairs(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues > ``REL_EIG_TOL·λ_max`` of the symmetric PSD ``M`` and their vectors."""
    lam, V = np.linalg.eigh(M)
    top = float(lam[-1]) if lam.size else 0.0
    if not top > 0:
        raise SolverFailedError("the weighted Gram matrix has no positive eigenvalue")
    keep = lam > REL_EIG_TOL * top
    return lam[keep], V[:, keep]


def square_finite(M: np.ndarray, name: str) -> np.ndarray:
    """``M`` as a float64 non-empty square matrix with finite entries, or ``ValueError``."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise SolverInputError(f"{name} must be a non-empty square matrix, got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise SolverInputError(f"{name} has a non-finite entry")
    return M


class SafeguardedAnderson:
    """The loop bookkeeping both dual solvers share: Anderson-accelerated fixed-point steps
    on log-weights, the best dual (lower) and primal (upper) estimates seen, and when to stop.

    Safeguard: when an accelerated step lowers the dual objective (which the plain map does
    not), the history is dropped and the next iterate is the plain image of the best point.
    """

    def __init__(self, memory: int, target_gap: float, stall_iters: int, deadline: Deadline) -> None:
        from solvers.anderson import Anderson

        self.acc = Anderson(memory)
        self.target_gap = target_gap
        self.stall_iters = stall_iters
        self.deadline = deadline
        self.lower, self.upper = -math.inf, math.inf
        self.lower_at: Any = None  # the point of the best dual / primal value
        self.upper_at: Any = None
        self._lower_plain: Any = None
        self.route: str | None = None
        self.history: list[tuple[int, float, float]] = []
        self._since_improvement = 0

    @property
    def gap(self) -> float:
        return self.upper / self.lower - 1.0 if self.lower > 0 else math.inf

    @property
    def converged(self) -> bool:
        return self.gap <= self.target_gap

    def record(self, it: int, lower: float, plain: np.ndarray, primal: dict[str, float],
               point) -> bool:
        """Record iteration ``it`` at ``point`` (dual value, plain image T(x), primal values
        by route, possibly none); True when the loop should stop."""
        improved = False
        self._last_lower = lower
        if lower > self.lower:
            self.lower, self.lower_at, self._lower_plain = lower, point, plain
            improved = True
        route = min(primal, key=primal.__getitem__) if primal else None  # {}: no valid primal
        if route is not None and primal[route] < self.upper:
            self.upper, self.upper_at, self.route = primal[route], point, route
            improved = True
        self.history.append((it, self.lower, self.upper))
        self._since_improvement = 0 if improved else self._since_improvement + 1
        return (self.converged or self._since_improvement >= self.stall_iters
                or self.deadline.passed())

    def next_iterate(self, x: np.ndarray, plain: np.ndarray) -> np.ndarray:
        """The next log-weights: accelerated, or the plain image of the best point."""
        if self._last_lower < self.lower * (1 - 1e-12):
            self.acc.reset()
            return self._lower_plain
        return self.acc.step(x, plain)


def cholesky_solve(S: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``S⁻¹ B`` for symmetric positive definite S (raises ``LinAlgError`` otherwise).

    numpy only: numpy and scipy bundle separate OpenBLAS builds whose thread pools, used
    alternately in one loop, were measured to slow each other down by orders of magnitude
    on a loaded 2-core machine.
    """
    L = np.linalg.cholesky(S)
    return np.linalg.solve(L.T, np.linalg.solve(L, B))


class Deadline:
    """A wall-clock budget (None = unlimited)."""

    def __init__(self, seconds: float | None) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def passed(self) -> bool:
        return self.seconds is not None and self.elapsed() >= self.seconds
