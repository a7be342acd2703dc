"""Least squares mechanism for pure ε-DP (Nikolov, Talwar & Zhang 2013, Alg. 4), with ℓ2-ball K-norm noise.

Research code (``factorize.research``): the paper is Nikolov, Talwar & Zhang 2013, "The Geometry of
Differential Privacy: the Sparse and Approximate Cases". No plan kind, CLI command, report or
the executor uses it (the plans' pure-DP strategies are ``factorize.pure_dp``'s); it is kept
for experiments and tested against the paper's claims (``tests/test_research_pure_least_squares.py``).
Not part of the supported API: :func:`run_pure_least_squares` is not the executor's release
path (no plan file, no verification, no ledger).

Notation: the workload ``W`` (k×N, columns w_j) is the paper's query matrix A (d×N, d = k);
``h`` is the histogram (the paper's x), ``n`` the public bound on ``‖h‖₁``; ``K = W·B₁ =
conv{±w_j}`` (paper) or ``conv{w_j}`` (histograms, ``symmetric=False``).

Mechanism (Nikolov, Talwar & Zhang 2013, Alg. 4, §4.2)
---------------------------------
1. ``U_1, …, U_p = base_decomposition(W)`` (Nikolov, Talwar & Zhang 2013, Alg. 1, C-optimal ellipsoids, Lemma 11):
   orthonormal k×d_i blocks, mutually orthogonal, spanning range(W) — a rank-deficient W is
   handled there by working in range(W) (the paper's reduction after Thm 13), so Σ d_i =
   rank W ≤ k. The sizes are non-increasing: d_1 = ⌈r/2⌉ ≥ d_2 ≥ … (r = rank W).
2. ``t`` = the largest index with ``d_t ≥ ε n`` (the paper's rule). Since the d_i are
   non-increasing, t = #{i : d_i ≥ εn}. **Conventions:** when no piece qualifies
   (εn > d_1) t = 0: nothing is projected and the mechanism is the ℓ2-ball K-norm mechanism on
   the query Yᵀ W with Y = [U_1 … U_p] (a basis of range(W)) and the whole ε — "noise only".
   Equality counts (εn = d_1 gives t ≥ 1), as in the paper's ``≥``.
3. For i ≤ t release ``ỹ_i = U_i(U_iᵀ W h + w_i)``; for the rest, ``Y = [U_{t+1} … U_p]``,
   release ``ỹ'' = Y(Yᵀ W h + w'')``. Each of the t + 1 releases is ε/(t+1)-DP, so by basic
   composition (Nikolov, Talwar & Zhang 2013, Lemma 2 / Lemma 13) the whole is ε-DP. **Convention when Y is empty**
   (t = p, i.e. every piece has d_i ≥ εn): the paper would still reserve ε/(t+1) for an empty
   release; here the budget is split over the releases that exist, ε/t each — strictly less
   noise, same privacy. Per-release budgets are floats whose exact (rational) sum is ≤ ε and
   within a few ulps of it (:func:`_split_budget`).
4. ``ŷ' = argmin { ‖ỹ' − y‖₂ : y ∈ n·X Xᵀ K }`` with ``ỹ' = Σ_{i≤t} ỹ_i``, X = [U_1 … U_t]
   (the body is the *projection* XXᵀK of K, not K). Computed by Frank–Wolfe
   (:func:`~factorize.geometry.least_squares.project_least_squares`) in the coordinates of X:
   since X has orthonormal columns and ỹ' ∈ range(X), ``y ↦ Xᵀy`` is an isometry of range(X),
   so projecting ``z̃ = Xᵀỹ' = XᵀWh + w_X`` onto ``n·conv{±Xᵀw_j}`` with the d_X×N matrix
   ``XᵀW`` and mapping back by X is the same projection as with the k×N matrix ``XXᵀW``
   (cheaper: d_X ≤ k rows). Output ``ŷ' + ỹ''``. Everything after step 3 is post-processing.

Deviation from the paper: ℓ2-ball K-norm noise instead of 𝒲(U_iᵀA, ε/(t+1))
--------------------------------------------------------------------------
The paper draws ``w_i ~ 𝒲(U_iᵀ A, ε/(t+1))``, the generalized K-norm distribution of Hardt–
Talwar / Bhaskara et al. (Nikolov, Talwar & Zhang 2013, Thm 18) for the polytope ``P_i = U_iᵀ W B₁``; sampling it
needs a uniform sample from a convex body (MCMC), which the project does not have. Here
``w_i`` is the **ℓ2-ball K-norm** noise: density ∝ ``exp(−ε_b‖z‖₂/Δ_i)`` on R^{d_i}, sampled
exactly as radius ~ Gamma(d_i, Δ_i/ε_b) times a uniform direction (docs/math.md §6.4;
``calibrate(PureDP(ε_b), sensitivity_l2=Δ_i, dim=d_i, family="l2_knorm")`` + ``add_noise``),
ε_b = ε/(t+1). The radius is

* add/remove: ``Δ_i = r_i = max_j ‖U_iᵀ w_j‖₂`` — the smallest centred ball containing
  ``P_i = conv{±U_iᵀ w_j}`` (Nikolov, Talwar & Zhang 2013, Lemma 14's r_i);
* replace: ``Δ_i = max_{a≠b} ‖U_iᵀ(w_a − w_b)‖₂`` (the differences of neighbouring answers),
  computed exactly by :func:`factorize.privacy.sensitivity` (≤ 2 r_i).

Privacy: a K-norm mechanism whose body B contains every neighbouring difference v is ε-DP,
since ``‖z‖_B − ‖z − v‖_B ≤ ‖v‖_B ≤ 1``; the ball Δ_i·B₂ contains them by the choice of Δ_i.
The release block Y uses the same construction for the query YᵀW (Δ_Y = max_j‖Yᵀw_j‖ etc.).
Privacy never relies on U_i being exactly orthonormal: the released query is the computed
matrix ``P_i = U_iᵀW`` and Δ_i is computed from its columns (calibrate rounds Δ/ε up).

Cost. Exactly ``E‖w_i‖² = d_i(d_i+1) Δ_i² (t+1)²/ε²`` (Gamma(d_i) radius: E R² = d_i(d_i+1)θ²).
The paper's Thm 18 noise has covariance ``λ_max ≤ O(log² d) d_ℓ vrad(Π_ℓ P_i)² (t+1)²/ε²`` on
O(log d) sub-pieces, and for a polytope with N vertices inside r_i B₂ the volume radius obeys
``vrad² = O(log(N/d_ℓ)/d_ℓ) r_i²`` (their Thm 16); with E‖w_i‖² = Σ_ℓ tr M_ℓ ≤ Σ_ℓ d_ℓ λ_max(M_ℓ)
the paper's noise has ``E‖w_i‖² = O(log² d · log N) d_i r_i² (t+1)²/ε²``: the ball costs up to
a factor ≈ ``(d_i + 1)/O(log² d · log N)`` in the noise-only part (about nothing when P_i is
ball-like, N ≳ e^{d_i}). In the projected part the paper's Lemma 14 has
``E n|⟨w_j, U_i w_i⟩| = O(polylog(d, N))·n r_i²/ε`` (t absorbed); with the ball the direction of
w_i is uniform, ``⟨U_iᵀw_j, w_i⟩ ≈ ‖U_iᵀw_j‖ R/√d_i`` with ``E R = d_i Δ_i(t+1)/ε``, so the
explicit bound below is ``≈ √(2 ln 2N)·√(d_i+1)·n r_i Δ_i (t+1)/ε`` — a factor ≈ √d_i
over the paper's, and no polylog(d) (no recursive sub-decomposition).

Explicit error bound (:class:`PureLeastSquaresPlan`; all constants explicit)
---------------------------------------------------------------------------
Let z = XᵀWh, w = w_X (the stacked w_i, i ≤ t), z̃ = z + w, ẑ the returned point (coordinates)
with Frank–Wolfe gap ``g = max_{v∈L} ⟨ẑ − z̃, ẑ − v⟩``, L = n·Xᵀ K. Assume z ∈ L, i.e.
``‖h‖₁ ≤ n`` (symmetric body) or ``‖h‖₁ = n`` (``conv{w_j}``); :func:`run_pure_least_squares`
checks this. Write ``a_j = Xᵀ w_j`` and ``X_j = ⟨a_j, w⟩``.

(a) Deterministic, Lemma 1 sharpened by first-order optimality (the paper's (3) has a factor 2
    more): ``‖ẑ − z‖² = ⟨ẑ − z, ẑ − z̃⟩ + ⟨ẑ − z, w⟩ ≤ g + ⟨ẑ − z, w⟩`` (z ∈ L). Then
    ``⟨ẑ − z, w⟩ ≤ max_{v∈L}⟨v, w⟩ − min_{v∈L}⟨v, w⟩ ≤ 2n·max_j |X_j|`` (Hölder, both bodies),
    and ``⟨ẑ − z, w⟩ ≤ ‖ẑ − z‖‖w‖`` gives ``‖ẑ − z‖² ≤ ‖w‖² + 2g``. So, pointwise,
    ``‖ẑ − z‖² ≤ min( ‖w‖² + 2g,  2n·max_j|X_j| + g )``.
(b) ``E max_j |X_j| ≤ M := min(M_sg, M_cs)``, where, with s_i = Δ_i(t+1)/ε the K-norm scale
    and r_i = max_j ‖U_iᵀw_j‖:
    * M_sg = ``√(2 ln(2N) · Σ_{i≤t} (d_i+1) r_i² s_i²)``. Proof: X_j = Σ_i R_i ⟨U_iᵀw_j, θ_i⟩
      with θ_i uniform on S^{d_i−1}, independent. A coordinate of θ_i has even moments
      ``(2m−1)!!/(d(d+2)⋯(d+2m−2)) ≤ (2m−1)!!/d^m`` = those of N(0, 1/d), so
      ``E e^{λ⟨b,θ_i⟩} ≤ e^{λ²‖b‖²/(2d_i)}``; conditional on the radii R, each ±X_j is sub-
      Gaussian with variance proxy ``σ²(R) ≤ Σ_i R_i² r_i²/d_i`` and the maximum of the 2N
      variables ±X_j has mean ≤ σ(R)√(2 ln 2N). Finally ``E σ(R) ≤ (E σ²)^{1/2}`` and
      ``E R_i² = d_i(d_i+1) s_i²``.
    * M_cs = ``Σ_{i≤t} r_i d_i s_i`` (Cauchy–Schwarz ``|X_j| ≤ Σ r_i R_i``, E R_i = d_i s_i).
(c) Hence, when the run's gap is ≤ ``gap_tol`` (``converged``), with
    ``N_X = Σ_{i≤t} E‖w_i‖²`` and ``N_Y = E‖w''‖² = d_Y(d_Y+1)Δ_Y²(t+1)²/ε²`` (exact),
    ``E‖ŷ' − XXᵀWh‖² ≤ B_X := min(N_X + 2·gap_tol, 2n·M + gap_tol)`` and, by Pythagoras
    (range X ⟂ range Y, Wh = XXᵀWh + YYᵀWh), ``E‖ŷ' + ỹ'' − Wh‖² ≤ B := B_X + N_Y``.
    This is an **expectation** bound over the noise, fully explicit, no Monte Carlo; the
    per-query RMSE is bounded by √(B/k) (Jensen). ``noise_only`` = N_X + N_Y is the exact
    expected squared error without projection.
Default ``gap_tol`` = 1% of min(N_X, 2nM), so the gap adds at most 2% to B_X; Nikolov, Talwar & Zhang 2013, §3.4.2
notes any additive accuracy α ≤ Σ n r_i² keeps near-optimality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from factorize.geometry.base_decomposition import base_decomposition
from factorize.geometry.least_squares import project_least_squares
from factorize.numerics import positive_number
from factorize.privacy import (
    Neighbouring,
    NoiseSpec,
    PureDP,
    SecureRandom,
    TestRandom,
    add_noise,
    calibrate,
    sensitivity,
)
from factorize.research.errors import ResearchError

__all__ = [
    "NoiseBlock",
    "PureLeastSquaresPlan",
    "PureLeastSquaresResult",
    "plan_pure_least_squares",
    "run_pure_least_squares",
]


@dataclass(frozen=True)
class NoiseBlock:
    """One ε_b-DP release ``basis·(query·h + w)`` with ℓ2-ball K-norm w in R^dim.

    ``name``: "U1", …, "Ut" (projected pieces) or "Y" (the rest). ``basis``: k×dim, orthonormal
    columns. ``query = basisᵀ W`` (dim×N), the matrix actually released. ``radius`` = r =
    max_j ‖query·e_j‖₂ (the add/remove ball radius of Lemma 14, used in the error bound);
    ``sensitivity`` = Δ under the plan's relation (= radius for add/remove). ``epsilon`` = ε_b.
    ``spec`` = ``calibrate(PureDP(ε_b), sensitivity_l2=Δ, dim=dim, relation=…,
    family="l2_knorm")``. ``expected_sq_noise`` = E‖w‖² = dim(dim+1)·spec.scale².
    """

    name: str
    basis: np.ndarray
    query: np.ndarray
    dim: int
    radius: float
    sensitivity: float
    epsilon: float
    spec: NoiseSpec
    expected_sq_noise: float
    projected: bool


@dataclass(frozen=True)
class PureLeastSquaresPlan:
    """Everything data-independent about Nikolov, Talwar & Zhang 2013, Alg. 4 for (W, n, ε) (module docstring).

    ``piece_dims`` / ``piece_radii``: d_i and r_i = max_j‖U_iᵀw_j‖ of all base-decomposition
    pieces (in order). ``t``: number of projected pieces. ``blocks``: the t projected releases
    then (if non-empty) the Y release. ``budgets``: their ε_b (exact rational sum ≤ ε, within a
    few ulps). ``X`` (k×d_X) and ``XW = XᵀW`` (d_X×N): the projection's coordinates and matrix
    (d_X = 0 when t = 0). ``noise_sq_projected`` = N_X, ``noise_sq_rest`` = N_Y,
    ``noise_only`` = N_X + N_Y (exact expectations). ``max_inner_sg`` / ``max_inner_cs``: the
    two bounds M_sg, M_cs on E max_j|⟨Xᵀw_j, w_X⟩|, ``max_inner`` = min. ``gap_tol``: the
    Frank–Wolfe gap the bound assumes. ``projected_bound`` = B_X ≥ E‖ŷ' − XXᵀWh‖²,
    ``error_bound`` = B = B_X + N_Y ≥ E‖output − Wh‖² (squared, total over the k queries).
    """

    W: np.ndarray
    n: float
    epsilon: float
    relation: Neighbouring
    symmetric: bool
    rank: int
    piece_dims: tuple[int, ...]
    piece_radii: tuple[float, ...]
    t: int
    blocks: tuple[NoiseBlock, ...]
    budgets: tuple[float, ...]
    X: np.ndarray
    XW: np.ndarray
    noise_sq_projected: float
    noise_sq_rest: float
    noise_only: float
    max_inner_sg: float
    max_inner_cs: float
    max_inner: float
    gap_tol: float
    projected_bound: float
    error_bound: float

    @property
    def k(self) -> int:
        return int(self.W.shape[0])

    @property
    def rmse_bound(self) -> float:
        """√(B/k) ≥ the root-mean-square per-query error (Jensen)."""
        return math.sqrt(self.error_bound / self.k)


@dataclass(frozen=True)
class PureLeastSquaresResult:
    """Output of :func:`run_pure_least_squares`.

    ``answers`` = ŷ' + ỹ'' (length k). ``projected`` = ŷ' and ``rest`` = ỹ'' (so answers =
    projected + rest). ``noisy_projected`` = ỹ' = Σ_{i≤t} ỹ_i, the released (private) input of
    the projection. ``x``: the Frank–Wolfe weights (ŷ' = XXᵀW x, x ∈ n·B₁ or n·Δ_N; zeros when
    t = 0). ``gap``: the FW gap at the returned point (0 when t = 0), ``iterations`` FW
    iterations, ``converged``: gap ≤ plan.gap_tol (the plan's bound assumes it).
    ``budgets``: per-release ε_b (names in ``block_names``). ``test_mode``: drawn with a
    TestRandom — **not private**.
    """

    answers: np.ndarray
    projected: np.ndarray
    rest: np.ndarray
    noisy_projected: np.ndarray
    x: np.ndarray
    gap: float
    iterations: int
    converged: bool
    budgets: tuple[float, ...]
    block_names: tuple[str, ...]
    test_mode: bool
    diagnostics: dict[str, Any] = field(default_factory=dict)


# ============================================================================================
# planning




def _split_budget(epsilon: float, m: int) -> tuple[float, ...]:
    """m equal float budgets whose exact rational sum is ≤ ε (rounded down ulp by ulp)."""
    b = epsilon / m
    while Fraction(b) * m > Fraction(epsilon):
        b = math.nextafter(b, 0.0)
    return (b,) * m


def _check_workload(W: Any) -> np.ndarray:
    if hasattr(W, "dense") and not isinstance(W, np.ndarray):
        W = W.dense()
    try:
        A = np.asarray(W, dtype=np.float64)
    except (TypeError, ValueError):
        raise ResearchError("W must be a real k×N matrix") from None
    if A.ndim != 2 or A.size == 0:
        raise ResearchError(f"W must be a non-empty 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ResearchError("W must be finite")
    if not np.any(A != 0):
        raise ResearchError("W is zero: nothing to release")
    return A


def _block(name: str, basis: np.ndarray, W: np.ndarray, eps_b: float, relation: Neighbouring,
           projected: bool) -> NoiseBlock:
    query = basis.T @ W
    radius = float(np.sqrt(np.max(np.einsum("ij,ij->j", query, query))))
    delta = float(sensitivity(query, "l2", relation).value)
    if not (radius > 0 and delta > 0):
        raise ResearchError(f"block {name} has zero sensitivity (W's columns do not reach it)")
    spec = calibrate(PureDP(eps_b), sensitivity_l2=delta, dim=basis.shape[1], relation=relation,
                     family="l2_knorm")
    m = basis.shape[1]
    return NoiseBlock(name, basis, query, m, radius, delta, eps_b, spec,
                      m * (m + 1.0) * spec.scale**2, projected)


def plan_pure_least_squares(W: Any, n: float, epsilon: float, *,
                            relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
                            symmetric: bool = True, gap_tol: float | None = None,
                            ellipsoid_tol: float = 1e-3) -> PureLeastSquaresPlan:
    """Plan Nikolov, Talwar & Zhang 2013, Alg. 4 (ℓ2-ball variant) for the workload ``W`` (k×N dense array or a
    ``workloads.Workload``), public size bound ``n`` and pure ``epsilon``.

    ``symmetric=True``: project onto n·XXᵀconv{±w_j} (the paper's K = W·B₁; needs ‖h‖₁ ≤ n);
    ``False``: onto n·XXᵀconv{w_j} (histograms with exactly n records). ``relation``: the
    neighbouring relation the noise is calibrated for. ``gap_tol``: Frank–Wolfe gap the error
    bound assumes (default 1% of min(N_X, 2nM)). ``ellipsoid_tol``: the MEE accuracy of
    ``base_decomposition``. Raises ValueError on bad input. See the module docstring for t,
    the budgets, the noise and the bound B = min(N_X + 2g, 2nM + g) + N_Y.
    """
    A = _check_workload(W)
    n = positive_number("n", n)
    epsilon = positive_number("epsilon", epsilon)
    rel = Neighbouring.parse(relation)  # PrivacyError is a ValueError
    if not isinstance(symmetric, (bool, np.bool_)):
        raise ResearchError(f"symmetric must be a bool, got {symmetric!r}")
    if rel is Neighbouring.REPLACE and A.shape[1] < 2:
        raise ResearchError("replace neighbours need at least two record types (N ≥ 2)")
    pieces = base_decomposition(A, tol=positive_number("ellipsoid_tol", ellipsoid_tol))
    dims = tuple(int(U.shape[1]) for U in pieces)
    radii = []
    for U in pieces:
        P = U.T @ A
        radii.append(float(np.sqrt(np.max(np.einsum("ij,ij->j", P, P)))))
    # t: the largest index with d_t ≥ εn (d_i non-increasing, so a count); 0 when none.
    t = sum(1 for d in dims if d >= epsilon * n)
    if any(dims[i] < dims[i + 1] for i in range(len(dims) - 1)):  # pragma: no cover - Alg. 1
        raise AssertionError("base decomposition sizes are not non-increasing")
    has_rest = t < len(pieces)
    budgets = _split_budget(epsilon, t + (1 if has_rest else 0))
    blocks = [_block(f"U{i + 1}", pieces[i], A, budgets[i], rel, True) for i in range(t)]
    if has_rest:
        Y = np.hstack(pieces[t:])
        blocks.append(_block("Y", Y, A, budgets[-1], rel, False))
    k, N = A.shape
    X = np.hstack(pieces[:t]) if t else np.zeros((k, 0))
    # XᵀW as the stacked released queries U_iᵀW (bit-identical to what the noise was added to)
    XW = np.vstack([b.query for b in blocks[:t]]) if t else np.zeros((0, N))
    proj = [b for b in blocks if b.projected]
    n_x = math.fsum(b.expected_sq_noise for b in proj)
    n_y = math.fsum(b.expected_sq_noise for b in blocks if not b.projected)
    # M_sg and M_cs (module docstring, (b)); s = spec.scale is the Gamma scale Δ/ε_b.
    m_sg = math.sqrt(2.0 * math.log(2.0 * N)
                     * math.fsum((b.dim + 1.0) * b.radius**2 * b.spec.scale**2 for b in proj))
    m_cs = math.fsum(b.radius * b.dim * b.spec.scale for b in proj)
    m_inner = min(m_sg, m_cs)
    if gap_tol is None:
        gap_tol = 0.01 * min(n_x, 2.0 * n * m_inner)
    else:
        gap_tol = float(gap_tol)
        if not (math.isfinite(gap_tol) and gap_tol >= 0):
            raise ResearchError(f"gap_tol must be finite and >= 0, got {gap_tol!r}")
    b_x = min(n_x + 2.0 * gap_tol, 2.0 * n * m_inner + gap_tol) if t else 0.0
    return PureLeastSquaresPlan(
        W=A, n=n, epsilon=epsilon, relation=rel, symmetric=bool(symmetric), rank=sum(dims),
        piece_dims=dims, piece_radii=tuple(radii), t=t, blocks=tuple(blocks),
        budgets=tuple(b.epsilon for b in blocks), X=X, XW=XW, noise_sq_projected=n_x,
        noise_sq_rest=n_y, noise_only=n_x + n_y, max_inner_sg=m_sg, max_inner_cs=m_cs,
        max_inner=m_inner, gap_tol=gap_tol, projected_bound=b_x, error_bound=b_x + n_y,
    )


# ============================================================================================
# running


def _check_histogram(plan: PureLeastSquaresPlan, h: Any) -> np.ndarray:
    try:
        x = np.asarray(h, dtype=np.float64)
    except (TypeError, ValueError):
        raise ResearchError("h must be a vector of counts") from None
    N = plan.W.shape[1]
    if x.shape != (N,):
        raise ResearchError(f"h must have shape ({N},), got {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ResearchError("h must be finite and nonnegative")
    # The public-n contract (as the executor's least-squares plans): the bound needs Wh ∈ nK.
    total = math.fsum(x)
    if plan.symmetric and total > plan.n * (1 + 1e-12):
        raise ResearchError(f"the data has {total} records, more than the public bound n={plan.n}")
    if not plan.symmetric and abs(total - plan.n) > 1e-9 * plan.n:
        raise ResearchError(f"conv{{w_j}} needs exactly n={plan.n} records, the data has {total}")
    return x


def run_pure_least_squares(plan: PureLeastSquaresPlan, h: Any,
                           rng: SecureRandom | TestRandom | None = None, *,
                           max_iters: int = 20000) -> PureLeastSquaresResult:
    """Run the planned mechanism on the histogram ``h`` (length N, ‖h‖₁ ≤ n; = n when
    ``plan.symmetric`` is False) with ``rng`` (SecureRandom when None; a TestRandom draw is
    reproducible and **not private**). Releases ỹ_i (i ≤ t) and ỹ'' with
    ``add_noise(query·h, spec, rng)`` in block order, then projects (Frank–Wolfe until the
    gap is ≤ plan.gap_tol or ``max_iters`` iterations). Returns answers ŷ' + ỹ'' and
    diagnostics (gap, iterations, budgets)."""
    if not isinstance(plan, PureLeastSquaresPlan):
        raise ResearchError("plan must come from plan_pure_least_squares")
    if isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)) or max_iters < 1:
        raise ResearchError(f"max_iters must be a positive integer, got {max_iters!r}")
    if rng is None:
        rng = SecureRandom()
    if not isinstance(rng, (SecureRandom, TestRandom)):
        raise ResearchError(f"rng must be a SecureRandom or TestRandom, got {type(rng).__name__}")
    x_h = _check_histogram(plan, h)
    k, N = plan.W.shape
    # the releases (the only steps that touch h)
    noisy = [add_noise(b.query @ x_h, b.spec, rng) for b in plan.blocks]
    del x_h
    # post-processing of the released values only
    rest = np.zeros(k)
    coords = []
    for b, z in zip(plan.blocks, noisy, strict=True):
        if b.projected:
            coords.append(z)
        else:
            rest = b.basis @ z
    if plan.t:
        z_tilde = np.concatenate(coords)  # = Xᵀỹ'
        proj = project_least_squares(plan.XW, z_tilde, plan.n, symmetric=plan.symmetric,
                                     max_iters=int(max_iters), gap_tol=plan.gap_tol)
        projected = plan.X @ proj.y
        noisy_projected = plan.X @ z_tilde
        x_w, gap, iters = proj.x, float(proj.gap), int(proj.iterations)
    else:
        projected = np.zeros(k)
        noisy_projected = np.zeros(k)
        x_w, gap, iters = np.zeros(N), 0.0, 0
    names = tuple(b.name for b in plan.blocks)
    return PureLeastSquaresResult(
        answers=projected + rest, projected=projected, rest=rest,
        noisy_projected=noisy_projected, x=x_w, gap=gap, iterations=iters,
        converged=gap <= plan.gap_tol, budgets=plan.budgets, block_names=names,
        test_mode=bool(rng.is_test_mode),
        diagnostics={"t": plan.t, "piece_dims": plan.piece_dims,
                     "budget_total": math.fsum(plan.budgets), "gap_tol": plan.gap_tol,
                     "error_bound": plan.error_bound, "noise_only": plan.noise_only},
    )
