"""Post-processing projections for released second-moment matrices (Nikolov 2023, §6; Dwork, Nikolov & Talwar 2014, §4).

Two mechanisms release a noisy second-moment matrix ``M̃ ≈ Σ_records x xᵀ`` of n records
``x ∈ R^d``; the least-squares estimator (docs/math.md §8.1, "projection") returns the point of the
scaled sensitivity body nearest to M̃ in Frobenius norm. It reads released values only, so
privacy is unchanged, and the error never grows (the body is convex and contains the truth).

1. Covariance / second moments (Nikolov 2023, §6, proof of Lemma 22). For records in ``r·B₂^d``
   the sensitivity body of ``x ↦ x xᵀ`` is ``conv{x xᵀ : ||x||₂ ≤ r}``. The paper's spectral
   argument (A = Σ λ_i (r a_i)(r a_i)ᵀ) shows that the hull of the *sphere* ``||x||₂ = r``
   is the spectraplex ``{M ⪰ 0, tr M = r²}``; the hull of the *ball* adds the origin, giving
   ``{M ⪰ 0, tr M ≤ r²}`` — the body for records whose squared norm varies, e.g. 0/1-coded
   records (``||x||² = #ones ≤ r² := d`` or a public bound on the number of ones). Summing n
   records: ``Σ x xᵀ ∈ n·body``, i.e. trace ``t = n r²``. Both bodies are unitarily
   invariant, so the projection of the symmetrised ``S = (M̃ + M̃ᵀ)/2 = Q diag(μ) Qᵀ`` is
   ``Q diag(λ) Qᵀ`` with λ the projection of μ onto ``{λ ≥ 0, Σλ = t}`` (equality) or onto
   ``{λ ≥ 0, Σλ ≤ t}`` (inequality): ``λ = max(μ, 0)`` if that sums to ≤ t, otherwise the
   simplex projection (the constraint is then active). One eigendecomposition, O(d³); the
   equality case is ``spectral_projection.project_to_spectraplex``.

2. Grothendieck relaxation for 2-way parities / marginals (Dwork, Nikolov & Talwar 2014, §4, RelaxedProj). For
   ±1-coded records, ``Σ x xᵀ ∈ n·conv{x xᵀ : x ∈ {±1}^m} ⊆ n·E_m`` with the elliptope
   ``E_m = {Z ⪰ 0, diag Z = 1}`` (the relaxation: linear optimisation over the cut polytope
   is MAX-CUT, over E_m an SDP; its mean width is larger by at most the Grothendieck
   constant, Dwork, Nikolov & Talwar 2014, Lemma 4.4, so the error bound survives). Only the off-diagonal entries
   are released — the diagonal is n for every ±1 record — so the estimator is

       Ẑ = argmin_{Z ∈ n·E_m} f(Z),   f(Z) = ½ ||Z − S||_F²,   S = sym(M̃) with diag S := n

   (f counts each released entry twice; diag Z = diag S = n contributes nothing, so this is
   the projection of the off-diagonal part). It is computed by Frank–Wolfe (Dwork, Nikolov & Talwar 2014, §3.1):
   the gradient is ``G = Z − S`` (zero diagonal); the linear step
   ``min_{Y ∈ n·E} ⟨G, Y⟩ = −n · max_{Z ∈ E} ⟨−G, Z⟩`` is the MAX-CUT-type SDP solved by
   ``solvers.grothendieck.solve_grothendieck(−G)`` (Burer–Monteiro, warm-started from the
   previous factor V), whose vertex is ``Y = n VᵀV``; exact line search
   ``γ = clip(⟨−G, Y − Z⟩ / ||Y − Z||², 0, 1)``.

   Certified gap. The SDP returns ``upper ≥ max_{E} ⟨−G, ·⟩`` proved by weak duality with a
   Cholesky certificate of ``diag(d) + G ⪰ 0`` (``upper = Σd``). By convexity of f,

       f(Z) − min_{n·E} f ≤ ⟨G, Z⟩ − min_{Y ∈ n·E} ⟨G, Y⟩ ≤ ⟨G, Z⟩ + n · upper,

   which is what ``gap`` reports, plus a rounding allowance
   ``4(m² + 2)u · Σ|Ĝ_ij|(|Z_ij| + n) + 4u·n|upper|`` covering the floating-point
   ``Ĝ = fl(Z − S)`` (the exact gradient differs by ≤ u|Ĝ| entrywise and ``|Y_ij| ≤ n``) and
   the inner product. So ``gap`` is a true upper bound on the suboptimality of the returned
   Z (it is computed *at* the returned iterate: the loop stops before stepping). It also
   bounds the distance to the exact projection: f is 1-strongly convex, so
   ``||Z − Ẑ||_F ≤ √(2·gap)``. Z itself lies in n·E up to rounding (diag set to n exactly;
   PSD as a convex combination of Gram matrices, λ_min ≥ −O(m n u)).

   Iteration budget (Clarkson 2010, Thm 2.3; Dwork, Nikolov & Talwar 2014, Thm 3.1): ``f(Z_T) − f* ≤ 2C_f/(T+2)``
   with ``C_f ≤ diam(n·E_m)²``; for Z, Z' ∈ E, ``||Z||_F² ≤ m²`` and ``⟨Z, Z'⟩ ≥ 0`` (both
   PSD), so ``diam(n·E_m)² ≤ 2 n² m²`` (attained for even m by J and a balanced ``s sᵀ``).
   The budget for additive accuracy α is ``T = ⌈2 C_f / α⌉ − 2``; the loop stops earlier as
   soon as the certified gap is ≤ ``target = max(gap_tol, rel_gap_tol · f(Z), 1e-13 · C_f)``
   (the last term, ``GAP_FLOOR``, is the rounding level: a point already in the body stops).

   Oracle accuracy. The SDP's own duality gap enters the certified FW gap additively as
   ``n(upper − lower)``, so each linear step is solved to the absolute accuracy
   ``θ · max(gap_prev, target) / n`` (θ = ``ORACLE_FRACTION``; an inexact oracle in the sense
   of Jaggi 2013, Thm 1) or the relative gap ``ORACLE_REL_GAP`` (``FIRST_ORACLE_REL_GAP``
   for the first step), at most ``ORACLE_MAX_ITERS`` iterations, with ``require_gap=False``:
   the bound it returns is valid whatever its accuracy, only looser.

   Start. Plain Frank–Wolfe converges as O(1/T) (measured: d = 30 needs ~350 linear steps
   for a certified relative gap of 1e-3). For this particular body the exact projection is
   ``Ẑ = n · ncm(S/n)``, the nearest correlation matrix (Higham 2002), which alternating
   projections with Dykstra's correction approach at one eigendecomposition per iteration;
   by default the iterate starts from that approximation (rescaled to unit diagonal, so
   feasible) and Frank–Wolfe certifies — and if needed refines — it, typically with one or
   two linear steps. ``dykstra_iters=0`` gives the plain RelaxedProj of Dwork, Nikolov & Talwar 2014. Frank–Wolfe
   with the Grothendieck oracle is kept as the certifying engine because it needs only the
   linear oracle, so it applies unchanged to weighted query distributions and to the
   implicit relaxations of higher-way parities (Dwork, Nikolov & Talwar 2014, §4), where no Dykstra step exists.

From 2-way marginals of 0/1 attributes to the ±1 moment matrix (Dwork, Nikolov & Talwar 2014, §2.4 / §4: the
"expanded" query matrix adds the lower-order parities). Code each record ``b ∈ {0,1}^d`` as
``s = 2b − 1 ∈ {±1}^d`` and augment ``x = (1, s) ∈ {±1}^{d+1}``. Then

    M = Σ x xᵀ,   M_00 = n,  M_0,a+1 = Σ s_a,  M_a+1,b+1 = Σ s_a s_b,  diag M = n,

and the four cells of the 2-way marginal of attributes a < b, ``c_ij = #{b_a = i, b_b = j}``,
are affine in these (the 2×2 Walsh–Hadamard transform, σ_0 = −1, σ_1 = +1):

    c_ij = (n + σ_i Σs_a + σ_j Σs_b + σ_iσ_j Σs_a s_b) / 4,
    n = Σ c,   Σs_a = c_10 + c_11 − c_00 − c_01,   Σs_b = c_01 + c_11 − c_00 − c_10,
    Σs_a s_b = c_00 + c_11 − c_01 − c_10.

So the relaxation body for the augmented vector, ``n·E_{d+1}``, contains every consistent
set of 2-way marginal tables (with their 1-way margins and total). Per table the transform
``H/2`` (H the 4×4 ±1 Hadamard matrix) is orthogonal, so for noisy, mutually inconsistent
tables the least-squares moments are exactly: ``Σs_a s_b`` from its one table, ``Σs_a``
the mean over the d − 1 tables containing a, n the mean of all table totals
(``marginals_to_moments``). Tables use the project's marginal-workload layout:
pairs in ``workloads.marginal_builders.marginal_subsets(d, 2)`` order (lexicographic a < b), cell
``[i, j]`` = row ``2i + j`` of that pair's block of ``workloads.marginals([2]*d, 2)``. On
integer counts both conversions are exact in floating point (integer sums below 2⁵³, then
a division by 4 or by the count of equal terms). Note the Frobenius projection weights
every moment equally (the unweighted parity vector of Dwork, Nikolov & Talwar 2014); the first row, estimated from
d − 1 tables, is in fact less noisy than the rest.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from factorize.geometry.errors import GeometryError
from factorize.geometry.spectral_projection import project_to_simplex, project_to_spectraplex
from factorize.norms import UNIT_ROUNDOFF
from factorize.numerics import positive_number
from solvers.grothendieck import solve_grothendieck

__all__ = [
    "GAP_FLOOR",
    "ORACLE_FRACTION",
    "MomentProjection",
    "elliptope_diameter_sq",
    "marginals_to_moments",
    "moments_to_marginals",
    "project_second_moment",
    "project_to_elliptope",
]

_U = UNIT_ROUNDOFF

#: The linear step's SDP is solved to this fraction of the previous certified FW gap.
ORACLE_FRACTION = 0.25

#: Certified gaps below this fraction of C_f = diam(n·E)² = 2n²m² are not pursued (the
#: rounding level: a point already in the body stops at once).
GAP_FLOOR = 1e-13

#: Iterations allowed to one linear-step SDP (then its best certified bounds are used).
ORACLE_MAX_ITERS = 500

#: Relative duality gap at which a linear-step SDP always stops (the absolute target,
#: a fraction of the FW gap, usually stops it first); looser for the first linear step,
#: which has no previous gap to scale from.
ORACLE_REL_GAP = 1e-12
FIRST_ORACLE_REL_GAP = 1e-6


@dataclass(frozen=True)
class MomentProjection:
    """An approximate projection onto n·E_m with a certified suboptimality bound.

    ``M``: the projected (m×m, symmetric, diag = n) moment matrix; ``gap``: a proved upper
    bound on ``f(M) − min_{n·E} f`` with ``f = ½||· − S||_F²``, so ``||M − Ẑ||_F ≤ √(2 gap)``;
    ``objective``: ``f(M)``; ``iterations``: Frank–Wolfe linear steps (SDP solves);
    ``clarkson_bound``: ``2 C_f / (T + 2)`` with ``C_f = 2 n² m²`` (a-priori, for reports);
    ``seconds``: wall time.
    """

    M: np.ndarray
    gap: float
    iterations: int
    clarkson_bound: float
    seconds: float
    objective: float = math.nan


# ---------------------------------------------------------------------------------
# 1. covariance / second moments: {M ⪰ 0, tr M = t} or {M ⪰ 0, tr M ≤ t}
# ---------------------------------------------------------------------------------
def project_second_moment(M_noisy: np.ndarray, trace: float, *, inequality: bool = False) -> np.ndarray:
    """``argmin ||X − M̃||_F`` over ``{X ⪰ 0, tr X = trace}`` (or ``tr X ≤ trace``).

    ``trace = n r²`` for n records in ``r·B₂^d`` (Nikolov 2023, §6): equality when every record
    has norm exactly r, ``inequality=True`` when the norm varies (0/1-coded records). M̃
    is symmetrised first (the projection of M̃ equals that of ``(M̃ + M̃ᵀ)/2``). Eigenvalues
    μ of the symmetric part are mapped to their projection onto ``{λ ≥ 0, Σλ = trace}``, or
    for the inequality to ``max(μ, 0)`` when ``Σ max(μ, 0) ≤ trace`` and to the simplex
    projection otherwise (the KKT conditions of the separable problem).
    """
    M = _square_finite(M_noisy, "M_noisy")
    trace = positive_number("trace", trace)
    if not inequality:
        P = project_to_spectraplex(M, trace)
        return 0.5 * (P + P.T)  # exactly symmetric
    lam, Q = np.linalg.eigh(0.5 * (M + M.T))
    mu = np.maximum(lam, 0.0)
    if math.fsum(mu.tolist()) > trace:
        mu = project_to_simplex(lam, trace)
    out = (Q * mu[None, :]) @ Q.T
    return 0.5 * (out + out.T)


# ---------------------------------------------------------------------------------
# 2. Grothendieck relaxation: n·E_m = {Z ⪰ 0, diag Z = n}, by Frank–Wolfe
# ---------------------------------------------------------------------------------
def elliptope_diameter_sq(m: int, n: float = 1.0) -> float:
    """``2 n² m²`` ≥ ``diam(n·E_m)²`` in Frobenius norm (``||Z||² ≤ m²``, ``⟨Z, Z'⟩ ≥ 0``)."""
    return 2.0 * float(n) ** 2 * float(m) ** 2


def project_to_elliptope(M_noisy: np.ndarray, n: float, *, alpha: float | None = None,
                         max_iters: int | None = None, gap_tol: float = 0.0,
                         rel_gap_tol: float = 1e-3, dykstra_iters: int = 100,
                         time_limit: float | None = None,
                         rng: np.random.Generator | None = None) -> MomentProjection:
    """Frank–Wolfe projection of the off-diagonal part of M̃ onto ``n·E_m`` (Dwork, Nikolov & Talwar 2014, §4).

    Minimises ``f(Z) = ½||Z − S||_F²`` over ``{Z ⪰ 0, diag Z = n}``, ``S = sym(M̃)`` with its
    diagonal replaced by n (the diagonal of M̃ is ignored: it is not released). Each linear
    step is ``solve_grothendieck(−G)`` for ``G = Z − S``, and every iterate's certified gap
    is ``⟨G, Z⟩ + n·upper`` (+ rounding allowance; module docstring).

    Stopping: at the first iterate whose certified gap is ≤ ``gap_tol``, ≤ ``GAP_FLOOR · C_f``
    or ≤ ``rel_gap_tol · f(Z)`` (default 1e-3: Z is then within ``√(2e-3)·dist(S, n·E)
    ≈ 0.045·dist`` of the exact projection); otherwise after the budget — ``max_iters`` if
    given, else Clarkson's ``T = ⌈2 C_f/α⌉ − 2`` with ``C_f = 2n²m²`` and ``α`` defaulting to
    ``1e-3 · C_f`` (T = 1998) — or at ``time_limit`` seconds (checked after each step).

    Start (``dykstra_iters``): the iterate starts from n times the Higham / Dykstra
    nearest-correlation approximation of S/n (at most ``dykstra_iters`` eigendecompositions,
    then rescaled to unit diagonal, so feasible); Frank–Wolfe then certifies and refines it.
    ``dykstra_iters=0`` is the plain RelaxedProj start of Dwork, Nikolov & Talwar 2014: the PSD part of S/n rescaled
    to unit diagonal. Either start equals S when S is already in the body. ``rng`` seeds the
    first SDP's random factor (later ones are warm-started from the previous V).
    """
    start = time.perf_counter()
    S = _square_finite(M_noisy, "M_noisy")
    n = positive_number("n", n)
    if not (math.isfinite(gap_tol) and gap_tol >= 0):
        raise GeometryError(f"gap_tol must be a finite number ≥ 0, got {gap_tol}")
    if not (math.isfinite(rel_gap_tol) and rel_gap_tol >= 0):
        raise GeometryError(f"rel_gap_tol must be a finite number ≥ 0, got {rel_gap_tol}")
    if not (isinstance(dykstra_iters, (int, np.integer)) and dykstra_iters >= 0):
        raise GeometryError(f"dykstra_iters must be an integer ≥ 0, got {dykstra_iters}")
    if time_limit is not None and not time_limit > 0:
        raise GeometryError(f"time_limit must be positive, got {time_limit}")
    m = S.shape[0]
    S = 0.5 * (S + S.T)
    np.fill_diagonal(S, n)
    c_f = elliptope_diameter_sq(m, n)
    if max_iters is None:
        a = 1e-3 * c_f if alpha is None else positive_number("alpha", alpha)
        max_iters = max(1, math.ceil(2.0 * c_f / a) - 2)
    elif not (isinstance(max_iters, (int, np.integer)) and max_iters >= 1):
        raise GeometryError(f"max_iters must be an integer ≥ 1, got {max_iters}")
    max_iters = int(max_iters)

    if m == 1:  # E_1 = {1}: nothing to optimise
        return MomentProjection(M=S, gap=0.0, iterations=0, clarkson_bound=0.0,
                                seconds=time.perf_counter() - start, objective=0.0)
    Z = _initial_point(S, n, int(dykstra_iters))
    V = None
    prev_gap = 0.0
    it = 0
    for it in range(1, max_iters + 1):
        G = Z - S
        np.fill_diagonal(G, 0.0)
        G = 0.5 * (G + G.T)  # exactly symmetric (solve_grothendieck reads C as given)
        f = 0.5 * float(np.vdot(G, G))
        inner = float(np.vdot(G, Z))
        target = max(gap_tol, rel_gap_tol * f, GAP_FLOOR * c_f)
        # the linear step max ⟨−G, W⟩ over E_m; its own duality gap n(upper − lower) enters
        # the certified FW gap, so it is asked for a fraction of the gap to certify
        abs_tol = ORACLE_FRACTION * max(prev_gap, target) / n
        rel_tol = ORACLE_REL_GAP if it > 1 else FIRST_ORACLE_REL_GAP
        res = solve_grothendieck(-G, V0=V, gap_tol=rel_tol, abs_tol=abs_tol,
                                 max_iters=ORACLE_MAX_ITERS, rng=rng, require_gap=False)
        V = res.V
        allowance = (4.0 * (m * m + 2) * _U * float(np.sum(np.abs(G) * (np.abs(Z) + n)))
                     + 4.0 * _U * n * abs(res.upper))
        gap = max(inner + n * res.upper + allowance, 0.0)
        prev_gap = gap
        out_of_time = time_limit is not None and time.perf_counter() - start > time_limit
        if gap <= target or it == max_iters or out_of_time:
            return MomentProjection(M=Z, gap=gap, iterations=it, clarkson_bound=2.0 * c_f / (it + 2),
                                    seconds=time.perf_counter() - start, objective=f)
        # the vertex n·VᵀV and the exact line search for the quadratic f
        Y = n * (V.T @ V)
        np.fill_diagonal(Y, n)
        D = Y - Z
        dd = float(np.vdot(D, D))
        step = min(1.0, max(0.0, -float(np.vdot(G, D)) / dd)) if dd > 0 else 0.0
        Z = Z + step * D
        Z = 0.5 * (Z + Z.T)
        np.fill_diagonal(Z, n)
    raise AssertionError("unreachable")  # pragma: no cover


def _initial_point(S: np.ndarray, n: float, dykstra_iters: int) -> np.ndarray:
    """A feasible start: ``n · D^{-1/2} P D^{-1/2}`` (D = diag P) for a PSD P ≈ the nearest
    correlation matrix of S/n — Higham's (2002) alternating projections with Dykstra's
    correction, ``R = Y − ΔS, X = P_PSD(R), ΔS = X − R, Y = X with diag := 1``, run for at
    most ``dykstra_iters`` iterations (stopping once ``||X − Y||_F ≤ 1e-12·||S/n||_F``), or
    with none: P = the PSD part of S/n. Equal to S when S is already in the body."""
    A = S / n
    lam, Q = np.linalg.eigh(A)
    X = (Q * np.maximum(lam, 0.0)[None, :]) @ Q.T
    Y = X.copy()
    np.fill_diagonal(Y, 1.0)
    dS = X - A
    tol = 1e-12 * max(float(np.linalg.norm(A)), 1.0)
    for _ in range(dykstra_iters):
        if float(np.linalg.norm(X - Y)) <= tol:
            break
        R = Y - dS
        lam, Q = np.linalg.eigh(0.5 * (R + R.T))
        X = (Q * np.maximum(lam, 0.0)[None, :]) @ Q.T
        dS = X - R
        Y = X.copy()
        np.fill_diagonal(Y, 1.0)
    return n * _unit_diagonal(X)


def _unit_diagonal(P: np.ndarray) -> np.ndarray:
    """``D^{-1/2} P D^{-1/2}`` for a PSD P, rows with a vanishing diagonal (zero rows, P
    being PSD) replaced by e_i: a point of E_m (PSD up to rounding, diag exactly 1)."""
    dg = np.diag(P).copy()
    tiny = 1e-12 * max(float(np.max(dg)), 1e-300)
    dead = dg <= tiny
    P = P.copy()
    P[dead, :] = 0.0
    P[:, dead] = 0.0
    dg[dead] = 1.0
    s = 1.0 / np.sqrt(dg)
    Z = P * s[:, None] * s[None, :]
    Z = 0.5 * (Z + Z.T)
    np.fill_diagonal(Z, 1.0)
    return Z


# ---------------------------------------------------------------------------------
# 2-way marginal tables of d binary attributes ↔ the (d+1)×(d+1) ±1 moment matrix
# ---------------------------------------------------------------------------------
def marginals_to_moments(tables: np.ndarray, d: int | None = None, *, n: float | None = None) -> np.ndarray:
    """The (d+1)×(d+1) ±1 moment matrix ``Σ (1, s)(1, s)ᵀ`` from 2-way marginal tables.

    ``tables``: shape ``(P, 2, 2)`` or the flat answer vector (length 4P) of
    ``workloads.marginals([2]*d, 2)``, ``P = d(d−1)/2``, pairs in lexicographic order,
    cell ``[i, j]`` = count of records with ``b_a = i, b_b = j``. Least squares per
    the module docstring: ``M_{a+1,b+1} = c00 + c11 − c01 − c10`` of table (a, b);
    ``M_{0,a+1}`` = mean over the d − 1 tables holding a of ``#{b_a = 1} − #{b_a = 0}``;
    the diagonal = ``n`` if given (public), else the mean table total. Exact on
    consistent integer tables.
    """
    T = np.asarray(tables, dtype=np.float64)
    if T.ndim == 1:
        if T.size % 4:
            raise GeometryError(f"a flat marginal vector must have 4 cells per pair, got {T.size} entries")
        T = T.reshape(-1, 2, 2)
    if T.ndim != 3 or T.shape[1:] != (2, 2) or T.shape[0] == 0:
        raise GeometryError(f"expected tables of shape (P, 2, 2) with P ≥ 1, got {T.shape}")
    if not np.all(np.isfinite(T)):
        raise GeometryError("the marginal tables have a non-finite entry")
    P = T.shape[0]
    d_inf = _attributes_from_pairs(P)
    if d is not None and d != d_inf:
        raise GeometryError(f"{P} tables are the 2-way marginals of {d_inf} attributes, not {d}")
    d = d_inf
    c00, c01, c10, c11 = T[:, 0, 0], T[:, 0, 1], T[:, 1, 0], T[:, 1, 1]
    tot = (c00 + c11) + (c01 + c10)
    sa = (c10 + c11) - (c00 + c01)  # Σ s_a as seen by table (a, b)
    sb = (c01 + c11) - (c00 + c10)  # Σ s_b
    sab = (c00 + c11) - (c01 + c10)  # Σ s_a s_b
    ia, ib = np.triu_indices(d, 1)  # lexicographic (a, b), a < b
    first = np.zeros(d)
    np.add.at(first, ia, sa)
    np.add.at(first, ib, sb)
    first /= d - 1
    n_est = math.fsum(tot.tolist()) / P if n is None else positive_number("n", n)
    M = np.empty((d + 1, d + 1))
    M[0, 1:] = first
    M[1:, 0] = first
    M[ia + 1, ib + 1] = sab
    M[ib + 1, ia + 1] = sab
    np.fill_diagonal(M, n_est)
    return M


def moments_to_marginals(M: np.ndarray, *, n: float | None = None) -> np.ndarray:
    """The ``(P, 2, 2)`` 2-way marginal tables of the (d+1)×(d+1) ±1 moment matrix M.

    ``c_ij = (n + σ_i M_{0,a+1} + σ_j M_{0,b+1} + σ_iσ_j M_{a+1,b+1}) / 4`` with σ_0 = −1,
    σ_1 = +1, pairs (a < b) in lexicographic order; ``n`` defaults to ``M_00``. M is
    symmetrised first. Reshape with ``.reshape(-1)`` for the answer vector of
    ``workloads.marginals([2]*d, 2)``. Exact on integer moments of a ±1 dataset.
    """
    M = _square_finite(M, "M")
    if M.shape[0] < 3:
        raise GeometryError(f"a moment matrix of d ≥ 2 binary attributes is at least 3×3, got {M.shape}")
    M = 0.5 * (M + M.T)
    d = M.shape[0] - 1
    n_val = float(M[0, 0]) if n is None else positive_number("n", n)
    ia, ib = np.triu_indices(d, 1)
    sa = M[0, ia + 1]
    sb = M[0, ib + 1]
    sab = M[ia + 1, ib + 1]
    out = np.empty((ia.size, 2, 2))
    for i, si in ((0, -1.0), (1, 1.0)):
        for j, sj in ((0, -1.0), (1, 1.0)):
            out[:, i, j] = ((n_val + si * sa) + (sj * sb + (si * sj) * sab)) / 4.0
    return out


# ---------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------
def _attributes_from_pairs(P: int) -> int:
    d = (1 + math.isqrt(1 + 8 * P)) // 2
    if d * (d - 1) // 2 != P:
        raise GeometryError(f"{P} tables is not d(d−1)/2 for any number of attributes d")
    return d


def _square_finite(M: np.ndarray, name: str) -> np.ndarray:
    A = np.array(M, dtype=np.float64)  # a copy: callers' arrays are never modified
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise GeometryError(f"{name} must be a non-empty square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise GeometryError(f"{name} has a non-finite entry")
    return A
