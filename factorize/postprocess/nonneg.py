"""``nonneg``: the released answers' marginal tables projected onto non-negative consistent tables.

Computed (``postprocess.tables``: block o's answers are ``w_o G_o μ_{S_o}``, a linear map of
the marginal table on its attributes):

    μ* = argmin { f(μ) = Σ_o ‖w_o G_o μ_{S_o} − y_o‖² : μ_T ≥ 0, Σ μ_T = n̂, the tables agree
                  on every shared attribute set },

the answers' least squares (for a marginal workload, ``Σ_T c_T ‖μ_T − b_T‖²`` up to a
constant), n̂ = max(0, the least-squares total of the release) — the common total of the
least-squares consistent tables of the targets b_T (``postprocess.consistency``), the total's
least-squares estimate from the answers alone for a marginal workload (as the dense
``nonneg`` of ``executor.postprocess``). This is the answers' least-squares fit over the
*local polytope* of the tables (non-negative, pairwise consistent, of total n̂): Private-PGM's
estimator (McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019, which also fixes the total to an estimate) with the marginal
polytope relaxed to the local polytope as in McKenna, Pradhan, Sheldon & Miklau, "Relaxed
marginal consistency for differentially private query answering" (NeurIPS 2021): it never
forms a distribution over the N cells, so it works at any domain size. Where the tables form
a decomposable family (a junction tree, e.g. ``{a,b}, {b,c}``) the two polytopes are equal and
μ* is the marginals of the best non-negative histogram of total n̂ (the dense ``nonneg``);
otherwise a histogram with exactly these tables may not exist, and the tables are still
consistent pairwise. When the true tables lie in the polytope (their total n̂), μ*'s answers
are no farther from the true answers than the released ones: a projection onto a convex set
in the answers' norm does not expand distances to its points.

Solved by over-relaxed ADMM (Boyd et al. 2011, §3.4.3 and §5: the splitting μ = z, μ in the
affine set A of consistent tables of total n̂, z ≥ 0) in the c-weighted norm ‖·‖_c of the
targets' weights: ``μ ← argmin_{μ∈A} f(μ) + (ρ/2)‖μ − (z − u)‖²_c``, ``μ̂ = α μ + (1 − α) z``,
``z ← max(0, μ̂ + u)``, ``u ← u + μ̂ − z``, α = 1.8, ρ from :data:`RHO0`, doubled or halved
every 50 iterations when one residual exceeds three times the other (Boyd et al. §3.4.1). The
μ-step is ``P_A((2b + ρ(z − u)) / (2 + ρ))`` for a marginal workload (f's Hessian is 2c there,
``P_A`` the c-orthogonal projection onto A, ``postprocess.consistency``); otherwise conjugate
gradients in the c-inner product on A (Hestenes & Stiefel 1952; each step one application of
f's Hessian, ``MarginalLayout.gram``, and one projection), from the previous μ, to
:data:`CG_TOL` relative residual or :data:`CG_MAX` steps. Stopped when the primal and
dual residuals ``‖μ − z‖_c`` and ``ρ‖z − z_prev‖_c`` are both ≤ ``tol · √(Σ_T cells_T)`` —
``tol`` times the expected size in the c-norm of noise of unit variance per answer
(``MarginalLayout.targets``), a target relative to the release's noise rather than to
floating point — after ``max_iter`` iterations, or at the deadline.

The last iterate z is non-negative and consistent only up to the residual; the tables returned
are z made consistent from the total down by raking (``postprocess.raking``): non-negative,
every table of total n̂ exactly, and agreeing on every shared attribute set to rounding where
every level has at most two parents (1- and 2-way tables, CDFs and ranges of them); where a
level has three or more parents and raking leaves disagreement, the raked tables are fitted to
each other (``postprocess.mutual_fit``) until they agree to ``raking.RAKE_TOL`` of the total,
at some cost in accuracy (the uniform floor that makes it fast); the largest disagreement left
is reported.

Why not the projection to floating-point accuracy: on Adult's all ≤3-way tables (470 tables,
21 million cells, half of them negative in the release — the 1-million-cell 3-way tables of
the 100-value attributes are nearly all noise) each iteration costs about a CPU second and
the residuals fall like 1/k (relative to ‖b‖_c: 7e-3 after 10 iterations, 1.3e-3 after 40
from ρ = 1), while the answers' error against the truth changes by under 0.1% after 20; and
projecting the iterate onto A and adding the uniform tables that lift its most negative cell
(an exactly consistent repair) adds that cell's deficit times a million to every table's
total (4·10⁵ records after 60 iterations on 48,842): usable only once the residual is near
1e-7.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .consistency import Consistency
from .raking import rake_tables
from .tables import MarginalLayout

#: Over-relaxation α, the starting ρ, and ρ rebalanced every this many iterations when one
#: residual exceeds the other by this factor (module docstring).
RELAX = 1.8
RHO0 = 8.0
BALANCE_EVERY = 50
BALANCE_RATIO = 3.0
#: The μ-step's conjugate gradients (non-marginal blocks): relative residual and step limit.
CG_TOL = 1e-10
CG_MAX = 500


@dataclass(frozen=True)
class NonnegFit:
    """The tables (one array per table of the layout, shaped as the table), the ADMM
    iterations run, the final residual ``max(primal, dual) / √(Σ cells)``, whether it reached
    the tolerance, the least-squares total n̂ (every table's total), the largest disagreement
    between two tables on shared attributes after raking, and the most raking sweeps a level
    took."""

    tables: list[np.ndarray]
    iterations: int
    residual: float
    converged: bool
    n_hat: float
    disagreement: float
    rake_sweeps: int
    mutual_sweeps: int = 0


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

    # per-cell c and C⁻¹(2 Σ_o w_o G_oᵀ y_o) for the CG μ-step; a marginal workload needs neither
    weight = None if layout.diagonal else np.repeat(c, np.diff([0, *flat.ends]))
    rhs0 = None if weight is None else 2.0 * flat.join(layout.adjoint(y)) / weight

    def step(v: np.ndarray, rho: float, start: np.ndarray) -> np.ndarray:
        """The μ-step (module docstring): closed form for a marginal workload, else CG."""
        if weight is None or rhs0 is None:
            return project((2.0 * b + rho * v) / (2.0 + rho))
        return _cg_step(layout, proj, flat, weight, rhs0 + rho * v, rho, start)

    mu = project(b)
    scale = math.sqrt(sum(layout.cells(T) for T in layout.tables))
    z, u, rho = np.maximum(mu, 0.0), np.zeros_like(mu), RHO0
    it, residual = 0, float(norm(mu - z)) / scale
    if residual > 0.0 or rhs0 is not None:  # P_A(b) is f's minimiser on A for marginals only
        for it in range(1, max_iter + 1):  # noqa: B007 — the count is reported
            mu = step(z - u, rho, mu)
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
    raked = rake_tables(layout.tables, flat.split(z), c, layout.sizes, n_hat, deadline=deadline)
    return NonnegFit(raked.tables, it, residual, residual <= tol, n_hat, raked.disagreement,
                     raked.sweeps, raked.mutual_sweeps)


def _cg_step(layout: MarginalLayout, proj: Consistency, flat: _Flat, weight: np.ndarray,
             rhs: np.ndarray, rho: float, start: np.ndarray) -> np.ndarray:
    """The μ-step for non-marginal blocks: ``argmin_{μ∈A} f(μ) + (ρ/2)‖μ − v‖²_c`` from
    ``start`` ∈ A by conjugate gradients in the c-inner product on the consistent tables of
    total 0, the subspace parallel to A. Its normal equations there are
    ``P₀(C⁻¹(2H + ρC) μ) = P₀(rhs)``, ``rhs = C⁻¹(2 Σ_o w_o G_oᵀ y_o) + ρ v``, H = f's
    Hessian's half (``MarginalLayout.gram``), P₀ the c-orthogonal projection (self-adjoint in
    the c-inner product, so the operator is, and positive definite for ρ > 0)."""

    def p0(v: np.ndarray) -> np.ndarray:
        return flat.join(proj.project(flat.split(v), total=0.0))

    def op(v: np.ndarray) -> np.ndarray:
        return 2.0 * flat.join(layout.gram(flat.split(v))) / weight + rho * v

    def dot(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.sum(weight * a * b))

    x = start.copy()
    r = p0(rhs - op(x))
    p = r.copy()
    rr = dot(r, r)
    limit = CG_TOL ** 2 * max(dot(rhs, rhs), 1e-300)
    for _ in range(CG_MAX):
        if rr <= limit:
            break
        q = p0(op(p))
        alpha = rr / dot(p, q)
        x += alpha * p
        r -= alpha * q
        rr_new = dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x
