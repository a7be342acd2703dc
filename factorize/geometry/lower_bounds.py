"""Lower bounds on the error of ANY differentially private mechanism (docs/math.md §9).

The two bounds a plan states (``factorize.plan.lower_bound``), each returned as a
:class:`LowerBound`:

* :func:`spectral_lower_bound` — Nikolov, Talwar & Zhang 2013, §2.3.3: Theorem 10, eq. (5),
  specLB, eq. (6): ``|S|·σ_min²(W|_S)``;
* :func:`packing_lower_bound` — Nikolov 2023, §2.2, Lemmas 6–7:
  a packing of the columns.
Group privacy / ε-scaling in both: Nikolov, Talwar & Zhang 2013, §2.3.1, Lemma 3. The third bound of the papers,
the determinant bound (Nikolov, Talwar & Zhang 2013, §2.3.3, eqs. (7)–(11): ``|S|·|det(Π W|_S)|^{2/|S|}``), is
research code that no plan states: ``factorize.research.determinant_lower_bound``. It is
built on this module's checked inputs, privacy-side factors and certified evaluation — the
names below without a leading underscore that are not in ``__all__``.

Normalisation. The project answers counts ``(W h)_i`` (h a histogram, ``||h||_1`` = number
of records), as Nikolov, Talwar & Zhang 2013 do (``y = A x``, ``||x||_1 = n``; their §2.3, §2.3.1). Nikolov 2023
uses statistical queries ``Q(X) = (1/n) Σ_x Q(x)`` (its §2.1) and the error
``E ||M(X) − Q(X)||_2 / √k``; an error α there is ``n·α`` in counts, and every conversion
below says so. Every bound here is about the worst case over the datasets allowed by ``n``:

* ``relation="add_remove"`` (project default): histograms with ``||h||_1 ≤ n`` (n = None: any
  size), neighbours ``h − h' = ±e_x``;
* ``relation="replace"``: histograms with ``||h||_1 = n`` exactly, neighbours
  ``h − h' = e_x − e_y``. A replace-DP mechanism need not be add/remove-DP, so a bound for
  one relation says nothing about mechanisms private only under the other.

Constants. The papers state specLB and detLB only up to unspecified absolute constants and
for unspecified "sufficiently small constant" ε, δ (Nikolov, Talwar & Zhang 2013, Theorem 10, eqs. (6), (11)), and
Lemma 7 of Nikolov 2023 with ``≳``. A lower bound with a hidden constant cannot go into a
certificate, so ``value`` is always a *fully explicit* bound, valid for every ε > 0 and
0 < δ < 1, obtained by re-running the papers' arguments with every constant kept (the proofs
are in the docstrings; they use only Assouad's pairing, Markov's inequality, group privacy as
in Nikolov, Talwar & Zhang 2013, Lemma 3, and the papers' own discrepancy inequalities). The papers' un-constant-ed
quantities are reported in ``details`` (``seed_specLB``, ``seed_detLB``, ``seed_lemma7``)
together with ``constant_note``; those are Ω(·)/≳ statements, *not* bounds by themselves.

Search. The best subset is hard to find (the maximisations are over 2^N subsets), so the
spectral bound searches (``factorize.geometry.column_subset_search``): greedy on the exact
smallest eigenvalue (secular equation), pivoted QR (= greedy volume maximisation), backward
elimination, local search, and exhaustive search for N ≤ 12. Any subset gives a valid bound;
the search only decides how good it is. The final numbers are recomputed from one SVD of the
chosen columns with the rounding allowance of ``factorize.norms``, so they hold for the exact
matrix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.geometry.column_subset_search import (
    EXHAUSTIVE_N,
    multistart,
    numerical_rank_tol,
    search_subsets,
    subset_size_cap,
)
from factorize.geometry.errors import GeometryError
from factorize.norms import UNIT_ROUNDOFF, norm_upper_factor, rounding_allowance
from factorize.privacy.guarantees import Neighbouring

__all__ = [
    "LowerBound",
    "group_privacy_delta",
    "hypothesis_error_floor",
    "packing_lower_bound",
    "spectral_lower_bound",
]

MEASURE_RMS = ("RMS error per query in counts: sup over the allowed histograms h of "
               "sqrt(E||M(h) − W h||_2² / k), k = number of queries")
MEASURE_MEAN_L2 = ("mean l2 error per query in counts: sup over the allowed histograms h of "
                   "E||M(h) − W h||_2 / sqrt(k) (seed 000's err^{l2} times n); by Jensen it is "
                   "also a lower bound on the RMS error sqrt(E||M(h) − W h||_2² / k)")

_T_DECREASE = 2.2185  # t²/(1 + e^t) decreases for t ≥ this (e^t (t − 2) > 2)


@dataclass(frozen=True)
class LowerBound:
    """A lower bound on the error of every mechanism of a class.

    ``value``: the bound, in the units of ``measure`` (counts, never fractions of n).
    ``measure``: the error it bounds, with its normalisation and the allowed datasets.
    ``binds``: the class of mechanisms it holds for, with the parameter range.
    ``subset``: the columns of W the witness uses (None when not column-based).
    ``details``: the witness (multiplicity, σ_min, determinant, packing, …), the paper's
    un-constant-ed quantity and ``constant_note``.
    """

    value: float
    measure: str
    binds: str
    subset: tuple[int, ...] | None
    details: dict


# --------------------------------------------------------------------------------------------
# privacy-side factors


def group_privacy_delta(epsilon: float, delta: float, m: Any) -> np.ndarray:
    """``δ_m = δ (e^{mε} − 1)/(e^ε − 1)``: an (ε, δ)-DP mechanism is (mε, δ_m)-DP for inputs at
    distance m (the chain ``x_0, …, x_m`` of Nikolov, Talwar & Zhang 2013, Lemma 3). Vectorised over ``m``."""
    m = np.asarray(m, dtype=np.float64)
    with np.errstate(over="ignore"):  # in logs: e^ε − 1 overflows for ε > 709
        return delta * np.exp(_log_expm1(m * epsilon) - float(_log_expm1(np.float64(epsilon))))


def _log_expm1(x: Any) -> np.ndarray:
    """``ln(e^x − 1)`` for x > 0 without overflow: ``x + ln(1 − e^{−x})``."""
    x = np.asarray(x, dtype=np.float64)
    return x + np.log(-np.expm1(-x))


def hypothesis_error_floor(epsilon: float, delta: float, m: Any) -> np.ndarray:
    """``p_m = (1 − δ_m)_+ / (1 + e^{mε})``: for two inputs at distance m, any test errs with
    probability ≥ p_m on average over the two (DP gives ``1 − a ≤ e^{mε} b + δ_m`` and
    ``1 − b ≤ e^{mε} a + δ_m`` for the two error probabilities a, b; add them)."""
    m = np.asarray(m, dtype=np.float64)
    one_minus = np.clip(1.0 - group_privacy_delta(epsilon, delta, m), 0.0, None)
    return one_minus * np.exp(-np.logaddexp(0.0, m * epsilon))


def multiplicities(epsilon: float, m_max: int | None, exhaustive_limit: int) -> np.ndarray:
    """Candidate multiplicities m ≥ 1 (each record repeated m times in the witness datasets).

    ``m² p_m`` and ``m² (p_m − α)`` decrease once ``mε ≥ 2.2185``, so m beyond
    ``⌈2.2185/ε⌉ + 1`` never helps. All integers up to that cap (and ``m_max``) when there are
    at most ``exhaustive_limit``; otherwise all m ≤ 64 and a geometric grid (any m gives a
    valid bound; the grid only costs a little optimality).
    """
    cap = max(1, math.ceil(_T_DECREASE / epsilon) + 1)
    top = cap if m_max is None else min(cap, int(m_max))
    if top < 1:
        return np.zeros(0, dtype=np.int64)
    if top <= exhaustive_limit:
        return np.arange(1, top + 1, dtype=np.int64)
    grid = np.round(np.geomspace(64, top, max(2, exhaustive_limit - 64)))
    return np.unique(np.concatenate([np.arange(1, 65), grid, [top]]).astype(np.int64))


# --------------------------------------------------------------------------------------------
# input handling


def _as_matrix(W: Any) -> np.ndarray:
    if hasattr(W, "dense") and not isinstance(W, np.ndarray):
        W = W.dense()
    A = np.asarray(W, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise GeometryError(f"W must be a non-empty 2-D matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise GeometryError("W must be finite (no NaN or inf entries)")
    return A


def _check_epsilon(epsilon: Any) -> float:
    e = float(epsilon)
    if not (math.isfinite(e) and e > 0):
        raise GeometryError(f"epsilon must be a finite positive number, got {epsilon!r}")
    return e


def _check_delta(delta: Any) -> float:
    d = float(delta)
    if not (0.0 < d < 1.0):
        raise GeometryError(f"delta must lie in (0, 1), got {delta!r}")
    return d


def _check_n(n: Any) -> float | None:
    """The dataset size bound n (finite, > 0), or None when not given."""
    return None if n is None else _required_n(n)


def _required_n(n: Any) -> float:
    """The dataset size bound n (finite, > 0); ValueError when not given."""
    if n is None:
        raise GeometryError("the dataset size bound n is required")
    v = float(n)
    if not (math.isfinite(v) and v > 0):
        raise GeometryError(f"the dataset size bound n must be a finite positive number, got {n!r}")
    return v


def _relation(relation: Any) -> str:
    try:
        return Neighbouring.parse(relation).key
    except ValueError as exc:  # PrivacyError is a ValueError; re-raise with the same message
        raise GeometryError(str(exc)) from None


def datasets_text(rel: str, n: float | None) -> str:
    if rel == "add_remove":
        size = "any size" if n is None else f"||h||_1 ≤ {n:g}"
        return f"histograms h ≥ 0 with {size}, add/remove neighbours"
    size = "some size n" if n is None else f"||h||_1 = {n:g} exactly"
    return f"histograms h ≥ 0 with {size}, replace neighbours"


def _centred(A: np.ndarray, rel: str, anchor: int | None) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The matrix the (ε, δ) arguments run on, and the original column index of each column.

    add/remove: W itself. replace: ``W_z = (w_j − w_z)_{j ≠ z}`` for an anchor record z (the
    witness datasets keep the record count fixed by moving records between j and z); the
    default anchor is the column nearest the centroid.
    """
    N = A.shape[1]
    if rel == "add_remove":
        return A, np.arange(N), None
    if N < 2:
        raise GeometryError("the replace relation needs at least two columns")
    if anchor is None:
        c = A.mean(axis=1, keepdims=True)
        anchor = int(np.argmin(np.einsum("ij,ij->j", A - c, A - c)))
    if not (0 <= int(anchor) < N):
        raise GeometryError(f"anchor must be a column index in [0, {N}), got {anchor}")
    z = int(anchor)
    keep = np.array([j for j in range(N) if j != z])
    return A[:, keep] - A[:, [z]], keep, z


# --------------------------------------------------------------------------------------------
# certified evaluation of a witness subset


def _sigma_min_certified(A: np.ndarray, A0: np.ndarray, cols: np.ndarray, idx: np.ndarray,
                         anchor: int | None) -> float:
    """σ_min(W_S) for the exact matrix, from below (0 when |S| > rank)."""
    sv = certified_singular_values(A[:, idx], forming_error(A0, cols[idx], anchor))
    return float(sv[-1]) if sv.size == idx.size else 0.0


def certified_singular_values(B: np.ndarray, extra: float = 0.0) -> np.ndarray:
    """Singular values of B, each lowered by the LAPACK rounding allowance (``norms``) plus
    ``extra`` (the rounding of forming B), clipped at 0: lower bounds for the exact matrix."""
    s = np.linalg.svd(B, compute_uv=False)
    slack = rounding_allowance(B.shape, float(s[0])) + extra
    return np.clip(s - slack, 0.0, None)


def forming_error(A0: np.ndarray, cols: np.ndarray, anchor: int | None) -> float:
    """Spectral-norm bound on the rounding of ``w_j − w_z`` (replace): ``u ||(|w_j| + |w_z|)||_F``."""
    if anchor is None:
        return 0.0
    M = np.abs(A0[:, cols]) + np.abs(A0[:, [anchor]])
    return UNIT_ROUNDOFF * float(np.linalg.norm(M))


# --------------------------------------------------------------------------------------------
# 1. spectral bound


def _spectral_factor(epsilon: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """(m, running max of m² p_m / 4 over multiplicities ≤ m)."""
    m = multiplicities(epsilon, None, 200_000)
    g = m.astype(np.float64) ** 2 * hypothesis_error_floor(epsilon, delta, m) / 4.0
    return m, np.maximum.accumulate(g)


def _best_multiplicity(m: np.ndarray, gmax: np.ndarray, m_limit: float | None) -> tuple[int, float]:
    if m_limit is None:
        i = m.size - 1
    else:
        i = int(np.searchsorted(m, math.floor(m_limit), side="right")) - 1
        if i < 0:
            return 0, 0.0
    first = int(np.argmax(gmax[: i + 1] >= gmax[i]))  # the multiplicity attaining the running max
    return int(m[first]), float(gmax[i])


def checked_inputs(W: Any, epsilon: Any, delta: Any, n: Any, relation: Any, anchor: Any,
                   max_size: Any) -> tuple:
    """The checked inputs shared by the spectral bound and the (research) determinant bound:
    (W, its centred columns A for the relation, their column indices, the anchor, k, ε, δ, n,
    relation, the subset-size cap)."""
    A0 = _as_matrix(W)
    eps, dlt = _check_epsilon(epsilon), _check_delta(delta)
    n_ = _check_n(n)
    rel = _relation(relation)
    A, cols, z = _centred(A0, rel, anchor)
    return A0, A, cols, z, A0.shape[0], eps, dlt, n_, rel, subset_size_cap(A, max_size, n_)


def spectral_lower_bound(W: Any, epsilon: float, delta: float, n: float | None = None, *,
                         relation: str = "add_remove", method: str = "auto",
                         max_size: int | None = None, anchor: int | None = None,
                         subset: Sequence[int] | None = None) -> LowerBound:
    """Spectral lower bound (Nikolov, Talwar & Zhang 2013, §2.3.3, eqs. (5)–(6)) with explicit constants.

    Paper's form. ``specLB(A, n) = max_{|S| = s ≤ n} max_{Π ∈ P_s} s·σ_min²(Π A|_S)`` and
    ``opt_{c1,c2}(A, n) = Ω(1)·specLB(A, n)`` for some unspecified small constants c1, c2 (the
    privacy parameters) and an unspecified Ω constant (Nikolov, Talwar & Zhang 2013, Theorem 10 [MN12], eq. (5),
    eq. (6)); the ε-dependence comes from Lemma 3: ``opt_{ε,δ}(A, n) ≥ k² opt_{kε,δ'}(A, n/k)``.
    opt is the total squared error ``sup_{||x||_1 ≤ n} E||Ax − M(x)||²`` in counts. Projections
    cannot help: ``||ΠA_S x|| ≤ ||A_S x||``, so the max over Π is attained by the projection
    onto the range of A_S, i.e. ``σ_min(Π A_S) = σ_min(A_S)`` (the s-th singular value).

    Explicit form used for ``value`` (a self-contained proof, same witness family as the paper):
    for any S with ``σ = σ_min(W|_S) > 0``, any integer m ≥ 1 with ``m|S| ≤ n``, and every
    (ε, δ)-DP mechanism M (add/remove),

        sup_{||h||_1 ≤ n} E||M(h) − W h||_2²  ≥  m² |S| σ² p_m / 4,
        p_m = (1 − δ_m)_+ / (1 + e^{mε}),   δ_m = δ (e^{mε} − 1)/(e^ε − 1).

    Proof (Assouad). Datasets ``h_v = m(1 + v)/2`` on S, v ∈ {±1}^S; ``W h_v = c + (m/2) W_S v``.
    Let ``ṽ`` solve ``(m/2) W_S ṽ = P(y − c)`` (P: projection onto range W_S) and
    ``v̂ = sign ṽ``. Pythagoras and σ_min give ``||y − W h_v||² ≥ (m²σ²/4)||ṽ − v||² ≥
    (m²σ²/4) #{j : v̂_j ≠ v_j}`` (v̂_j ≠ v_j forces |ṽ_j − v_j| ≥ 1). ``h_v`` and
    ``h_{v⊕j}`` are m add/remove steps apart, hence (mε, δ_m)-indistinguishable (group privacy, Nikolov, Talwar & Zhang 2013,
    Lemma 3's chain), so — v̂_j being a test between them — averaged over v
    each coordinate is wrong with probability ≥ p_m (:func:`hypothesis_error_floor`). Sum over j;
    the sup over h is at least the average over v. The datasets have ``||h_v||_1 ≤ m|S|``.
    With ``m ≈ 2.2/ε`` this is ``≈ 0.12·|S|σ²/ε²`` when ``δ ≪ ε`` — the paper's
    ``Ω(specLB(A, εn)/ε²)`` shape.

    ``relation="replace"``: the same with ``W_z = (w_j − w_z)_{j≠z}`` (records move between j
    and an anchor z, padding with z to exactly n records; m replacements apart).

    Returns ``value`` = the RMS error per query ``sqrt(bound / k)`` (``measure``). Valid for
    every ε > 0 and 0 < δ < 1 (positive whenever δ < 1, taking m = 1); an ε-DP mechanism is
    (ε, δ)-DP for every δ > 0, so a tiny δ gives a pure-DP bound. ``details``: ``sigma_min``
    (certified), ``size``, ``multiplicity``, ``p_m``, ``delta_m``, ``total_squared_error`` (the
    bound on ``sup E||M(h) − W h||²``), ``seed_specLB`` / ``seed_specLB_subset`` (the paper's
    quantity ``max |S|σ_min²(W_S)`` over the subsets searched with |S| ≤ n: a lower estimate of
    specLB(W, n), an Ω-statement only), ``anchor`` (replace), ``method``, ``constant_note``.

    Search: ``method="auto"`` enumerates subsets for N ≤ 12, else runs ``"heuristic"``: forward
    greedy on λ_min (exact via the secular equation), pivoted-QR prefixes and backward
    elimination, then a budgeted add/drop/swap local search from the best few; ``"greedy"``,
    ``"qr"``, ``"exhaustive"`` run one family alone. ``subset`` (original column indices): skip
    the search and evaluate that witness (e.g. to re-check a stored one); ``max_size`` caps |S|.
    """
    A0, A, cols, z, k, eps, dlt, n_, rel, size_cap = checked_inputs(W, epsilon, delta, n, relation,
                                                                    anchor, max_size)
    m_arr, gmax = _spectral_factor(eps, dlt)

    def factor(s: int) -> tuple[int, float]:  # (best m, max m² p_m / 4) subject to m·s ≤ n
        return _best_multiplicity(m_arr, gmax, None if n_ is None else n_ / s)

    cands = search_subsets(A, cols, method, size_cap, subset)
    details: dict[str, Any] = {
        "method": method if subset is None else "given subset", "relation": rel, "anchor": z, "n": n_,
        "constant_note": (
            "seed 002 eq. (6) states opt = Omega(specLB) only for unspecified small constants "
            "(eps, delta) = (c1, c2) and an unspecified Omega constant; value uses the explicit "
            "Assouad + group-privacy bound m²|S|σ_min² p_m/4 (docstring), valid for all eps > 0, "
            "0 < delta < 1. seed_specLB is the seed's quantity max |S|σ_min²(W_S), |S| ≤ n, over the "
            "subsets searched (a lower estimate of specLB(W, n)); it is not a bound by itself."),
        "witness": ("h_v = m(1+v)/2 on S, v in {±1}^S" if rel == "add_remove" else
                    "per j in S: m(1+v_j)/2 copies of j and m(1-v_j)/2 of the anchor; "
                    "padded with the anchor"),
    }
    measure = MEASURE_RMS + f" ({datasets_text(rel, n_)})"
    binds = binds_approx_dp(eps, dlt, rel)
    # the chosen subsets (indices into cols): the best for the bound, the seed's quantity's
    best_c = max(cands, key=lambda c: c[0].size * c[1] * factor(c[0].size)[1], default=None)
    seed_c = max(cands, key=lambda c: c[0].size * c[1], default=None)
    best = None if best_c is None else best_c[0]
    seed = None if seed_c is None else seed_c[0]
    heuristic = method == "heuristic" or (method == "auto" and A.shape[1] > EXHAUSTIVE_N)
    if subset is None and heuristic and best is not None:
        tol = numerical_rank_tol(A)

        def score_rigorous(s: int, lam: np.ndarray) -> float:
            return s * lam[0] * factor(s)[1] if s <= size_cap and lam[0] > tol else 0.0

        def score_seed(s: int, lam: np.ndarray) -> float:
            return s * lam[0] if s <= size_cap and lam[0] > tol else 0.0

        seed = multistart(A, cands, lambda c: c[0].size * c[1], score_seed)
        # without n the factor does not depend on |S|: both objectives have the same maximiser
        best = seed if n_ is None else multistart(
            A, cands, lambda c: c[0].size * c[1] * factor(c[0].size)[1], score_rigorous)
    sigma = _sigma_min_certified(A, A0, cols, best, z) if best is not None else 0.0
    m, g = factor(best.size) if best is not None else (0, 0.0)
    total = best.size * sigma * sigma * g if best is not None else 0.0
    if seed is not None:
        s_sigma = _sigma_min_certified(A, A0, cols, seed, z)
        details.update(seed_specLB=seed.size * s_sigma ** 2,
                       seed_specLB_subset=tuple(int(c) for c in cols[seed]))
    else:
        details.update(seed_specLB=0.0, seed_specLB_subset=None)
    if best is None or total <= 0.0:  # no subset gives a positive bound
        details.update(size=0, sigma_min=0.0, multiplicity=0, total_squared_error=0.0)
        return LowerBound(0.0, measure, binds, None, details)
    idx = best
    details.update(size=int(idx.size), sigma_min=sigma, multiplicity=m,
                   p_m=float(hypothesis_error_floor(eps, dlt, m)),
                   delta_m=float(group_privacy_delta(eps, dlt, m)), total_squared_error=total)
    return LowerBound(math.sqrt(total / k), measure, binds, tuple(int(c) for c in cols[idx]), details)


def binds_approx_dp(eps: float, dlt: float, rel: str) -> str:
    return ("every (eps, delta)-DP mechanism with outputs in R^k (any algorithm, not only "
            f"factorization mechanisms) "
            f"under {rel} neighbours with eps = {eps:g}, delta = {dlt:g}; the formula is valid for "
            "all eps > 0 and 0 < delta < 1, and for eps-DP mechanisms (which are (eps, delta)-DP)")


# --------------------------------------------------------------------------------------------
# 2. packing bound (pure DP)


def _farthest_point_order(P: np.ndarray, start: int, max_points: int) -> tuple[list[int], np.ndarray]:
    """Gonzalez's farthest-point traversal from ``start``: the first M points are pairwise at
    distance ≥ ``sep[M−1]`` (sep[0] = inf), a greedy packing for every M at once."""
    order = [start]
    sep = [math.inf]
    dist = np.linalg.norm(P - P[:, [start]], axis=0)
    while len(order) < max_points:
        j = int(np.argmax(dist))
        if not dist[j] > 0:
            break
        order.append(j)
        sep.append(float(dist[j]))
        dist = np.minimum(dist, np.linalg.norm(P - P[:, [j]], axis=0))
    return order, np.minimum.accumulate(np.array(sep))


def _packing_multiplicity(epsilon: float, a: int, m_max: int) -> tuple[int, float]:
    """Maximise ``g(m) = m·a/(e^{εm} + a)`` over integers 1 ≤ m ≤ m_max (a = M − 1 ≥ 1).
    g is unimodal in t = εm with its peak at the root of ``e^t (t − 1) = a``."""
    lo, hi = 1.0, 2.0 + math.log(a + 1.0)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if math.exp(mid) * (mid - 1.0) < a:
            lo = mid
        else:
            hi = mid
    t = 0.5 * (lo + hi)
    best = (1, 0.0)
    for mm in {math.floor(t / epsilon), math.ceil(t / epsilon), 1, m_max}:
        mm = int(min(max(mm, 1), m_max))
        g = mm * a / (math.exp(min(epsilon * mm, 700.0)) + a)
        if g > best[1]:
            best = (mm, g)
    return best


def packing_lower_bound(W: Any, epsilon: float, n: float, *, relation: str = "add_remove",
                        max_points: int | None = None) -> LowerBound:
    """Packing lower bound for pure ε-DP (Nikolov 2023, §2.2, Lemmas 6–7) with explicit constants.

    Paper's form (statistical queries, replace neighbours, fixed size n; Nikolov 2023, §2.2, Lemma 6,
    Lemma 7 and its proof):
    if ``y_1 … y_M`` are columns ``Q(x_i)`` with ``||y_i − y_j||_2 > t√k`` (a packing: the
    separation number ``P(S_Q, t√k B_2^k)``), datasets with ``(α/t) n`` copies of x_i and the
    rest x_0 show ``sc_ε(Q, α/2) ≳ t log(P/2)/(αε)`` (Lemma 7, via Lemma 6: ``Δ ≤ log(M/2)/ε``
    differing elements ⇒ error ``> α/2``). In counts (error α at size n is ``nα``) this reads:
    the counts error per query ``E||e||_2/√k`` is ``≳ t·ln(M/2)/(2ε)`` once ``n ≥ ln(M/2)/ε``
    (and ``≳ t·n/2`` below, α = t); ``details["seed_lemma7"]`` reports
    ``(D/√k)·min(ln(M/2)/ε, n)/2`` for the packing found (D its separation), up to the paper's ≳.

    Explicit form used for ``value``: let points ``p_0 = b, p_1, …, p_{M−1}`` be pairwise at
    distance ≥ D, dataset ``h_i`` with answers ``W h_i = b + m·(p_i − b)`` and ``h_i`` at m
    neighbouring steps from ``h_0``. For every ε-DP M with ``e := sup_i E||M(h_i) − W h_i||_2``,
    the open balls of radius ``r = mD/2`` around ``W h_i`` are disjoint; Markov gives
    ``P(M(h_i) ∈ B_i) ≥ 1 − e/r`` and group privacy ``P(M(h_0) ∈ B_i) ≥ e^{−εm}(1 − e/r)``;
    summing over i (≤ 1) gives

        e ≥ (mD/2)·(1 − 1/(1 + (M − 1)e^{−εm})) = (mD/2)·(M − 1)/(e^{εm} + M − 1).

    ``value`` = ``e/√k`` maximised over m ∈ [1, n] (the peak is at ``e^{εm}(εm − 1) = M − 1``,
    ``e ≈ D·ln(M)/(2ε)`` for large M) and over the prefixes of a farthest-point packing:
    * add/remove: points ``{0} ∪ {w_j}``, b = 0 = the empty dataset, ``h_i = m e_{x_i}``
      (``||h_i||_1 = m ≤ n``); Δ = m additions;
    * replace (the paper's model): points ``{w_j}``, b = w_{x_0} (the column nearest the
      centroid), ``h_i = (n − m) e_{x_0} + m e_{x_i}`` (exactly n records); Δ = m replacements.
    It bounds the mean l2 error (``measure``), hence also the RMS error, for datasets of size
    ≤ n (add/remove) or exactly n (replace). Binds every ε-DP mechanism, every ε > 0. (For
    (ε, δ)-DP it is not valid: packing needs δ ≲ e^{−εm}/M.)

    ``max_points``: length of the farthest-point traversal (default: budget-limited,
    ``clip(2·10⁹/(kN), 32, 1024)``; the bound grows only like ln M).
    """
    A = _as_matrix(W)
    eps = _check_epsilon(epsilon)
    n_ = _required_n(n)
    rel = _relation(relation)
    k, N = A.shape
    m_max = math.floor(n_)
    if rel == "add_remove":
        P = np.hstack([np.zeros((k, 1)), A])
        labels = [-1] + list(range(N))
        start = 0
    else:
        P = A
        labels = list(range(N))
        c = A.mean(axis=1, keepdims=True)
        start = int(np.argmin(np.einsum("ij,ij->j", A - c, A - c)))
    if max_points is None:
        max_points = int(min(1024, max(32, 2e9 // (k * P.shape[1]))))
    max_points = max(2, min(int(max_points), P.shape[1]))
    order, sep = _farthest_point_order(P, start, max_points)
    sep = sep / norm_upper_factor(k + 4)  # rounding of the computed distances
    best = (0.0, 0, 0, 0.0)
    if m_max >= 1:
        for M in range(2, len(order) + 1):
            mm, g = _packing_multiplicity(eps, M - 1, m_max)
            val = 0.5 * sep[M - 1] * g
            if val > best[0]:
                best = (val, M, mm, float(sep[M - 1]))
    val, M, mm, D = best
    members = [labels[i] for i in order[:M]] if M else []
    details: dict[str, Any] = {
        "relation": rel, "n": n_, "points": M, "separation": D, "multiplicity": mm,
        "base": members[0] if members else None, "packing": tuple(members),
        "mean_l2_total": val,
        "seed_lemma7": (D / math.sqrt(k)) * min(math.log(M / 2.0) / eps, n_) / 2.0 if M > 2 else 0.0,
        "constant_note": ("seed 000 Lemma 7 holds up to an unspecified constant (≳) and, in its "
                          "statistical-query normalisation, for the sample size "
                          "n = t log(M/2)/(alpha eps); value is the explicit Markov + group-privacy "
                          "bound (mD/2)(M−1)/(e^{eps m} + M − 1)/sqrt(k) "
                          "(docstring), in counts."),
    }
    subset = tuple(int(x) for x in members if x >= 0) or None
    binds = ("every eps-DP mechanism (delta = 0) with outputs in R^k (any algorithm) under "
             f"{rel} neighbours, "
             f"eps = {eps:g}; valid for every eps > 0, datasets of size "
             f"{'≤' if rel == 'add_remove' else '='} n = {n_:g}")
    return LowerBound(val / math.sqrt(k), MEASURE_MEAN_L2 + f" ({datasets_text(rel, n_)})",
                      binds, subset, details)
