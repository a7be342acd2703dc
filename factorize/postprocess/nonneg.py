"""``nonneg``: the released marginal tables projected onto non-negative consistent tables.

Computed (``postprocess.tables`` for the weights c_T and targets b_T of the answers):

    μ* = argmin { Σ_T c_T ‖μ_T − b_T‖² : μ_T ≥ 0, Σ μ_T = n̂, the tables agree on every
                  shared attribute set },

n̂ = max(0, the least-squares total of the release) — the common total of the least-squares
consistent tables (``postprocess.consistency``), which is the total's least-squares
estimate from the answers alone (as the dense ``nonneg`` of ``executor.postprocess``). This
is the answers' least-squares fit over the *local polytope* of the tables (non-negative,
pairwise consistent, of total n̂): Private-PGM's estimator (McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019, which
also fixes the total to an estimate) with the marginal polytope relaxed to the local polytope
as in McKenna, Pradhan, Sheldon & Miklau, "Relaxed marginal consistency for differentially
private query answering" (NeurIPS 2021): it never forms a distribution over the N cells, so
it works at any domain size. Where the tables form a decomposable family (a junction tree,
e.g. ``{a,b}, {b,c}``) the two polytopes are equal and μ* is the marginals of the
best non-negative histogram of total n̂ (the dense ``nonneg``); otherwise a histogram with
exactly these tables may not exist, and the tables are still consistent pairwise.

Solved by over-relaxed ADMM (Boyd et al. 2011, §3.4.3 and §5: the splitting μ = z, μ in the
affine set A of consistent tables of total n̂, z ≥ 0) in the c-weighted norm:
``μ ← P_A((2b + ρ(z − u)) / (2 + ρ))``, ``μ̂ = α μ + (1 − α) z``, ``z ← max(0, μ̂ + u)``,
``u ← u + μ̂ − z``, α = 1.8, ρ doubled or halved every 50 iterations when one residual exceeds
three times the other (Boyd et al. §3.4.1). Stopped when the primal and dual residuals
``‖μ − z‖_c`` and ``ρ‖z − z_prev‖_c`` are both ≤ ``tol·‖b‖_c``, after ``max_iter``
iterations, or at the deadline. The tables returned are then exactly consistent and
non-negative: ``μ = P_A(z)`` (consistent, total n̂) plus the uniform tables of a common mass
s (consistent), s the least that leaves no cell negative — s is reported, of the order of
the residual times the largest table's cells, and the total is n̂ + s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .consistency import Consistency
from .tables import MarginalLayout

#: Over-relaxation α, and ρ rebalanced every this many iterations when one residual exceeds
#: the other by this factor (module docstring).
RELAX = 1.8
BALANCE_EVERY = 50
BALANCE_RATIO = 3.0


@dataclass(frozen=True)
class NonnegFit:
    """The projected tables (one array per table of the layout, shaped as the table), the
    ADMM iterations run, the final relative residual ``max(primal, dual) / ‖b‖_c``, whether it
    reached the tolerance, the least-squares total n̂, the uniform mass s added and the tables'
    common total n̂ + s."""

    tables: list[np.ndarray]
    iterations: int
    residual: float
    converged: bool
    n_hat: float
    shift: float
    total: float


class _Flat:
    """The tables as one flat vector (ADMM's arithmetic) and back, and the c-weighted norm."""

    def __init__(self, layout: MarginalLayout, weights: np.ndarray) -> None:
        self.shapes = [layout.shape(T) for T in layout.tables]
        self.ends = np.cumsum([math.prod(s) for s in self.shapes]).tolist()
        self.starts = [0, *self.ends[:-1]]
        self.weights = weights

    def split(self, v: np.ndarray) -> list[np.ndarray]:
        return [v[a:b].reshape(s) for a, b, s in zip(self.starts, self.ends, self.shapes, strict=True)]

    def norm(self, v: np.ndarray) -> float:
        """``‖v‖_c = √(Σ_T c_T ‖v_T‖²)`` (per-table sums: no per-cell weight vector)."""
        return math.sqrt(float(self.weights @ np.add.reduceat(v * v, self.starts)))

    @staticmethod
    def join(tables: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([t.reshape(-1) for t in tables])


def project_nonneg(layout: MarginalLayout, y: np.ndarray, *, max_iter: int, tol: float,
                   deadline: float | None = None) -> NonnegFit:
    """The projection of the module docstring of the released answers ``y``."""
    b_tables, c = layout.targets(y)
    proj = Consistency(layout.sizes, layout.tables, c)
    flat = _Flat(layout, c)
    norm = flat.norm
    b = flat.join(b_tables)
    n_hat = max(0.0, proj.least_squares_total(b_tables))

    def project(v: np.ndarray) -> np.ndarray:
        return flat.join(proj.project(flat.split(v), total=n_hat))

    mu = project(b)
    it, residual = 0, 0.0
    if mu.min() < 0:
        scale = max(norm(b), 1e-300)
        z, u, rho = np.maximum(mu, 0.0), np.zeros_like(mu), 1.0
        residual = math.inf
        for it in range(1, max_iter + 1):  # noqa: B007 — the count is reported
            mu = project((2.0 * b + rho * (z - u)) / (2.0 + rho))
            relaxed = RELAX * mu + (1.0 - RELAX) * z
            z_prev = z
            z = np.maximum(relaxed + u, 0.0)
            u += relaxed - z
            primal, dual = norm(mu - z), rho * norm(z - z_prev)
            residual = max(primal, dual) / scale
            if residual <= tol or (deadline is not None and time.monotonic() > deadline):
                break
            if it % BALANCE_EVERY == 0:
                if primal > BALANCE_RATIO * dual:
                    rho, u = 2.0 * rho, u / 2.0
                elif dual > BALANCE_RATIO * primal:
                    rho, u = rho / 2.0, u * 2.0
        mu = project(z)
    tables, shift = _shifted(flat.split(mu))
    return NonnegFit(tables, it, residual, residual <= tol, n_hat, shift, n_hat + shift)


def _shifted(tables: list[np.ndarray]) -> tuple[list[np.ndarray], float]:
    """Consistent tables plus the uniform tables of the least common mass s ≥ 0 that leaves no
    cell negative (module docstring); ``(tables, s)``. Any cell below zero after the shift is
    floating-point rounding of a zero and is set to 0."""
    s = max(t.size * max(0.0, -float(t.min())) for t in tables)
    if s == 0.0:
        return tables, 0.0
    return [np.maximum(t + s / t.size, 0.0) for t in tables], s
