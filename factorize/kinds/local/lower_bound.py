"""Sample-size bounds of the local model: what EVERY non-interactive ε-LDP protocol needs
(from a dual witness of approximate γ₂), next to what the approximate factorization
mechanism achieves (Edmonds, Nikolov & Ullman 2020, Thm 23 / Thm 10, with every constant explicit).

Conventions (Edmonds, Nikolov & Ullman 2020, §1.1, §2.3-2.4; docs/math.md §1.1)
-------------------------------------------------
W ∈ R^{k×N}, one row per query, one column per record type. A dataset of n records with
histogram h has *normalised* answers ``W h / n`` (statistical queries; the project's central
plans release counts ``W h``, so an error α here is α·n on counts). Error is the worst query
in expectation:

* ``error_model="empirical"`` (Edmonds, Nikolov & Ullman 2020, §2.4 err^{ℓ∞}, the project's convention): for EVERY
  dataset of n records, ``E ‖â − W h/n‖_∞ ≤ α`` (expectation over the protocol's coins);
* ``error_model="distributional"`` (Edmonds, Nikolov & Ullman 2020, Remarks 2/8): for every distribution ρ on the
  records and n i.i.d. records, ``E ‖â − W ρ‖_∞ ≤ α``.

A protocol is non-interactive ε-LDP: user j applies a randomizer M_j, fixed before any data is
seen (public coins allowed: every step below holds conditionally on them), with
``K_j(z|x) ≤ e^ε K_j(z|x')`` for all records x, x' and outputs z; the server post-processes
the n messages. (ε, δ)-LDP with δ > 0 is NOT covered (``delta > 0`` raises
:class:`~factorize.kinds.local.errors.LocalError`, as does any other bad argument).

The lower bound (derivation; all constants explicit)
----------------------------------------------------
Witness: U ∈ R^{k×N}, U ≠ 0, and d = (d_r ∈ R^k, d_c ∈ R^N) with ``diag(d) − ½[[0,U],[Uᵀ,0]] ⪰ 0``
(certified here by ``certificate.grothendieck_psd_margin``), i.e. (docs/math.md §4.3)

    yᵀ U z ≤ yᵀ D_r y + zᵀ D_c z    for all y, z,   hence   yᵀ U z ≤ 2 √(yᵀD_r y · zᵀD_c z)   (P)

(scale y → sy, z → z/s and minimise over s). Write u_v for row v, ℓ_v = ‖u_v‖₁, D_c = Σ d_c.

Step 1 (per-user χ² contraction; our proof of Edmonds, Nikolov & Ullman 2020, Lemma 11, constant kept).
For one ε-LDP channel K and pairs of distributions (λ_v, μ_v) with m_v = λ_v − μ_v and any
prior ρ on the rows:

    Σ_v ρ(v) χ²(K λ_v ‖ K μ_v) ≤ (e^ε − 1)²/4 · ‖M‖²_{∞→L2(ρ)},
    ‖M‖²_{∞→L2(ρ)} = max_{‖f‖_∞ ≤ 1} Σ_v ρ(v) ⟨m_v, f⟩².

Proof: per output z let a(z) = min_x K(z|x), b(z) = max_x K(z|x) ≤ e^ε a(z), c = (a+b)/2 and
γ_z(x) = (K(z|x) − c)/((b−a)/2) ∈ [−1, 1]. As Σ_x m_v(x) = 0,
(Kλ_v − Kμ_v)(z) = ((b−a)/2)⟨m_v, γ_z⟩ and (Kμ_v)(z) ≥ a(z), so the left side is
≤ ∫ (b−a)²/(4a) Σ_v ρ(v)⟨m_v, γ_z⟩² dz ≤ ‖M‖² ∫ a (e^ε−1)²/4 dz ≤ (e^ε−1)²/4 · ‖M‖², because
∫ a ≤ ∫ K(·|x₀) = 1. The sup over f sits OUTSIDE the sum over v because γ_z does not depend on
v: the randomizer does not know which hard instance is being run. (Same argument as Duchi,
Jordan & Wainwright 2018, Thm 2; the constant (e^ε−1)²/4 is ours, derived above, and is
checked numerically in the tests against exact χ² of random ε-LDP channels.)

Step 2 (n users, mixtures). With V ~ ρ and the n records i.i.d. from λ_V (hypothesis H0) or
μ_V (H1), the transcripts are the mixtures T_b = Σ_v ρ(v) ⊗_j K_j(·_v). Joint convexity of
KL, additivity over independent users and KL ≤ χ²:

    KL(T_0 ‖ T_1) ≤ Σ_v ρ(v) Σ_j KL(K_j λ_v ‖ K_j μ_v) ≤ n (e^ε − 1)²/4 · ‖M‖²_{∞→L2(ρ)}.

(This is where non-interactivity is used: Edmonds, Nikolov & Ullman 2020, §3.2, remark after Lemma 11.)

Step 3 (hard pairs from U; Edmonds, Nikolov & Ullman 2020, §3.5, eqs (4)-(7), without the exponential binning
of Lemmas 19-20). Suppose first W is *antipodal*: an involution τ of the records with
W[:, τ(x)] = −W[:, x] (``antipodes=τ``; Edmonds, Nikolov & Ullman 2020, Def. 16 "symmetric"). Replace U by
½(U − U[:, τ]) and d_c by ½(d_c + d_c[τ]) — (P) still holds (apply it to z and to z∘τ and use
Cauchy–Schwarz), ⟨W, U⟩ is unchanged and row sums become 0. For a target gap G > 0 let
S = {v : ĝ_v ≥ G}, ĝ_v = c_v / ℓ_v, c_v = ⟨w_v, u_v⟩, and for v ∈ S, t_v = G/ĝ_v ∈ (0, 1]:

    λ_v = |u_v| / ℓ_v    (τ-invariant, so every query answers 0),
    μ_v = λ_v + t_v u_v / ℓ_v   (a distribution: t_v ≤ 1 and Σ_x u_v(x) = 0),

so q_v(μ_v) = t_v ĝ_v = G and m_v = −(G/c_v) u_v. With the prior ρ(v) ∝ c_v²/d_r,v on S and
(P) (Cauchy–Schwarz over y, |f_x| ≤ 1; our explicit form of Edmonds, Nikolov & Ullman 2020, Lemmas 13/15:
factor 2 instead of 4, and no binning):

    ‖M‖²_{∞→L2(ρ)} ≤ 4 G² D_c / Φ(G),      Φ(G) = Σ_{v ∈ S} c_v² / d_r,v.

Step 4 (two-point step with expected errors; Edmonds, Nikolov & Ullman 2020, Thm 22, constants kept).
Let T be the protocol's output. Under H0 every population answer is 0; under H1 (V = v)
query v equals G. With f = min(‖T‖_∞, G) ∈ [0, G]: E_0 f ≤ α₀ := E_0‖T − 0‖_∞, and under H1
‖T − Q(μ_v)‖_∞ ≥ |T_v − G| ≥ G − ‖T‖_∞, so E_1(G − f) ≤ α₁ := E_1‖T − Q(μ_V)‖_∞. As
|E_1 h − E_0 h| ≤ G·TV for h ∈ [0, G]:  α₀ + α₁ ≥ E_0 f + E_0(G − f) − G·TV = G(1 − TV), i.e.
TV ≥ p := 1 − A/G with A = α₀ + α₁, and KL ≥ κ(p) := max(2p², −ln(1 − p²)) (Pinsker;
Bretagnolle–Huber). (Markov's inequality on a threshold test would give A = 2(α₀ + α₁).)
Distributional model: A = 2α. Empirical model: the protocol answers the sample, whose answers
deviate from the population's: A = 2α + δ_k(n) + δ_1(n), δ_k = ϱ√(g·ln(2k)/(2n)) (the max over
k queries of a sum of g·n independent terms of range ϱ/n, Hoeffding's lemma), δ_1 = ϱ√g/(2√n)
(one query, its standard deviation), ϱ = max_i (max_x W_ix − min_x W_ix), g as in step 5
(the error of the g-group protocol is gα, so A = 2gα + δ_k + δ_1 there). Hence

    n ≥ κ(1 − A/G) · Φ(G) / ((e^ε − 1)² · G² · D_c)       for every G > A.       (LB)

Step 5 (general W: a two-group reduction replacing Edmonds, Nikolov & Ullman 2020, Lemma 17, which costs 3ε
and needs n ≥ 1/(ε²α²)). Fix a null record x₀ (``null_record``; default chosen below). A
protocol P for W with n users and error α gives, for the antipodal workload
W^±(x, σ) = σ·(W[:, x] − W[:, x₀]) on records (x, σ ∈ {±1}), a protocol with 2n users: group A
(n users) runs P on x if σ = + else on x₀, group B runs a second copy of P on x if σ = − else
on x₀, and the server outputs â_A − â_B. Each user applies one ε-LDP randomizer to a function
of its own record (still ε-LDP, still non-interactive), the error is ≤ 2α, and
W(φ_A ρ − φ_B ρ) = W^± ρ exactly. Apply (LB) to W^± with the witness
½[U, −U] (certified by (d_r, ½d_c, ½d_c): same Φ shape, same D_c) whose row correlations are
c_v = ⟨w_v − W[v, x₀]·1, u_v⟩ = ⟨w_v, u_v⟩ − W[v, x₀]·Σ_x u_v(x). So, with ``groups`` = 2
(1 on the antipodal route):

    n ≥ κ(1 − A/G) · Φ(G) / (g · (e^ε − 1)² · G² · D_c),  A = 2gα [+ δ_k + δ_1],  g = groups. (LB_g)

When U has zero row sums x₀ does not matter; otherwise the default x₀ maximises Σ_v c_v
(= argmin_x Σ_v W[v, x]·Σ_x' u_v(x')). The sample complexity only sees W modulo adding a
constant to a query (answers shift by a known constant), and so does (LB_g): for W = all-ones
the bound is 0, although γ₂(J; η) = 1 − η.

Step 6 (empirical model only: one user). Two datasets that differ in one user's record have
answers ϱ/n apart in ℓ∞ and output laws at total variation ≤ (e^ε − 1)/(e^ε + 1) (one ε-DP
message changes); step 4's argument gives 2α ≥ (ϱ/n)(1 − TV), i.e. n ≥ ϱ / (α (e^ε + 1)).

What is returned. ``n_lower`` = max over a grid of G (all ĝ_v, η, a geometric grid) of (LB_g).
In the empirical model the right side depends on n through δ; every feasible n satisfies
n ≥ F(n) with F non-decreasing (the G grid does not depend on n) and step 6, and the iteration
n ← ⌈F(n)⌉ from ⌈step 6⌉ stays below the least such n, so its limit (or any iterate) is
valid. A final factor (1 − 64(k+N+16)u) covers floating-point rounding of Φ, D_c and the
products; the PSD condition itself is certified with rounding allowances.

γ₂ form (the paper's Ω(γ₂(W, α)²/(ε²α²)), constants explicit). At G = η, Cauchy–Schwarz gives
Φ(η) ≥ (Σ_{v∈S} c_v)²/D_r ≥ (⟨W', U⟩ − η‖U‖₁)²/D_r (rows with ĝ_v < η lose at most η·ℓ_v),
so with γ̂ = (⟨W', U⟩ − η‖U‖₁)/(2√(D_r D_c)) (≥ the witness value of certificate.py when
W' = W, since 2√(D_r D_c) ≤ Σd):

    n ≥ 4 κ(1 − A/η) γ̂² / (g (e^ε − 1)² η²);   distributional, η = 2A = 4gα (p = ½, κ = ½):
    n ≥ γ̂² / (8 g³ (e^ε − 1)² α²)  —  γ₂(W; 4α)² / (8 (e^ε−1)² α²)  antipodal (g = 1),
                                       γ̄₂(W; 8α)² / (64 (e^ε−1)² α²) general (g = 2),

where γ̄₂(W; η) = min_c γ₂(W − c1ᵀ; η) (a zero-row-sum witness bounds it). For ε ≤ 1,
(e^ε − 1)² ≤ 2.96 ε². Nothing in (LB_g) is an Ω(·): ``constant_note`` says so. The empirical
model adds δ_k(n) + δ_1(n) ~ ϱ√(ln k / n) to A: it certifies something only where the ε-LDP
rate above exceeds the statistical rate ϱ² ln(2k)/α² (Edmonds, Nikolov & Ullman 2020, Thm 22/23 assume the same,
"γ₂(W,α)²/(ε²α²) ≥ C log 2k/α'²"); below that only step 6 remains (``n_lower`` =
ϱ/(α(e^ε+1)), e.g. at ε = 1 for prefix / marginals / parities of the sizes tested), and
``details["n_lower_distributional"]`` carries the distributional bound.

The upper bound (Edmonds, Nikolov & Ullman 2020, Thm 10; docs/math.md §9.6)
---------------------------------------------------------------------
With W̃ = RA, |W − W̃| ≤ η_eff entrywise, A normalised to ‖A‖_{1→2} = 1 (so γ = ‖R‖_{2→∞}‖A‖_{1→2})
and an ε-LDP randomizer with E[Y] = a_x whose noise is σ-subgaussian in the mgf sense
(E exp(λ⟨θ, Y − a_x⟩) ≤ exp(λ²σ²/2) for all unit θ — NOT the ψ₂ constant of Edmonds, Nikolov & Ullman 2020, Lemma 9;
a randomizer with |⟨θ, Y⟩| ≤ B, e.g. ‖Y‖₂ = B, qualifies with σ = B by Hoeffding's lemma), the
server's ``R · mean(Y)`` has E‖error‖_∞ ≤ η_eff + γ σ √(2 ln(2k)/n) on every dataset, so

    n_upper = 2 ln(2k) · (γ σ [+ ϱ/2 distributional])² / (α − η_eff)²    (∞ when α ≤ η_eff).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import numpy as np

from factorize import norms
from factorize.kinds.local.errors import LocalError
from factorize.numerics import U as _U
from factorize.numerics import positive_number
from factorize.planner.certificate import (
    ApproxGamma2Witness,
    Certificate,
    approx_gamma_2_lower,
    grothendieck_psd_margin,
)

__all__ = [
    "ERROR_MODELS",
    "LocalLowerBound",
    "LocalUpperBound",
    "kl_lower_from_test",
    "local_sample_size_lower_bound",
    "local_upper_bound_n",
    "parity_witness",
]

ERROR_MODELS = ("empirical", "distributional")

#: Points of the geometric grid of target gaps G searched by the lower bound.
G_GRID_POINTS = 2048

#: Iterations of n ← ⌈F(n)⌉ (empirical model); every iterate is a valid bound.
MAX_FIXED_POINT_ITERATIONS = 200



@dataclass(frozen=True)
class LocalLowerBound:
    """A certified lower bound on the users every non-interactive ε-LDP protocol needs."""

    n_lower: float  # every such protocol with error ≤ alpha has n ≥ n_lower (0: no information)
    alpha: float  # error on the normalised answers W h / n (counts: alpha · n)
    epsilon: float
    eta: float | None  # radius at which gamma2_eta_lower is stated (does not enter n_lower)
    gamma2_eta_lower: float | None  # (⟨W,U⟩ − η‖U‖₁)/Σd of the witness as given (certificate.py)
    error_model: str
    binds: str
    derivation: str
    constant_note: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalUpperBound:
    """Users the approximate factorization mechanism needs for error ≤ alpha (Edmonds, Nikolov & Ullman 2020, Thm 10)."""

    n_upper: float  # math.inf when alpha ≤ eta_effective
    alpha: float
    epsilon: float | None
    eta: float
    eta_effective: float  # max(eta, ‖W − RA‖_max)
    sigma: float  # mgf subgaussian constant of the randomizer's noise (argument)
    gamma2_eta_upper: float  # ‖R‖_{2→∞}‖A‖_{1→2} of the factorization (rounded up)
    error_model: str
    holds_for: str
    derivation: str
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------------
def _dense(W: Any) -> np.ndarray:
    if isinstance(W, str):
        from workloads import parse_workload

        W = parse_workload(W)
    if hasattr(W, "dense") and not isinstance(W, np.ndarray):
        W = W.dense()
    try:
        W = np.asarray(W, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise LocalError(f"the workload must be a matrix: {exc}") from None
    if W.ndim != 2 or W.size == 0:
        raise LocalError(f"the workload must be a non-empty k×N matrix, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise LocalError("the workload has a non-finite entry")
    return W


def _witness_arrays(obj: Any) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(U, d, η of the certificate or None) from a certificate, a solve result, a witness or (U, d)."""
    if hasattr(obj, "certificate") and isinstance(obj.certificate, Certificate):
        obj = obj.certificate
    if isinstance(obj, Certificate):
        w = obj.witness
        if not isinstance(w, ApproxGamma2Witness) or obj.eta is None:  # i.e. not approx_gamma_2
            raise LocalError(f"a {obj.norm} certificate has no approximate-γ₂ witness (U, d)")
        return np.asarray(w.U), np.asarray(w.d), float(obj.eta)
    if isinstance(obj, ApproxGamma2Witness):
        return np.asarray(obj.U), np.asarray(obj.d), None
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        return np.asarray(obj[0]), np.asarray(obj[1]), None
    raise LocalError("expected an approx_gamma_2 Certificate, a planner result with .certificate, "
                     f"an ApproxGamma2Witness or a pair (U, d); got {type(obj).__name__}")


def _check_witness(W: np.ndarray, U: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    U = np.asarray(U, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    if U.shape != W.shape:
        raise LocalError(f"witness U has shape {U.shape}, the workload {W.shape}")
    if d.shape != (sum(W.shape),):
        raise LocalError(f"witness d has shape {d.shape}, expected ({sum(W.shape)},)")
    if not (np.all(np.isfinite(U)) and np.all(np.isfinite(d))):
        raise LocalError("the witness has a non-finite entry")
    if not np.any(U != 0):
        raise LocalError("the witness U is zero")
    margin = grothendieck_psd_margin(U, d)
    if not margin >= 0:
        raise LocalError(f"diag(d) − ½[[0,U],[Uᵀ,0]] is not certified PSD (λ_min margin {margin:.3g}): "
                         "the witness does not bound γ₂*(U)")
    return U, d, margin


def _antipodes(tau: Any, W: np.ndarray) -> np.ndarray:
    N = W.shape[1]
    t = np.asarray(tau)
    if t.shape != (N,) or not np.issubdtype(t.dtype, np.integer):
        raise LocalError(f"antipodes must be an integer array of length N = {N}")
    if np.any(t < 0) or np.any(t >= N) or not np.array_equal(t[t], np.arange(N)):
        raise LocalError("antipodes must be an involution of the records (τ(τ(x)) = x)")
    tol = 1e-12 * max(1.0, float(np.max(np.abs(W))))
    if not np.all(np.abs(W[:, t] + W) <= tol):
        raise LocalError("antipodes: W[:, τ(x)] = −W[:, x] fails, the workload is not antipodal under τ")
    return t.astype(np.intp)


# ---------------------------------------------------------------------------------
# the lower bound
# ---------------------------------------------------------------------------------
def kl_lower_from_test(p: np.ndarray | float) -> np.ndarray | float:
    """κ(p) = max(2p², −ln(1 − p²)): KL needed when a test has error-sum ≤ 1 − p (Pinsker / B–H)."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = np.where(p > 0, np.maximum(2.0 * p * p, -np.log1p(-np.minimum(p, 1.0) ** 2)), 0.0)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class _Profile:
    """Per-row numbers of a witness after symmetrisation/shift: c_v, ℓ_v, d_r,v and D_c."""

    c: np.ndarray
    ell: np.ndarray
    d_r: np.ndarray
    D_c: float
    D_r: float
    groups: int
    route: str
    null_record: int | None
    shifted_inner: float  # ⟨W', U'⟩
    l1: float  # ‖U'‖₁


def _profile(W: np.ndarray, U: np.ndarray, d: np.ndarray, antipodes: np.ndarray | None,
             null_record: Any) -> _Profile:
    k, N = W.shape
    d_r, d_c = d[:k].copy(), d[k:].copy()
    if antipodes is not None:
        if null_record is not None:
            raise LocalError("null_record is meaningless on the antipodal route (antipodes=τ)")
        U = 0.5 * (U - U[:, antipodes])
        d_c = 0.5 * (d_c + d_c[antipodes])
        Wp, groups, route, x0 = W, 1, "antipodal", None
    else:
        s = U.sum(axis=1)
        if null_record is None:
            x0 = int(np.argmin(s @ W))  # maximises Σ_v c_v = ⟨W, U⟩ − Σ_v W[v,x0] s_v
        else:
            if isinstance(null_record, bool) or not isinstance(null_record, (int, np.integer)):
                raise LocalError(f"null_record must be a record index, got {null_record!r}")
            x0 = int(null_record)
            if not 0 <= x0 < N:
                raise LocalError(f"null_record {x0} is outside 0..{N - 1}")
        Wp = W - W[:, [x0]]
        groups, route = 2, "two-group reduction"
    c = np.sum(Wp * U, axis=1)
    ell = np.sum(np.abs(U), axis=1)
    return _Profile(c=c, ell=ell, d_r=d_r, D_c=float(np.sum(d_c)), D_r=float(np.sum(d_r)),
                    groups=groups, route=route, null_record=x0,
                    shifted_inner=float(np.sum(c)), l1=float(np.sum(ell)))


def _phi_table(prof: _Profile) -> tuple[np.ndarray, np.ndarray]:
    """Rows usable in S, sorted by ĝ descending, and the cumulative Φ (Σ c²/d_r)."""
    ok = (prof.ell > 0) & (prof.c > 0) & (prof.d_r > 0)
    g = prof.c[ok] / prof.ell[ok]
    w = prof.c[ok] ** 2 / prof.d_r[ok]
    order = np.argsort(-g, kind="stable")
    return g[order], np.cumsum(w[order])


def _phi(G: np.ndarray, g_sorted: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Φ(G) = Σ_{ĝ_v ≥ G} c_v²/d_r,v for an array of G (ĝ sorted descending)."""
    if g_sorted.size == 0:
        return np.zeros_like(G)
    cnt = np.searchsorted(-g_sorted, -G, side="right")  # #{v : ĝ_v ≥ G}
    return np.where(cnt > 0, cum[np.maximum(cnt - 1, 0)], 0.0)


def _bound_at(G: np.ndarray, A: float, prof: _Profile, g_sorted: np.ndarray, cum: np.ndarray,
              e1sq: float) -> np.ndarray:
    """(LB_g) at each G (0 where the test has no power, G ≤ A)."""
    p = np.where(G > A, 1.0 - A / np.where(G > 0, G, 1.0), 0.0)
    val = kl_lower_from_test(p) * _phi(G, g_sorted, cum) / (prof.groups * e1sq * G * G * prof.D_c)
    return np.where(p > 0, val, 0.0)


def local_sample_size_lower_bound(witness_or_certificate: Any, W: Any, eta: float | None,  # noqa: C901 (counted allow-list)
                                  epsilon: float, alpha: float, *,
                                  error_model: str = "empirical", delta: float = 0.0,
                                  antipodes: Any = None, null_record: int | None = None
                                  ) -> LocalLowerBound:
    """Users every non-interactive ε-LDP protocol needs for worst-query error ≤ α (module docstring).

    ``witness_or_certificate``: an approx_gamma_2 ``Certificate`` (or the planner's result,
    which has ``.certificate``), an ``ApproxGamma2Witness`` or a pair ``(U, d)``; the PSD
    condition on (U, d) is re-checked here (certified λ_min), and a witness that fails it is
    refused. ``W``: dense array, ``Workload`` or spec string. ``eta``: the radius at which
    ``gamma2_eta_lower`` (the witness's value for γ₂(W; η)) is reported; it defaults to the
    certificate's η and does not enter ``n_lower``. ``alpha``: error on the normalised answers
    W h/n. ``antipodes``: an involution τ with W[:, τ] = −W (then the one-group route, Edmonds, Nikolov & Ullman 2020,
    Thm 22). ``null_record``: x₀ of the two-group reduction (default: the best for the witness).
    """
    W = _dense(W)
    k, N = W.shape
    U, d, cert_eta = _witness_arrays(witness_or_certificate)
    U, d, margin = _check_witness(W, U, d)
    epsilon = positive_number("epsilon", epsilon, LocalError)
    alpha = positive_number("alpha", alpha, LocalError)
    if error_model not in ERROR_MODELS:
        raise LocalError(f"unknown error_model {error_model!r}; expected one of {ERROR_MODELS}")
    try:
        delta_f = float(delta)
    except (TypeError, ValueError):
        raise LocalError(f"delta must be a number, got {delta!r}") from None
    if not delta_f == 0.0:
        raise LocalError("the bound is for pure ε-LDP (δ = 0); an (ε, δ)-LDP protocol is not covered")
    if eta is None:
        eta = cert_eta
    if eta is not None:
        eta = float(eta)
        if not (math.isfinite(eta) and eta >= 0):
            raise LocalError(f"eta must be a finite number ≥ 0, got {eta!r}")
    tau = None if antipodes is None else _antipodes(antipodes, W)

    prof = _profile(W, U, d, tau, null_record)
    g_sorted, cum = _phi_table(prof)
    e1sq = math.expm1(epsilon) ** 2
    spread = float(np.max(np.max(W, axis=1) - np.min(W, axis=1)))  # ϱ
    safety = 1.0 - 64.0 * (k + N + 16) * _U

    # a fixed grid of G (independent of n, so the empirical F(n) is non-decreasing)
    G_min = 2.0 * prof.groups * alpha  # A without sampling terms: no test power below it
    grid: list[np.ndarray] = [g_sorted[g_sorted > G_min]]
    if g_sorted.size and g_sorted[0] > G_min:
        grid.append(np.geomspace(G_min * (1 + 1e-9), g_sorted[0], G_GRID_POINTS))
        # κ(1 − x)x² peaks at x = ½: for δ = 0 the optimum in each interval of constant S is
        # G = 2A = 4gα, clipped to the interval
        lo = np.append(g_sorted[1:], G_min)
        grid.append(np.clip(2.0 * G_min, lo, g_sorted))
    if eta is not None and eta > 0:
        grid.append(np.array([eta]))
    G = np.unique(np.concatenate(grid)) if grid else np.zeros(0)
    G = G[G > 0]

    gr = prof.groups

    def a_of(n: float) -> float:
        """A = α₀ + α₁ of step 4 for the g-group protocol with n users per group."""
        if error_model == "distributional" or math.isinf(n):
            return 2.0 * gr * alpha
        dk = spread * math.sqrt(gr * math.log(2.0 * k) / (2.0 * n))
        d1 = 0.5 * spread * math.sqrt(gr / n)
        return 2.0 * gr * alpha + dk + d1

    def F(n: float) -> tuple[float, float]:
        if G.size == 0:
            return 0.0, math.nan
        vals = _bound_at(G, a_of(n), prof, g_sorted, cum, e1sq)
        i = int(np.argmax(vals))
        return float(vals[i]) * safety, float(G[i])

    # empirical model, one user (module docstring, step 6): n ≥ ϱ / (α (e^ε + 1))
    n_one_user = spread / (alpha * (math.exp(epsilon) + 1.0)) if error_model == "empirical" else 0.0
    iterations = 0
    if error_model == "distributional":
        n_low, G_best = F(math.inf)
        converged = True
    else:
        # every feasible n has n ≥ F(n) (F non-decreasing) and n ≥ n_one_user: the iterates
        # n ← ⌈F(n)⌉ started at ⌈n_one_user⌉ stay ≤ the least such n
        n = max(1.0, float(math.ceil(n_one_user * safety)))
        converged = False
        while iterations < MAX_FIXED_POINT_ITERATIONS:
            iterations += 1
            f, G_best = F(n)
            if n >= f:
                converged = True
                break
            n = float(math.ceil(f))
        n_low = n
        if n_low == 1.0:
            n_low = max(F(1.0)[0], n_one_user * safety)  # ≤ 1: the real value, no information

    gamma_form = None
    a_final = a_of(max(n_low, 1.0)) if error_model == "empirical" else a_of(math.inf)
    if eta is not None and eta > a_final and prof.D_r > 0:
        p = 1.0 - a_final / eta
        gamma_hat = (prof.shifted_inner - eta * prof.l1) / (2.0 * math.sqrt(prof.D_r * prof.D_c))
        if gamma_hat > 0:
            gamma_form = (4.0 * kl_lower_from_test(p) * gamma_hat ** 2
                          / (prof.groups * e1sq * eta ** 2) * safety)
    g2 = approx_gamma_2_lower(W, U, d, eta) if eta is not None else None

    model_text = ("on every dataset of n records, E‖â − W h/n‖_∞ ≤ α" if error_model == "empirical"
                  else "for every record distribution ρ and n i.i.d. records, E‖â − Wρ‖_∞ ≤ α")
    binds = ("every non-interactive (public-coin allowed) ε-LDP protocol — each user sends one "
             "message through a randomizer fixed in advance, pure ε, δ = 0 — whose worst-query "
             f"error satisfies {model_text} (normalised answers; on counts W h the error is α·n) "
             f"has n ≥ n_lower = {n_low:.6g} users (ε = {epsilon:g}, α = {alpha:g})")
    derivation = (
        f"seed 003 Thm 23 with constants kept: n ≥ κ(1 − A/G)·Φ(G)/(g(e^ε−1)²G²D_c), "
        f"κ(p) = max(2p², −ln(1−p²)), g = {prof.groups} ({prof.route}), "
        f"A = 2gα{'' if error_model == 'distributional' else ' + δ_k(n) + δ_1(n)'}, "
        f"Φ(G) = Σ_(ĝ_v ≥ G) c_v²/d_r,v; best G = {G_best:.6g}; per-user χ² ≤ (e^ε−1)²/4·‖M‖² "
        "(our proof of Lemma 11), ‖M‖² ≤ 4G²D_c/Φ(G) from diag(d) − ½M_U ⪰ 0")
    details: dict[str, Any] = {
        "route": prof.route, "groups": prof.groups, "null_record": prof.null_record,
        "best_G": G_best, "A": a_final, "D_r": prof.D_r, "D_c": prof.D_c,
        "rows_usable": int(g_sorted.size), "ghat_max": float(g_sorted[0]) if g_sorted.size else 0.0,
        "inner_shifted": prof.shifted_inner, "l1": prof.l1,
        "row_sum_l1_ratio": float(np.sum(np.abs(U.sum(axis=1)))) / float(np.sum(np.abs(U))),
        "psd_margin": margin, "query_spread": spread, "k": k, "N": N,
        "n_lower_gamma_form": gamma_form, "fixed_point_iterations": iterations,
        "fixed_point_converged": converged, "expm1_eps_sq": e1sq, "n_one_user": n_one_user,
        "n_lower_distributional": F(math.inf)[0],
    }
    return LocalLowerBound(
        n_lower=float(n_low), alpha=alpha, epsilon=epsilon, eta=eta, gamma2_eta_lower=g2,
        error_model=error_model, binds=binds, derivation=derivation,
        constant_note="all constants explicit (no Ω): see the module docstring, steps 1-5",
        details=details)


# ---------------------------------------------------------------------------------
# the upper bound
# ---------------------------------------------------------------------------------
def _factors(obj: Any) -> tuple[np.ndarray, np.ndarray, float | None]:
    if hasattr(obj, "certificate") and isinstance(obj.certificate, Certificate):
        obj = obj.certificate
    eta = None
    if isinstance(obj, Certificate):
        eta = obj.eta
        obj = obj.factorization
    if hasattr(obj, "R_factors") and hasattr(obj, "A_factors"):
        Rs: list[np.ndarray] = [np.asarray(f, dtype=np.float64) for f in obj.R_factors]
        As: list[np.ndarray] = [np.asarray(f, dtype=np.float64) for f in obj.A_factors]
        R, A = reduce(np.kron, Rs), reduce(np.kron, As)
        return R, A, eta
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        return np.asarray(obj[0], dtype=np.float64), np.asarray(obj[1], dtype=np.float64), None
    raise LocalError("expected a Certificate, a planner result, a Factorization or a pair (R, A); "
                     f"got {type(obj).__name__}")


def local_upper_bound_n(factorization_or_certificate: Any, W: Any, eta: float | None,
                        epsilon: float | None, alpha: float, *, sigma: float,
                        error_model: str = "empirical") -> LocalUpperBound:
    """Users the local approximate factorization mechanism needs for E‖error‖_∞ ≤ α (module docstring).

    ``sigma``: the randomizer's noise constant in the mgf sense (E e^{λ⟨θ, Y−a⟩} ≤ e^{λ²σ²/2}
    for unit θ), for inputs ‖a‖₂ ≤ 1; it must come from an ε-LDP randomizer for the comparison
    with the lower bound to mean anything (``epsilon`` is recorded, not used).
    """
    W = _dense(W)
    R, A, cert_eta = _factors(factorization_or_certificate)
    if R.ndim != 2 or A.ndim != 2 or R.shape[1] != A.shape[0] or (R.shape[0], A.shape[1]) != W.shape:
        raise LocalError(f"R·A has shape ({R.shape[0]}, {A.shape[-1]}), the workload {W.shape}")
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(A))):
        raise LocalError("the factorization has a non-finite entry")
    alpha = positive_number("alpha", alpha, LocalError)
    sigma = positive_number("sigma", sigma, LocalError)
    if epsilon is not None:
        epsilon = positive_number("epsilon", epsilon, LocalError)
    if error_model not in ERROR_MODELS:
        raise LocalError(f"unknown error_model {error_model!r}; expected one of {ERROR_MODELS}")
    if eta is None:
        eta = cert_eta if cert_eta is not None else 0.0
    eta = float(eta)
    if not (math.isfinite(eta) and eta >= 0):
        raise LocalError(f"eta must be a finite number ≥ 0, got {eta!r}")
    k = W.shape[0]
    residual = float(np.max(np.abs(W - R @ A)))
    eta_eff = max(eta, residual * (1.0 + 4.0 * (R.shape[1] + 2) * _U))
    gamma = (norms.row_norm_max(R) * norms.col_norm_max(A)
             * norms.norm_upper_factor(R.shape[1]) * norms.norm_upper_factor(A.shape[0]))
    spread = float(np.max(np.max(W, axis=1) - np.min(W, axis=1)))
    coef = gamma * sigma + (0.5 * spread if error_model == "distributional" else 0.0)
    n_up = (2.0 * math.log(2.0 * k) * coef ** 2 / (alpha - eta_eff) ** 2 if alpha > eta_eff
            else math.inf)
    holds = ("the approximate factorization mechanism (W̃ = RA within η_eff, A scaled to "
             "max_x ‖a_x‖₂ = 1, each user sends one ε-LDP message Y with E[Y] = a_x and "
             "σ-subgaussian noise, server releases R·mean(Y)) has "
             + ("E‖â − W h/n‖_∞ ≤ α on every dataset" if error_model == "empirical"
                else "E‖â − Wρ‖_∞ ≤ α for n i.i.d. records from any ρ")
             + f" once n ≥ n_upper = {n_up:.6g}")
    derivation = ("seed 003 Thm 10: E‖R·mean(Y − a)‖_∞ ≤ ‖R‖_{2→∞}σ√(2ln(2k)/n) (max of 2k "
                  "subgaussians) plus bias ≤ η_eff"
                  + (" plus sampling (ϱ/2)√(2ln(2k)/n)" if error_model == "distributional" else "")
                  + "; n_upper = 2 ln(2k)(γσ" + (" + ϱ/2" if error_model == "distributional" else "")
                  + ")²/(α − η_eff)²")
    return LocalUpperBound(
        n_upper=n_up, alpha=alpha, epsilon=epsilon, eta=eta, eta_effective=eta_eff, sigma=sigma,
        gamma2_eta_upper=gamma, error_model=error_model, holds_for=holds, derivation=derivation,
        details={"k": k, "residual": residual, "query_spread": spread, "noise_coefficient": coef})


# ---------------------------------------------------------------------------------
# known cases (Edmonds, Nikolov & Ullman 2020, §3.6)
# ---------------------------------------------------------------------------------
def parity_witness(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The analytic witness of Edmonds, Nikolov & Ullman 2020, Cor. 5 (§3.6) for rows of a Hadamard matrix.

    U = W (k rows, pairwise orthogonal, ‖w_v‖² = N), d_r = N/(2√k)·1, d_c = √k/2·1 (times
    1 + 1e-9 so the PSD check has room): d_r d_c = N/4 = ‖U‖₂²/4 makes diag(d) − ½M_U ⪰ 0,
    Σd = N√k, and the witness value is (1 − η)√k = γ₂(W; η) exactly (the primal (1−η)·I·W).
    """
    W = np.asarray(W, dtype=np.float64)
    k, N = W.shape
    G = W @ W.T
    if not (np.allclose(G, N * np.eye(k)) and np.all(np.abs(np.abs(W) - 1.0) == 0)):
        raise LocalError("parity_witness needs ±1 rows that are pairwise orthogonal (Hadamard rows)")
    s = 1.0 + 1e-9
    d = np.concatenate([np.full(k, s * N / (2.0 * math.sqrt(k))), np.full(N, s * math.sqrt(k) / 2.0)])
    return W.copy(), d
