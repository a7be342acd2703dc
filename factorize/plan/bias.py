"""The reconstruction's bias and a bound on the number of records, from the release alone.

A central plan releases ``ŷ = R·ỹ`` with ``ỹ = Ã h + γ(r + Y)`` (``privacy.lattice``: Ã the
measured strategy, |r_i| ≤ ½ the rounding, Y the noise). Its error on query i is

    ŷ_i − (Wh)_i = −((W − RÃ)h)_i + γ(R r)_i + γ(R Y)_i ,

a bias ``|((W − RÃ)h)_i| ≤ β·n`` with ``β ≥ max_ij |(W − RÃ)_ij|`` (the residual, certified by
:func:`residual_bound`; at most η plus the tolerance for an approximate-γ₂ plan) and n = Σh,
the rounding ``≤ (γ/2)‖r_i‖₁`` and the noise. Under add/remove neighbours n is private, so the
interval cannot use it. Instead the executor bounds it from the released values
(post-processing, no privacy cost): for weights ``b ≥ 0`` with ``Wᵀb ≥ μ·1`` (μ > 0: the
weighted queries count every record at least μ times),

    μ·n ≤ bᵀWh = bᵀŷ + bᵀ(W − RÃ)h − γ bᵀR(r + Y)  ⇒  n ≤ (bᵀŷ + (γ/2)‖Rᵀb‖₁ + |γ(Rᵀb)ᵀY|) / (μ − β‖b‖₁),

and ``|γ(Rᵀb)ᵀY| ≤ t`` except with probability α₁ (subgaussian tail for the discrete or
continuous Gaussian, ``t = σ‖Rᵀb‖₂·√(2 ln(2/α₁))``; Chebyshev for other noise,
``t = √(v/α₁)·‖Rᵀb‖₂``). The plan stores b (per Kronecker factor of W, found by a small
linear program at planning time, or all ones for a non-negative workload); the verifier
recomputes μ with a rounding allowance and requires μ > β‖b‖₁. Without such weights (e.g. a
parity workload) the only bound is the executor's record cap n < 2⁵³ (``privacy.lattice``).
The intervals then hold with probability ≥ 1 − α₁ − α₂ (Bonferroni), α₁ = 10⁻³, α₂ = 0.049.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from factorize.kron import kron_rmatvec, kron_vector
from factorize.numerics import U, gamma, round_down, round_up

from .errors import PlanError

#: Failure probability spent on the n bound; the noise intervals get 0.05 − ALPHA_N.
ALPHA_N = 1e-3
#: n ≤ N_CAP always (the exact measurement refuses 2^53 records or more).
N_CAP = 2.0 ** 53
#: Dense linear programs for the weights only up to this many entries per factor.
LP_MAX_ENTRIES = 4_000_000
METHODS = ("weights", "ones", "cap")


def tail_multiplier(family: str) -> float:
    """t / (√v·‖c‖₂) at failure probability ALPHA_N (module docstring)."""
    if family == "gaussian":
        return math.sqrt(2.0 * math.log(2.0 / ALPHA_N))
    return math.sqrt(1.0 / ALPHA_N)


# ---------------------------------------------------------------------------------------
# residual


def residual_bound(W_factors: Sequence[np.ndarray], R_factors: Sequence[np.ndarray],
                   A_factors: Sequence[np.ndarray]) -> float:
    """A certified ``β ≥ max_ij |(⊗W_j − ⊗R_j ⊗Ã_j)_ij|`` (Ã_j the measured factors given).

    Per factor, ``E_j = W_j − fl(R_j Ã_j)`` is off the exact residual by at most
    ``γ_{m_j}·(|R_j||Ã_j|)`` entrywise; the Kronecker telescoping of
    ``factorization.kron_residual_max`` then bounds the product's residual by
    ``Σ_j Π_{i<j} ‖R_iÃ_i‖_max · ‖E_j‖_max · Π_{i>j} ‖W_i‖_max`` (every term rounded up)."""
    res_max: list[float] = []
    approx_max: list[float] = []
    w_max: list[float] = []
    # a forged plan's entries may be huge: an overflow gives β = inf, which every check refuses
    # (the safe direction), so it is allowed here without a warning
    with np.errstate(over="ignore", invalid="ignore"):
        for W, R, A in zip(W_factors, R_factors, A_factors, strict=True):
            prod = R @ A
            slack = gamma(max(R.shape[1], 1)) * (np.abs(R) @ np.abs(A))
            res_max.append(round_up(float(np.max(np.abs(W - prod) + slack)), 3))
            approx_max.append(round_up(float(np.max(np.abs(prod) + slack)), 2))
            w_max.append(float(np.max(np.abs(W))))
    total = 0.0
    d = len(res_max)
    for j in range(d):
        term = res_max[j]
        for i in range(j):
            term *= approx_max[i]
        for i in range(j + 1, d):
            term *= w_max[i]
        total += term
    return round_up(total, 2 * d + 1)


# ---------------------------------------------------------------------------------------
# weights b with Wᵀb ≥ μ·1


def find_weights(W_leaves: Sequence[np.ndarray] | None, W: Any) -> tuple[str, list[np.ndarray]]:
    """Planning time: weights b_j ≥ 0 with ``W_jᵀ b_j ≥ 1`` minimising Σb_j, per Kronecker
    factor (scipy's HiGHS linear program), or ``("ones", [])`` when W is non-negative with
    no empty column, else ``("cap", [])``."""
    if W_leaves is not None and all(L.size <= LP_MAX_ENTRIES for L in W_leaves):
        out = []
        for L in W_leaves:
            b = lp_weights(L)
            if b is None:
                break
            out.append(b)
        else:
            return "weights", out
    if _nonneg_covering(W):
        return "ones", []
    return "cap", []


def lp_weights(L: np.ndarray) -> np.ndarray | None:
    from scipy.optimize import linprog

    k, N = L.shape
    res = linprog(np.ones(k), A_ub=-L.T, b_ub=-np.ones(N), bounds=(0, None), method="highs")
    if res.status != 0 or res.x is None:
        return None
    b = np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)
    b[b < 1e-12 * max(float(b.max()), 1e-300)] = 0.0
    v = L.T @ b
    if not float(v.min()) > 0.5:
        return None
    return b


def _nonneg_covering(W: Any) -> bool:
    leaves = _all_leaves(W)
    if leaves is None or any(float(np.min(L)) < 0 for L in leaves):
        return False
    try:
        colsum = W.rmatvec(np.ones(W.shape[0]))
    except (MemoryError, ValueError):
        return False
    return bool(float(np.min(colsum)) > 0)


def _all_leaves(W: Any) -> list[np.ndarray] | None:
    """Dense matrices of every leaf of a Kronecker/union structure (None when a leaf is too
    large to densify)."""
    out: list[np.ndarray] = []
    stack = [W]
    while stack:
        w = stack.pop()
        parts = getattr(w, "factors", None) or getattr(w, "blocks", None)
        if parts:
            stack.extend(parts)
            continue
        if w.shape[0] * w.shape[1] > LP_MAX_ENTRIES:
            return None
        out.append(w.dense())
    return out


def normalized_weights(weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each b_j scaled by a power of two to ``max b_j ∈ [½, 1)`` (exact; the n bound does not
    depend on the scale of b, and this keeps every product with b finite whatever a plan
    states)."""
    from factorize.numerics import binade

    out = []
    for b in weights:
        b = np.asarray(b, dtype=np.float64)
        if b.ndim != 1 or not np.all(np.isfinite(b)) or (b.size and float(b.min()) < 0) or not np.any(b):
            raise PlanError("the n-bound weights must be finite, non-negative and not all zero")
        out.append(np.ldexp(b, -binade(b)))
    return out


def certified_mu(method: str, weights: Sequence[np.ndarray], W: Any,
                 W_leaves: Sequence[np.ndarray] | None) -> tuple[float, float, float]:
    """Verification: ``(μ, ‖b‖₁, ‖b‖₂-scale)`` with μ a certified lower bound on
    ``min_x (Wᵀb)_x``, for the normalized weights (:func:`normalized_weights`, the ones the
    executor uses). ``weights``: one b_j per Kronecker leaf (method "weights"), or none."""
    if method == "weights":
        if W_leaves is None or len(weights) != len(W_leaves):
            raise PlanError("the n-bound weights do not match the workload's Kronecker factors")
        weights = normalized_weights(weights)
        mu, l1 = 1.0, 1.0
        for b, L in zip(weights, W_leaves, strict=True):
            if b.shape != (L.shape[0],):
                raise PlanError("the n-bound weights must be one per query")
            v = L.T @ b
            slack = gamma(max(L.shape[0], 1)) * (np.abs(L).T @ b)
            low = float(np.min(v - slack))
            if not low > 0:
                raise PlanError("the n-bound weights do not count every record (Wᵀb ≥ μ > 0 fails)")
            mu *= round_down(low, 2)
            l1 *= round_up(float(b.sum()) * (1 + gamma(b.size)), 1)
        return round_down(mu, len(weights)), round_up(l1, len(weights)), 0.0
    if method == "ones":
        if not _nonneg_covering(W):
            raise PlanError("method 'ones' needs a non-negative workload with no empty column")
        k = W.shape[0]
        colsum = W.rmatvec(np.ones(k))
        low = float(np.min(colsum)) * (1.0 - 2.0 * gamma(max(k, 1)))
        return round_down(low, 2), float(k), 0.0
    if method == "cap":
        return 0.0, 0.0, 0.0
    raise PlanError(f"unknown n-bound method {method!r}")




def n_upper(method: str, weights: Sequence[np.ndarray], estimates: np.ndarray,
            R_factors: Sequence[np.ndarray], mu: float, beta: float, b_l1: float,
            sd_noise: float, family: str, grid: float | None) -> float:
    """Release time: the bound n⁺ of the module docstring (``N_CAP`` without weights)."""
    try:
        return _n_upper(method, weights, estimates, R_factors, mu, beta, b_l1, sd_noise, family, grid)
    except (ArithmeticError, ValueError):  # never raises after the charge: the cap holds always
        return N_CAP


def _n_upper(method: str, weights: Sequence[np.ndarray], estimates: np.ndarray,
             R_factors: Sequence[np.ndarray], mu: float, beta: float, b_l1: float,
             sd_noise: float, family: str, grid: float | None) -> float:
    if method == "cap" or not mu > beta * b_l1:
        return N_CAP
    k = estimates.size
    b = np.ones(k) if method == "ones" else kron_vector(normalized_weights(weights))
    c = kron_rmatvec([np.asarray(R) for R in R_factors], b)
    return n_upper_from(b, c, estimates, mu, beta, b_l1, sd_noise, family, grid)


def n_upper_from(b: np.ndarray, c: np.ndarray, estimates: np.ndarray, mu: float, beta: float,
                 b_l1: float, sd_noise: float, family: str, grid: float | None,
                 c_err: np.ndarray | None = None) -> float:
    """``n⁺`` from the weights b over the released answers and ``c = Rᵀb`` over the noise
    coordinates it reads (module docstring); ``c_err``: an entrywise bound on c's float error
    beyond the relative ``γ`` allowance (a sum of several terms)."""
    if not mu > beta * b_l1:
        return N_CAP
    k = estimates.size
    dot = float(b @ estimates) + gamma(k) * float(np.abs(b) @ np.abs(estimates))
    c2 = float(np.linalg.norm(c)) * (1 + gamma(c.size + 2))
    c1 = float(np.abs(c).sum()) * (1 + gamma(c.size + 2))
    if c_err is not None:
        c2 = round_up(c2 + float(np.linalg.norm(c_err)) * (1 + gamma(c.size + 2)), 2)
        c1 = round_up(c1 + float(np.sum(c_err)) * (1 + gamma(c.size + 2)), 2)
    tail = tail_multiplier(family) * sd_noise * c2
    rounding = 0.5 * (grid or 0.0) * c1
    num = round_up(max(dot + rounding + tail, 0.0), 6)
    den = round_down(mu - beta * b_l1 * (1 + 4 * U), 2)
    if not den > 0:
        return N_CAP
    return min(N_CAP, round_up(num / den, 1))
