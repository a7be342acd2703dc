"""Certified γ_F / γ₂ plans for marginal workloads, in the algebra of attribute subsets.

For a marginal family W (``factorize.marginal_algebra``) over N = Π n_j cells, both
programs of MATH.md §2.1 are invariant under the group that permutes the values of each
attribute; it acts transitively on the cells and permutes the rows of every block. By
convexity an optimal X = AᵀA can be averaged over the group, so it lies in the group's
commutant, the algebra ``X = Σ_T x_T P_T`` (MATH.md §2.3), whose diagonal is the constant
``Σ_T x_T dim_T / N``. The strategy is ``A = X^{1/2} = Σ_T √x_T P_T`` and ``R = W A⁺``;
``R·A = W`` exactly when ``x_T > 0`` for every T with ``λ_T > 0`` (``W P_T = 0`` for the
others). With ``δ_T = dim_T / N`` and ``ℓ_T = λ_T / N = Σ_{S⊇T} 1/rows_S``:

γ_F (closed form). ``||R||_F² = Σ_T λ_T dim_T / x_T`` and ``||A||²_{1→2} = Σ_T x_T δ_T``;
the minimiser under ``diag X ≤ 1`` is ``x_T ∝ √λ_T``, with value

    γ_F(W) = ||W||_tr / √(N k) = (N / √k) · Σ_T δ_T √ℓ_T,      ||W||_tr = Σ_T dim_T √λ_T.

The uniform q gives exactly this lower bound (MATH.md §2.2), so the certificate is tight
up to rounding.

γ₂ (a small convex program). Every row of block S has ``||r||² = Σ_{T⊆S} c_{S,T} / x_T``
with ``c_{S,T} = dim_T N / rows_S²``. With the diagonal shares ``y_T = x_T δ_T``
(``Σ y_T = 1``) and ``ρ_{S,T} = dim_T / rows_S ≤ 1``:

    γ₂(W)² = min_{y ∈ Δ} max_S f_S(y),     f_S(y) = Σ_{T⊆S} ρ_{S,T}² / y_T.

Its Lagrange dual over block weights ω ∈ Δ (ω_S the total weight of block S's rows) is

    γ₂(W)² = max_{ω ∈ Δ} φ(ω)²,    φ(ω) = Σ_T √L_T(ω),    L_T(ω) = Σ_{S⊇T} ω_S ρ_{S,T}²,

the inner minimiser being ``y_T(ω) = √L_T / φ``. This is exactly the Lee–Shraibman–Špalek
bound of MATH.md §2.2 with q uniform and p constant (``ω_S / rows_S``) on the rows of
block S: ``||D_p^{1/2} W D_q^{1/2}||_tr / √(Σp Σq) = φ(ω) / √(Σω)``. φ is concave and
½-homogeneous, and for y = y(ω) the primal value is ``max_S f_S(y) = 2 φ max_S ∂_Sφ`` while
``φ² = 2 φ Σ_S ω_S ∂_Sφ``: the gap is 2φ times the Frank–Wolfe gap of ω. The dual is
maximised by a log-barrier Newton method (one dense KKT solve per step, a few hundred
blocks at most in practice) until that gap is below ~1e-12.

Certificates. ``verify_marginal_solution`` recomputes the upper bound from the stored
coefficients x alone (γ_F: ``√((Σ_T λ_T dim_T / x_T)(Σ_T x_T δ_T) / k)``; γ₂:
``√(max_S Σ_{T⊆S} c_{S,T}/x_T · Σ_T x_T δ_T)``) and the lower bound from the witness alone
(the trace-norm formula with q uniform, and p from ω for γ₂), with per-attribute products
(a different route from the solver's exact integer ratios) and a rounding allowance in the
style of ``factorize.norms``: upper bounds inflated, lower bounds deflated by
``4 (terms + 2) u`` relative, plus an absolute allowance for underflow.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from factorize import norms
from factorize.certificate import relative_gap
from factorize.marginal_algebra import (
    AlgebraCoefficients,
    MarginalFamily,
    closure,
    gram_eigenvalues,
    marginal_family,
    mask_of,
    submasks,
    subset_dim,
    subset_of,
)
from solvers.errors import CertificateGapError, CertificateInvalidError
from workloads import Workload, parse_workload

__all__ = [
    "MARGINAL_NORMS",
    "MAX_GAMMA2_BLOCKS",
    "MAX_LOG2_N",
    "MarginalSolution",
    "solve_marginals",
    "verify_marginal_solution",
]

MARGINAL_NORMS = ("gamma_f", "gamma_2")

#: Largest domain (log₂ N) handled: keeps every product of the verification a normal float.
MAX_LOG2_N = 500

#: Most distinct blocks for the γ₂ Newton method (one dense B×B solve per step).
MAX_GAMMA2_BLOCKS = 3000

_U = norms.UNIT_ROUNDOFF
_TINY = 2.0 ** -1022  # smallest normal float: covers terms lost to underflow


@dataclass(frozen=True)
class MarginalSolution:
    """A certified plan ``X = Σ_T x_T P_T`` (diag X = 1) for a marginal family.

    ``x`` holds the strategy coefficients; the dual witness is q uniform (implied) and,
    for γ₂, the block weights ``weights[i]`` on the distinct subsets ``weight_subsets[i]``
    (each row of block S weighs ``ω_S / (multiplicity_S · rows_S)``). ``upper``, ``lower``
    and ``gap`` are the re-checked numbers of ``verify_marginal_solution``.
    """

    family: MarginalFamily
    norm: str
    x: AlgebraCoefficients
    weight_subsets: tuple[tuple[int, ...], ...] | None
    weights: tuple[float, ...] | None
    upper: float
    lower: float
    gap: float
    verified: bool
    failures: tuple[str, ...]
    seconds: float
    workload_spec: str | None = None
    fingerprint: str | None = None
    method: str = "marginal-algebra"
    details: dict = field(default_factory=dict)

    @property
    def value(self) -> float:
        """The achieved norm of the plan (= the certified upper bound)."""
        return self.upper

    def summary_dict(self) -> dict:
        """Plain-JSON summary (``shape`` as Python ints: N may exceed 2⁵³)."""
        fam = self.family
        out = {
            "workload": self.workload_spec,
            "fingerprint": self.fingerprint,
            "shape": [int(fam.k), int(fam.N)],
            "sizes": list(fam.sizes),
            "norm": self.norm,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "gap": self.gap,
            "verified": self.verified,
            "seconds": self.seconds,
            "method": self.method,
            "subsets": len(fam.subsets),
            "distinct_subsets": len(fam.unique()),
            "algebra_terms": len(self.x.subsets),
            "coefficients": self.x.to_dict(),
            "block_weights": (None if self.weights is None else
                              {"subsets": [list(S) for S in self.weight_subsets],
                               "weights": list(self.weights)}),
        }
        if self.failures:
            out["failures"] = list(self.failures)
        return out


# ---------------------------------------------------------------------------------
# solve
# ---------------------------------------------------------------------------------
def solve_marginals(W: Workload | str | MarginalFamily, norm: str = "gamma_f",
                    gap_tol: float = 1e-6) -> MarginalSolution:
    """Optimal γ_F / γ₂ plan for a marginal workload, with a re-checked certificate.

    Raises ``ValueError`` for a workload that is not a marginal family, for
    ``approx_gamma_2`` (not supported in the algebra) or an unknown norm,
    ``CertificateInvalidError`` when the re-check fails and ``CertificateGapError``
    when its relative gap exceeds ``gap_tol``.
    """
    start = time.perf_counter()
    if norm == "approx_gamma_2":
        raise ValueError("approx_gamma_2 is not supported by the marginal algebra planner "
                         "(the entrywise radius breaks the subset-algebra structure)")
    if norm not in MARGINAL_NORMS:
        raise ValueError(f"unknown norm {norm!r}; expected one of {', '.join(MARGINAL_NORMS)}")
    spec = fingerprint = None
    if isinstance(W, MarginalFamily):
        family = W
    else:
        if isinstance(W, str):
            W = parse_workload(W)
        family = marginal_family(W)
        if family is None:
            raise ValueError("the workload is not a stack of marginal blocks (Kronecker products "
                             "of identities and all-ones rows over one product domain)")
        spec, fingerprint = W.spec, W.fingerprint()
    if family.N.bit_length() > MAX_LOG2_N:
        raise ValueError(f"the domain has N ≈ 2^{family.N.bit_length()} cells, above the "
                         f"float64 range this planner certifies (2^{MAX_LOG2_N})")

    details: dict = {}
    if norm == "gamma_f":
        x = _solve_gamma_f(family)
        weight_subsets = weights = None
    else:
        x, weight_subsets, weights, details = _solve_gamma_2(family)

    draft = MarginalSolution(family=family, norm=norm, x=x, weight_subsets=weight_subsets,
                             weights=weights, upper=math.inf, lower=0.0, gap=math.inf,
                             verified=False, failures=(), seconds=0.0)
    upper, lower, gap, passed, failures = verify_marginal_solution(family, draft)
    if not passed:
        raise CertificateInvalidError("the marginal-algebra certificate failed verification: "
                                      + "; ".join(failures))
    if not gap <= gap_tol:
        raise CertificateGapError(f"certified relative gap {gap:.3g} exceeds the requested "
                                  f"{gap_tol:g} (lower {lower:.12g}, upper {upper:.12g})")
    return MarginalSolution(family=family, norm=norm, x=x, weight_subsets=weight_subsets,
                            weights=weights, upper=upper, lower=lower, gap=gap, verified=True,
                            failures=(), seconds=time.perf_counter() - start,
                            workload_spec=spec, fingerprint=fingerprint, details=details)


def _normalised(family: MarginalFamily, masks: list[int], x: np.ndarray) -> AlgebraCoefficients:
    """Coefficients rescaled to diag X = Σ_T x_T dim_T / N = 1."""
    N = family.N
    diag = math.fsum(float(v) * (subset_dim(family.sizes, t) / N) for t, v in zip(masks, x))
    return AlgebraCoefficients(sizes=family.sizes, subsets=tuple(subset_of(t) for t in masks),
                               values=tuple(float(v) / diag for v in x))


def _solve_gamma_f(family: MarginalFamily) -> AlgebraCoefficients:
    """``x_T ∝ √λ_T`` on the closure (the exact optimum; see the module docstring)."""
    N = family.N
    lam = gram_eigenvalues(family)
    masks = closure(family)
    x = np.array([math.sqrt(lam[t] / N) for t in masks])  # ∝ √λ_T; exact int ratio, rounded
    return _normalised(family, masks, x)


def _gamma2_matrix(family: MarginalFamily) -> tuple[list[int], list[tuple[int, int]], np.ndarray]:
    """Closure masks, distinct blocks (mask, multiplicity), and ``Q[T, S] = ρ_{S,T}²``."""
    masks = closure(family)
    index = {t: i for i, t in enumerate(masks)}
    uniq = family.unique()
    Q = np.zeros((len(masks), len(uniq)))
    for s, (m, _) in enumerate(uniq):
        rows = math.prod(family.sizes[j] for j in subset_of(m))
        for t in submasks(family.effective_mask(m)):
            Q[index[t], s] = (subset_dim(family.sizes, t) / rows) ** 2
    return masks, uniq, Q


def _solve_gamma_2(family: MarginalFamily):
    uniq = family.unique()
    if len(uniq) > MAX_GAMMA2_BLOCKS:
        raise ValueError(f"{len(uniq)} distinct blocks exceed MAX_GAMMA2_BLOCKS={MAX_GAMMA2_BLOCKS} "
                         "for the γ₂ Newton method")
    masks, uniq, Q = _gamma2_matrix(family)
    w, info = _maximise_dual(Q)
    L = Q @ w
    y = np.sqrt(L)
    y /= y.sum()
    delta = np.array([subset_dim(family.sizes, t) / family.N for t in masks])
    x = _normalised(family, masks, y / delta)
    return (x, tuple(subset_of(m) for m, _ in uniq), tuple(float(v) for v in w), info)


def _maximise_dual(Q: np.ndarray, target: float = 1e-13, max_outer: int = 40,
                   max_inner: int = 60) -> tuple[np.ndarray, dict]:
    """Maximise ``φ(ω) = Σ_T √((Qω)_T)`` over the simplex by a log-barrier Newton method.

    Central path of ``F_μ = φ(ω) + μ Σ_S log ω_S`` (``1ᵀω = 1``) with μ ↓ 0 by factors of
    10. For each μ, Newton steps until the centring residual ``max_S |g_S − ωᵀg|`` of
    ``g = ∇F_μ`` is at most Bμ (on the central path g is constant); each step solves the
    equality-constrained KKT system in the affine scaling ``ω = diag(ω) u`` (barrier
    Hessian μI), Jacobi-scaled, with g shifted by ωᵀg first (the projected step is
    shift-invariant, and the shift avoids a catastrophic cancellation near the optimum).
    Then the Frank–Wolfe gap ``FW = max_S ∂_Sφ − ωᵀ∇φ`` is at most 2Bμ, and the relative
    primal-dual gap of γ₂² at ω is ``2 FW / φ``. Stops when ``FW ≤ target · φ``, or when FW
    has not halved in four rounds (the rounding floor). Returns the best ω seen and counts.
    """
    B = Q.shape[1]
    if B == 1:
        return np.ones(1), {"newton_steps": 0, "outer": 0}

    def values(w: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        L = Q @ w
        sL = np.sqrt(L)
        return L, float(sL.sum()), Q.T @ (0.5 / sL)

    def barrier(w: np.ndarray, mu: float) -> float:
        return float(np.sqrt(Q @ w).sum()) + mu * float(np.sum(np.log(w)))

    w = np.full(B, 1.0 / B)
    L, phi, grad = values(w)
    mu = 0.1 * phi / B
    steps = 0
    best_w, best_fw = w.copy(), math.inf
    outer = stalled = 0
    for outer in range(1, max_outer + 1):
        best_err, no_progress = math.inf, 0
        for _ in range(max_inner):
            L, phi, grad = values(w)
            g = grad + mu / w
            # centring residual: on the central path g_S = ν for every S (ν = ωᵀg there);
            # max_S |g_S − ωᵀg| ≤ Bμ keeps FW ≤ 2Bμ
            e = g - w @ g
            err = float(np.max(np.abs(e)))
            if err <= B * mu:
                break
            if err < 0.9 * best_err:
                best_err, no_progress = err, 0
            else:
                no_progress += 1
                if no_progress >= 5:
                    break  # the rounding floor of this μ
            Hn = Q.T @ (Q * (0.25 / (L * np.sqrt(L)))[:, None])  # −∇²φ
            Mt = w[:, None] * Hn * w[None, :]
            Mt[np.diag_indices(B)] += mu
            gt = w * e  # shifting g by a constant leaves the projected step unchanged, and
            # without the shift the step is the small difference of two large vectors
            # Jacobi scaling to a unit diagonal; entries below 1e-18 there are dropped: they
            # cannot change the step, and the subnormals they breed slow LAPACK ~100x.
            sd = np.sqrt(np.diag(Mt))
            Ms = Mt / sd[:, None] / sd[None, :]
            Ms[np.abs(Ms) < 1e-18] = 0.0
            rhs = np.column_stack([gt / sd, w / sd])
            try:  # numpy's LAPACK only: mixing in scipy's OpenBLAS makes two thread pools
                sol = np.linalg.solve(Ms, rhs)  # fight over the cores (measured 300x slower)
            except np.linalg.LinAlgError:
                sol = np.linalg.lstsq(Ms, rhs, rcond=None)[0]
            a, b = sol[:, 0] / sd, sol[:, 1] / sd
            dt = a - (w @ a) / (w @ b) * b
            dec2 = float(gt @ dt)  # Newton decrement², the predicted ascent × 2
            if not dec2 > 0:
                break  # rounding: no ascent direction left
            delta = w * dt
            t = 1.0
            neg = delta < 0
            if np.any(neg):
                t = min(1.0, 0.99 * float(np.min(-w[neg] / delta[neg])))
            if dec2 < 0.1 * mu:
                # quadratic-convergence region of the (self-concordant-like) F/μ: a full step;
                # function values would only measure rounding here
                wn = w + t * delta
            else:
                f0 = barrier(w, mu)
                while t > 1e-14:
                    wn = w + t * delta
                    if np.all(wn > 0) and barrier(wn, mu) >= f0 + 0.25 * t * dec2:
                        break
                    t *= 0.5
                else:
                    break  # no ascent possible at this precision
            w = wn / wn.sum()
            steps += 1
        L, phi, grad = values(w)
        fw = float(grad.max() - w @ grad)
        if fw < 0.5 * best_fw:
            stalled = 0
        else:
            stalled += 1
        if fw < best_fw:
            best_w, best_fw = w.copy(), fw
        if fw <= target * phi or stalled >= 4:  # converged, or at the rounding floor
            break
        mu /= 10.0
    return best_w, {"newton_steps": steps, "outer": outer, "fw_gap": best_fw}


# ---------------------------------------------------------------------------------
# verification (independent of the solve path)
# ---------------------------------------------------------------------------------
def _attr_products(sizes: tuple[int, ...], masks: list[int]) -> dict[str, np.ndarray]:
    """Per-subset products over attributes, one float product each (≤ d factors).

    ``frac[T] = Π_{j∈T}(1 − 1/n_j) Π_{j∉T}(1/n_j)`` (= dim_T/N = diag P_T),
    ``a[T] = Π_{j∈T}(1 − 1/n_j)``, ``inv[T] = Π_{j∈T} 1/n_j``, ``out[T] = Π_{j∉T} n_j``.
    """
    d = len(sizes)
    n = np.array(sizes, dtype=np.float64)
    member = np.array([[(t >> j) & 1 for j in range(d)] for t in masks], dtype=bool).reshape(len(masks), d)
    one_minus = 1.0 - 1.0 / n
    inv_n = 1.0 / n
    return {
        "frac": np.prod(np.where(member, one_minus, inv_n), axis=1),
        "a": np.prod(np.where(member, one_minus, 1.0), axis=1),
        "inv": np.prod(np.where(member, inv_n, 1.0), axis=1),
        "out": np.prod(np.where(member, 1.0, n), axis=1),
    }


def verify_marginal_solution(family: MarginalFamily, sol: MarginalSolution
                             ) -> tuple[float, float, float, bool, tuple[str, ...]]:
    """Recompute ``(upper, lower, gap, passed, failures)`` from ``sol.x`` and the witness alone.

    Upper (the plan ``A = Σ √x_T P_T``, ``R = W A⁺``): requires finite ``x_T ≥ 0`` on subsets
    of the domain, and ``x_T > 0`` for every T with ``λ_T > 0`` — otherwise ``R·A ≠ W``.
    Then ``||A||²_{1→2} = Σ_T x_T dim_T/N``, and
    γ_F: ``||R||_F² = Σ_T λ_T dim_T / x_T``, ``λ_T = Σ_{blocks S⊇T} Π_{j∉S} n_j``;
    γ₂: ``||R||²_{2→∞} = max_S Σ_{T⊆S} c_{S,T}/x_T``,
    ``c_{S,T} = Π_{j∈T}(1−1/n_j) Π_{j∈S∖T}(1/n_j) Π_{j∉S} n_j``.
    Lower (MATH.md §2.2): γ_F with q uniform, ``||W||_tr / √(N k)``; γ₂ with q uniform and
    p = ω_S / rows_S on block S's rows (split evenly over repeated blocks),
    ``Σ_T dim_T √(Σ_{S⊇T} p_S Π_{j∉S} n_j / N) / √(Σ_S ω_S)``.
    """
    failures: list[str] = []
    sizes = family.sizes
    d, N, k = family.d, family.N, family.k
    if sol.norm not in MARGINAL_NORMS:
        return math.inf, 0.0, math.inf, False, (f"unknown norm {sol.norm!r}",)
    if tuple(sol.x.sizes) != sizes:
        return math.inf, 0.0, math.inf, False, (
            f"coefficients are for sizes {sol.x.sizes}, the workload has {sizes}",)
    if N.bit_length() > MAX_LOG2_N:
        return math.inf, 0.0, math.inf, False, (f"N ≈ 2^{N.bit_length()} is beyond the certified range",)

    # --- the coefficients -----------------------------------------------------------
    xmap: dict[int, float] = {}
    for T, v in zip(sol.x.subsets, sol.x.values):
        v = float(v)
        if any(not 0 <= j < d for j in T) or tuple(sorted(set(T))) != tuple(T):
            failures.append(f"coefficient subset {T} is not a sorted set of attributes < {d}")
            continue
        if not (math.isfinite(v) and v >= 0):
            failures.append(f"coefficient x_{T} = {v!r} is not finite and non-negative")
            continue
        xmap[mask_of(T)] = v
    if failures:
        return math.inf, 0.0, math.inf, False, tuple(failures)

    support = closure(family)  # T with λ_T > 0
    uniq = family.unique()
    all_masks = sorted(set(support) | set(xmap))
    idx = {t: i for i, t in enumerate(all_masks)}
    P = _attr_products(sizes, all_masks)
    Sp = _attr_products(sizes, [m for m, _ in uniq])
    mult = np.array([c for _, c in uniq], dtype=np.float64)

    missing = [subset_of(t) for t in support if not xmap.get(t, 0.0) > 0]
    if missing:
        failures.append(f"x_T = 0 on {len(missing)} subset(s) with λ_T > 0 (e.g. T = {missing[0]}): "
                        "R·A ≠ W")
        return math.inf, 0.0, math.inf, False, tuple(failures)

    B, m = len(uniq), len(all_masks)
    terms = 2 * B + 2 * m + 4 * d + 20
    up = 1.0 + 4.0 * (terms + 2) * _U
    down = 1.0 - 4.0 * (terms + 2) * _U

    # containment pairs (S ⊇ T, T in the support)
    s_idx, t_idx = [], []
    for s, (mask, _) in enumerate(uniq):
        for t in submasks(family.effective_mask(mask)):
            s_idx.append(s)
            t_idx.append(idx[t])
    s_idx_a, t_idx_a = np.array(s_idx), np.array(t_idx)
    sup = np.array([idx[t] for t in support])

    xv = np.array([xmap.get(t, 0.0) for t in all_masks])
    frac = P["frac"]
    diag = float(np.sum(xv * frac)) + m * _TINY  # ||A||²_{1→2}
    Nf = float(N)
    sqrtN_over_k = math.sqrt(N / k)

    with np.errstate(over="ignore", divide="ignore", under="ignore", invalid="ignore"):
        if sol.norm == "gamma_f":
            # λ_T / N = Σ_{S⊇T} mult_S Π_{j∈S} 1/n_j
            lam_N = np.zeros(m)
            np.add.at(lam_N, t_idx_a, mult[s_idx_a] * Sp["inv"][s_idx_a])
            s1 = float(np.sum(lam_N[sup] * frac[sup] / xv[sup])) + m * _TINY  # ||R||_F² / N²
            upper = math.sqrt(Nf) * sqrtN_over_k * math.sqrt(s1 * diag) * up
            lam_low = np.maximum(lam_N[sup] - B * _TINY, 0.0)
            lower = math.sqrt(Nf) * sqrtN_over_k * float(np.sum(frac[sup] * np.sqrt(lam_low))) * down
        else:
            if sol.weights is None or sol.weight_subsets is None:
                return math.inf, 0.0, math.inf, False, ("a γ₂ solution needs block weights",)
            wmap: dict[int, float] = {}
            for S, v in zip(sol.weight_subsets, sol.weights):
                v = float(v)
                if not (math.isfinite(v) and v >= 0):
                    failures.append(f"block weight ω_{tuple(S)} = {v!r} is not finite and non-negative")
                wmap[mask_of(S)] = wmap.get(mask_of(S), 0.0) + v
            known = {mk for mk, _ in uniq}
            stray = [subset_of(mk) for mk in wmap if mk not in known]
            if stray:
                failures.append(f"block weights on subsets that are not blocks: {stray[:3]}")
            if failures:
                return math.inf, 0.0, math.inf, False, tuple(failures)
            omega = np.array([wmap.get(mk, 0.0) for mk, _ in uniq])
            if not float(np.sum(omega)) > 0:
                return math.inf, 0.0, math.inf, False, ("block weights are all zero",)
            # upper: c_{S,T} = a_T · (inv_S / inv_T) · out_S
            c = P["a"][t_idx_a] * (Sp["inv"][s_idx_a] / P["inv"][t_idx_a]) * Sp["out"][s_idx_a]
            r = np.zeros(B)
            np.add.at(r, s_idx_a, c / xv[t_idx_a])
            r_max = float(np.max(r)) + m * _TINY  # ||R||²_{2→∞}
            upper = math.sqrt(r_max * diag) * up
            # lower: eig_T = Σ_{S⊇T} p_S Π_{j∉S} n_j / N with p_S = ω_S / rows_S per row
            eig = np.zeros(m)
            np.add.at(eig, t_idx_a, omega[s_idx_a] * Sp["inv"][s_idx_a] ** 2)
            eig_low = np.maximum(eig[sup] - B * _TINY, 0.0)
            trace = Nf * float(np.sum(frac[sup] * np.sqrt(eig_low)))
            lower = trace / math.sqrt(float(np.sum(omega)) * up) * down

    if not math.isfinite(upper):
        failures.append(f"upper bound {upper!r} is not finite")
    if not (math.isfinite(lower) and lower > 0):
        failures.append(f"lower bound {lower!r} is not positive and finite")
    elif lower > upper:
        failures.append(f"lower bound {lower:.15g} exceeds upper bound {upper:.15g}: one is wrong")
    gap = relative_gap(upper, lower) if math.isfinite(upper) else math.inf
    return upper, lower, gap, not failures, tuple(failures)
