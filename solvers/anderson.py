"""Anderson acceleration (type II) of a fixed-point iteration ``x ← T(x)``.

Given the last m iterates x_i and images g_i = T(x_i), with residuals f_i = g_i − x_i, the
accelerated step is ``x⁺ = g_m − Σ_j γ_j (g_{j+1} − g_j)`` where γ solves the least-squares
problem ``min_γ ||f_m − Σ_j γ_j (f_{j+1} − f_j)||`` (Walker & Ni, SIAM J. Numer. Anal. 49,
2011, eq. (2.2); Anderson 1965). With m = 0 it is the plain iteration.

The caller decides whether to trust a step (the dual solvers keep the best certified
iterate and ``reset()`` after a step that made things worse), so nothing here can make a
solver report a wrong number: acceleration only changes which points are evaluated.
"""

from __future__ import annotations

import numpy as np

from solvers.errors import SolverInputError


class Anderson:
    """A bounded history of (iterate, image) pairs and the mixed next iterate."""

    def __init__(self, memory: int = 5, regularization: float = 1e-10) -> None:
        if memory < 0:
            raise SolverInputError("Anderson memory must be ≥ 0")
        self.memory = memory
        self.regularization = regularization
        self._x: list[np.ndarray] = []
        self._g: list[np.ndarray] = []

    def reset(self) -> None:
        self._x.clear()
        self._g.clear()

    def step(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Record ``(x, T(x) = g)`` and return the next iterate."""
        if self.memory == 0:
            return g
        self._x.append(np.array(x, dtype=np.float64))
        self._g.append(np.array(g, dtype=np.float64))
        if len(self._x) > self.memory + 1:
            self._x.pop(0)
            self._g.pop(0)
        if len(self._x) < 2:
            return g
        F = np.array([gi - xi for gi, xi in zip(self._g, self._x, strict=True)])  # (m+1, n)
        dF = np.diff(F, axis=0)
        dG = np.diff(np.array(self._g), axis=0)
        # Tikhonov-regularised normal equations: the differences can be nearly dependent.
        H = dF @ dF.T
        H[np.diag_indices_from(H)] += self.regularization * max(float(np.trace(H)), 1e-300)
        try:
            gamma = np.linalg.solve(H, dF @ F[-1])
        except np.linalg.LinAlgError:
            self.reset()
            return g
        out = self._g[-1] - gamma @ dG
        if not np.all(np.isfinite(out)):
            self.reset()
            return g
        return out
