"""Certificates: a primal factorization (upper bound) plus a dual witness (lower bound).

A certificate for norm ν ∈ {γ_F, γ₂, γ₂(·; η)} of a workload W states

    lower ≤ ν(W) ≤ upper,

and ``verify()`` recomputes both numbers from the stored matrices alone — column/row
norms, one SVD per factor or one symmetric eigenvalue problem, no solver — together
with ``||W − R·A||_max`` (docs/math.md §4.4).

Lower bounds (dual witnesses), all homogeneous so any non-negative weights are valid:

* γ_F (docs/math.md §4.1): for q ≥ 0, q ≠ 0,
  ``γ_F(W) ≥ ||W diag(√q)||_tr / sqrt(k · Σq)``.
* γ₂ (Lee, Shraibman & Špalek 2008; docs/math.md §4.2): for p, q ≥ 0,
  ``γ₂(W) ≥ ||diag(√p) W diag(√q)||_tr / sqrt(Σp · Σq)``.
* approximate γ₂ with entrywise radius η (Edmonds, Nikolov & Ullman 2020, Lemma 12 with the radius made
  explicit, docs/math.md §4.3): for U ≠ 0 and d with ``diag(d) − ½[[0, U], [Uᵀ, 0]] ⪰ 0``,
  ``γ₂(W; η) ≥ (⟨W, U⟩ − η ||U||_1) / Σd``  (Σd ≥ γ₂*(U) by the Grothendieck SDP).
  Both bounds are stated for the effective radius ``η_eff = max(η, ||W − RA||_max)``,
  which ``verify`` requires to be within η + residual_tol.

For Kronecker workloads ``W = ⊗W_i`` the weights are Kronecker products ``q = ⊗q_i``
(and ``p = ⊗p_i``); trace norms, Σq and k are multiplicative, so the bound is the
product of the factors' bounds (docs/math.md §5.1).

Every spectral quantity is taken with a rounding allowance (``factorize.norms``), so the
reported interval holds for the exact matrices, not only in floating point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from factorize import norms
from factorize.choices import NORMS, Norm
from factorize.factorization import Factorization, kron_residual_max
from factorize.numerics import relative_gap
from factorize.planner.errors import PlannerError
from workloads.structured import kron_leaves

#: Default tolerance on ``||W − R·A||_max`` relative to ``||W||_max``.
DEFAULT_RESIDUAL_TOL = 1e-9


@dataclass(frozen=True)
class GammaFWitness:
    """Column weights ``q = ⊗ q_factors`` (one non-negative vector per Kronecker factor)."""

    q: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Gamma2Witness:
    """Row weights ``p = ⊗ p_factors`` and column weights ``q = ⊗ q_factors``."""

    p: tuple[np.ndarray, ...]
    q: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class ApproxGamma2Witness:
    """A dual matrix U (k×N) and a diagonal d (k+N) bounding γ₂*(U) ≤ Σd."""

    U: np.ndarray
    d: np.ndarray


Witness = GammaFWitness | Gamma2Witness | ApproxGamma2Witness


@dataclass(frozen=True)
class Certificate:
    """The primal factorization and the dual witness for one norm of one workload."""

    norm: Norm
    factorization: Factorization
    witness: Witness
    eta: float | None = None

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise PlannerError(f"unknown norm {self.norm!r}; expected one of {NORMS}")
        expected = {"gamma_f": GammaFWitness, "gamma_2": Gamma2Witness,
                    "approx_gamma_2": ApproxGamma2Witness}[self.norm]
        if not isinstance(self.witness, expected):
            raise PlannerError(f"a {self.norm} certificate needs a {expected.__name__}")
        if (self.norm == "approx_gamma_2") != (self.eta is not None):
            raise PlannerError("eta is required for approx_gamma_2 and only for it")
        if self.eta is not None and not (math.isfinite(self.eta) and self.eta >= 0):
            raise PlannerError(f"eta must be a finite number ≥ 0, got {self.eta}")


@dataclass(frozen=True)
class Verification:
    """What ``verify`` recomputed, and whether every check passed."""

    norm: Norm
    passed: bool
    upper: float
    lower: float
    gap: float  # upper / lower − 1 (inf when lower ≤ 0)
    residual: float  # ||W − R·A||_max, or an upper bound on it for Kronecker factors
    residual_limit: float
    failures: tuple[str, ...] = ()
    details: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        text = (f"{status} {self.norm}: lower {self.lower:.12g} ≤ value ≤ upper "
                f"{self.upper:.12g} (relative gap {self.gap:.3g}); "
                f"||W − RA||_max = {self.residual:.3g} (limit {self.residual_limit:.3g})")
        if self.failures:
            text += "; failures: " + "; ".join(self.failures)
        return text


# ---------------------------------------------------------------------------------
# lower bounds from witnesses (pure functions of dense factor matrices)
# ---------------------------------------------------------------------------------
def _sum_factor(n: int) -> float:
    """Deflation covering the rounding of a floating-point sum of n terms."""
    return 1.0 - 4.0 * (n + 2) * norms.UNIT_ROUNDOFF


def gamma_f_lower(W: np.ndarray, q: np.ndarray) -> float:
    """``||W diag(√q)||_tr / sqrt(k Σq)``, certified against rounding (docs/math.md §4.1)."""
    _check_weights(q, W.shape[1], "q")
    s = float(np.sum(q))
    tr = norms.trace_norm_lower_bound(W * np.sqrt(q)[None, :])
    return tr / math.sqrt(W.shape[0] * s) * _sum_factor(W.shape[1])


def gamma_f_lower_structured(workload, q: np.ndarray) -> float | None:
    """:func:`gamma_f_lower` of a stack of Kronecker products without an SVD of the k×N
    matrix: ``‖W diag(√q)‖_tr`` from QRs of the small factors
    (``norms.kron_stack_trace_norm_lower_bound``); None when ``workload`` has no such
    structure whose dense matrix is its exact Kronecker products, or when the reduction does
    not pay (the caller then uses :func:`gamma_f_lower` on the dense matrix).

    The value agrees with :func:`gamma_f_lower` of ``workload.dense()`` up to rounding of the
    singular values (measured ≤ 2e-15 relative), so both may re-check the same certificate.
    """
    blocks = stacked_kron_blocks(workload)
    if blocks is None:
        return None
    k, N = workload.shape
    _check_weights(q, N, "q")
    tr = norms.kron_stack_trace_norm_lower_bound(blocks, np.sqrt(q))
    if tr is None:
        return None
    return tr / math.sqrt(k * float(np.sum(q))) * _sum_factor(N)


def stacked_kron_blocks(workload) -> list[list[np.ndarray]] | None:
    """``workload`` as ``[[F_11, F_12, …], [F_21, …], …]`` with ``W = [⊗_j F_1j; ⊗_j F_2j; …]``
    (a Kronecker product, or a stack of blocks of which at least one is a Kronecker product;
    any other block is its own single factor), when every Kronecker product is exact in
    binary64 — each factor is an integer matrix times a power of two and the integer parts'
    bits add up to at most 53 per product — so that ``workload.dense()`` *is* the product of
    the dense factors; None otherwise."""
    parts: list = []
    stack = [workload]
    while stack:
        w = stack.pop()
        sub = getattr(w, "blocks", None)
        if sub is not None and not hasattr(w, "factors"):
            stack.extend(reversed(tuple(sub)))
        else:
            parts.append(w)
    if not any(getattr(p, "factors", None) is not None for p in parts):
        return None  # no Kronecker product to exploit
    out = []
    for part in parts:
        factors = [np.asarray(f.dense(), dtype=np.float64) for f in kron_leaves(part)]
        if len(factors) > 1 and sum(_dyadic_bits(F) for F in factors) > 53:
            return None
        out.append(factors)
    return out


def _dyadic_bits(F: np.ndarray) -> int:
    """Bits of the integer matrix ``F·2^t`` (smallest t ≥ 0 making it integral, up to 64);
    a number above 53 when there is none (a non-dyadic or non-finite entry)."""
    if F.size == 0 or not np.all(np.isfinite(F)):
        return 99
    big = float(np.max(np.abs(F)))
    if big == 0.0:
        return 0
    for t in range(65):
        G = np.ldexp(F, t)
        if np.all(np.round(G) == G):
            return max(1, math.ceil(math.log2(float(np.max(np.abs(G))) + 1.0)))
    return 99


def gamma_2_lower(W: np.ndarray, p: np.ndarray, q: np.ndarray) -> float:
    """``||diag(√p) W diag(√q)||_tr / sqrt(Σp Σq)``, certified against rounding."""
    _check_weights(p, W.shape[0], "p")
    _check_weights(q, W.shape[1], "q")
    tr = norms.trace_norm_lower_bound(np.sqrt(p)[:, None] * W * np.sqrt(q)[None, :])
    return tr / math.sqrt(float(np.sum(p)) * float(np.sum(q))) * _sum_factor(sum(W.shape))


def grothendieck_psd_margin(U: np.ndarray, d: np.ndarray) -> float:
    """Certified ``λ_min(diag(d) − ½ M_U)`` with ``M_U = [[0, U], [Uᵀ, 0]]`` (docs/math.md §4.3)."""
    k, N = U.shape
    S = np.diag(d.astype(np.float64))
    S[:k, k:] -= 0.5 * U
    S[k:, :k] -= 0.5 * U.T
    return norms.certified_psd_margin(S)


def approx_gamma_2_lower(W: np.ndarray, U: np.ndarray, d: np.ndarray, eta: float) -> float:
    """``(⟨W, U⟩ − η ||U||_1) / Σd`` (Edmonds, Nikolov & Ullman 2020, Lemma 12, radius η explicit), rounding-safe.

    Valid only when ``diag(d) − ½ M_U ⪰ 0``; ``verify`` checks that separately.
    """
    if U.shape != W.shape:
        raise PlannerError(f"witness U has shape {U.shape}, the workload {W.shape}")
    n_terms = W.size
    inner = float(np.sum(W * U))
    l1 = float(np.sum(np.abs(U)))
    slack = 4.0 * (n_terms + 2) * norms.UNIT_ROUNDOFF * (float(np.sum(np.abs(W * U))) + eta * l1)
    beta = float(np.sum(d)) / _sum_factor(d.size)
    if beta <= 0:
        return 0.0
    return (inner - eta * l1 - slack) / beta


def _check_weights(w: np.ndarray, n: int, name: str) -> None:
    if w.shape != (n,):
        raise PlannerError(f"witness {name} has shape {w.shape}, expected ({n},)")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise PlannerError(f"witness {name} must be finite, non-negative and not all zero")


# ---------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------
def verify(cert: Certificate, workload, residual_tol: float = DEFAULT_RESIDUAL_TOL, *,
           dense: np.ndarray | None = None) -> Verification:
    """Recompute the certificate's bounds and residual from its matrices alone.

    ``workload`` is a ``workloads.Workload`` (Kronecker structure is used factor by
    factor when the factorization has matching factors) or a dense array.
    Checks: shapes agree; ``||W − RA||_max ≤ residual_tol · ||W||_max`` (plus η
    for approximate γ₂); the witness is valid (non-negative weights; for approximate γ₂
    the certified λ_min of ``diag(d) − ½ M_U`` is ≥ 0); the lower bound is positive and
    not above the upper bound.

    ``dense``: the caller's ``workload.dense()``, when it has one (not computed again). The
    γ_F lower bound of a dense certificate for a stack of Kronecker products is taken from
    the structure (:func:`gamma_f_lower_structured`: QRs of the small factors, no SVD of the
    k×N matrix).
    """
    fact = cert.factorization
    failures: list[str] = []
    if dense is not None and not isinstance(workload, np.ndarray) and not fact.is_kron:
        if dense.shape != tuple(workload.shape):
            raise PlannerError(f"dense has shape {dense.shape}, the workload {workload.shape}")
        W_factors = [np.asarray(dense, dtype=np.float64)]
    else:
        W_factors = _workload_factors(workload, fact)
    details: dict[str, float] = {}

    shape = (math.prod(W.shape[0] for W in W_factors), math.prod(W.shape[1] for W in W_factors))
    if fact.shape != shape:
        raise PlannerError(f"factorization has shape {fact.shape} but the workload {shape}")

    if len(W_factors) == 1:
        W0 = W_factors[0]
        residual = float(np.max(np.abs(W0 - fact.R_factors[0] @ fact.A_factors[0])))
    else:
        residual = kron_residual_max(W_factors, fact)
    w_max = math.prod(float(np.max(np.abs(W))) for W in W_factors)
    limit = residual_tol * w_max + (cert.eta or 0.0)
    if not residual <= limit:
        failures.append(f"||W − RA||_max = {residual:.3g} exceeds {limit:.3g}")

    upper = fact.value_upper_bound(cert.norm)
    w = cert.witness
    if isinstance(w, GammaFWitness):
        _match_factor_count(w.q, W_factors, "q")
        structured = (gamma_f_lower_structured(workload, w.q[0])
                      if len(W_factors) == 1 and not isinstance(workload, np.ndarray) else None)
        lower = (structured if structured is not None
                 else math.prod(gamma_f_lower(W, q) for W, q in zip(W_factors, w.q, strict=True)))
    elif isinstance(w, Gamma2Witness):
        _match_factor_count(w.q, W_factors, "q")
        _match_factor_count(w.p, W_factors, "p")
        lower = math.prod(gamma_2_lower(W, p, q) for W, p, q in zip(W_factors, w.p, w.q, strict=True))
    else:
        if len(W_factors) != 1:
            raise PlannerError("approximate γ₂ certificates are for dense workloads")
        W0 = W_factors[0]
        if w.d.shape != (sum(W0.shape),) or not np.all(np.isfinite(w.d)) or not np.all(np.isfinite(w.U)):
            raise PlannerError("approximate γ₂ witness: d must have length k+N and all entries finite")
        margin = grothendieck_psd_margin(w.U, w.d)
        details["grothendieck_psd_margin"] = margin
        if margin < 0:
            failures.append(f"diag(d) − ½M_U is not certified PSD (λ_min margin {margin:.3g})")
        # R·A is within η only up to rounding / solver feasibility; the upper bound is then
        # one for γ₂(W; residual), so the lower bound is taken at the same effective radius
        # (γ₂(W; ·) is non-increasing): both bound γ₂(W; η_eff), η ≤ η_eff ≤ η + tolerance.
        if cert.eta is None:
            raise PlannerError("an approximate γ₂ certificate must state its radius η")
        eta_eff = max(float(cert.eta), residual)
        details["eta_effective"] = eta_eff
        lower = approx_gamma_2_lower(W0, w.U, w.d, eta_eff)

    if not lower > 0:
        failures.append(f"lower bound {lower:.3g} is not positive")
    if lower > upper:
        failures.append(f"lower bound {lower:.12g} exceeds upper bound {upper:.12g}: "
                        "one of the two is wrong")
    return Verification(norm=cert.norm, passed=not failures, upper=upper, lower=lower,
                        gap=relative_gap(upper, lower), residual=residual, residual_limit=limit,
                        failures=tuple(failures), details=details)


def _match_factor_count(ws: tuple[np.ndarray, ...], W_factors: list[np.ndarray], name: str) -> None:
    if len(ws) != len(W_factors):
        raise PlannerError(f"witness {name} has {len(ws)} Kronecker factors, the workload {len(W_factors)}")


def _workload_factors(workload, fact: Factorization) -> list[np.ndarray]:
    """Dense workload factors aligned with the factorization's Kronecker factors."""
    if isinstance(workload, np.ndarray):
        return [np.asarray(workload, dtype=np.float64)]
    factors = kron_leaves(workload)
    if fact.is_kron:
        if len(factors) != len(fact.R_factors):
            raise PlannerError(
                f"a factorization with {len(fact.R_factors)} Kronecker factors needs a Kronecker "
                "workload with as many factors")
        return [f.dense() for f in factors]
    return [workload.dense()]
