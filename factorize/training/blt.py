"""Buffered linear Toeplitz (BLT) strategies for long horizons, optimised without n × n
matrices (Dvijotham, McMahan, Pillutla, Steinke & Thakurta, "Efficient and Near-Optimal Noise
Generation for Streaming Differential Privacy", 2024, §3–§5).

A BLT with b buffers is a lower-triangular Toeplitz C whose series is rational of degree b
with ``c(0) = 1``:

    c(x) = 1 + Σ_i ω_i x/(1 − θ_i x) = Π_i (1 − θ̂_i x)/(1 − θ_i x),

θ the decays of C's buffers, θ̂ those of C⁻¹ (whose series is the reciprocal, again a BLT:
``r_k = Σ_j ω̂_j θ̂_j^{k−1}``). The optimiser works on the pair (θ, θ̂) (the "buf_decay_pair"
parametrisation of Dvijotham et al.), with the variables ``log(1 − θ)``, ``log(1 − θ̂)`` (so
θ, θ̂ < 1); both residue vectors follow in closed form,

    ω_i = Π_j (θ_i − θ̂_j)/Π_{j≠i}(θ_i − θ_j),    ω̂_j = Π_i (θ̂_j − θ_i)/Π_{i≠j}(θ̂_j − θ̂_i),

and both columns are sums of b powers (repeated multiplication; accurate where a cascade of
first-order filters with nearly cancelling poles and zeros near 1 loses ~1e-8 of the error at
n = 10⁵). Exact gradients in O(n·b): with ``g_c = ∂S/∂c``, ``g_r = ∂E/∂r``,
``∂/∂ω_i = Σ_k g_c[k] θ_i^{k−1}``, ``∂/∂θ_i|_ω = ω_i Σ_k g_c[k](k−1)θ_i^{k−2}`` (likewise for
r), then the residues' log-derivatives (``∂ log ω_i/∂θ̂_j = −1/(θ_i − θ̂_j)``,
``∂ log ω_i/∂θ_l = 1/(θ_i − θ_l)`` for l ≠ i, ``∂ log ω_i/∂θ_i = Σ_j 1/(θ_i − θ̂_j) −
Σ_{j≠i} 1/(θ_i − θ_j)``, and the mirror images for ω̂). The objective ``E(r)·S(c)`` — E the
error (``toeplitz.error_and_gradient``), S the smooth sensitivity²
(``toeplitz.pattern_value_and_gradient``) — is minimised in logarithm by L-BFGS-B.

Start: decays interlaced geometrically on [1/n, 1] in ``1 − θ``, which makes c(x) a rational
approximation of ``(1 − x)^{−1/2}``, the square-root factorization's series. The stored record
is ``(θ, ω)`` with ``ω_i = Π_j (θ_i − θ̂_j)/Π_{j≠i}(θ_i − θ_j)`` (the residues of c(x)); the
certified sensitivity and the noise stream read only that record.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from factorize.errors import SolverError
from factorize.numerics import integer
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .banded import LongOptimum
from .toeplitz import (
    BLT,
    Reduction,
    ToeplitzWorkload,
    certified_sensitivity,
    error_and_gradient,
    pattern_value_and_gradient,
    strategy_error,
)

__all__ = ["blt_from_pair", "blt_objective", "initial_parameters", "optimize_blt"]

#: Bounds on ``log(1 − θ)``: θ ∈ [1 − 2·e^{−0.0005}…, 1 − e^{−34}] ⊂ (−1, 1).
_LOG_LO, _LOG_HI = -34.0, math.log(1.999)


def blt_from_pair(theta: np.ndarray, theta_hat: np.ndarray, n: int) -> BLT:
    """The BLT record ``(θ, ω)`` of ``c(x) = Π (1 − θ̂_i x)/(1 − θ_i x)`` (distinct θ needed)."""
    th = np.asarray(theta, dtype=np.float64)
    thh = np.asarray(theta_hat, dtype=np.float64)
    if np.unique(th).size != th.size:
        raise SolverError("the BLT's decays coincide; its residues are undefined")
    return BLT(th, _residues(th, thh), n)


def _residues(poles: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """``Π_j (p_i − z_j)/Π_{j≠i}(p_i − p_j)``: the residues of ``Π(1 − z x)/(1 − p x)``."""
    diff = poles[:, None] - poles[None, :]
    np.fill_diagonal(diff, 1.0)
    return np.asarray(np.prod(poles[:, None] - zeros[None, :], axis=1) / np.prod(diff, axis=1))


def _powers(decay: np.ndarray, n: int) -> np.ndarray:
    """``decay_i^{k}``, k = 0 … n − 2 (rows), by repeated multiplication."""
    P = np.ones((decay.size, max(n - 1, 0)))
    if n > 2:
        P[:, 1:] = np.cumprod(np.repeat(decay[:, None], n - 2, axis=1), axis=1)
    return P


def _series(omega: np.ndarray, P: np.ndarray) -> np.ndarray:
    out = np.empty(P.shape[1] + 1)
    out[0] = 1.0
    out[1:] = omega @ P
    return out


def _residue_jacobian(poles: np.ndarray, zeros: np.ndarray, res: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``∂res_i/∂poles_l`` and ``∂res_i/∂zeros_l`` of :func:`_residues` (log-derivatives)."""
    dp = poles[:, None] - poles[None, :]
    np.fill_diagonal(dp, np.inf)
    dz = poles[:, None] - zeros[None, :]
    d_poles = res[:, None] / dp                          # l ≠ i: +res_i/(p_i − p_l)
    np.fill_diagonal(d_poles, res * ((1.0 / dz).sum(axis=1) - (1.0 / dp).sum(axis=1)))
    d_zeros = -res[:, None] / dz
    return d_poles, d_zeros


def blt_objective(z: np.ndarray, n: int, workload: ToeplitzWorkload, reduction: Reduction,
                  participation: Participation | None, impulse: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``(log(E·S), its gradient, E)`` at ``z = (log(1 − θ), log(1 − θ̂))`` (module docstring).
    ``impulse`` is unused (the series are sums of powers) and kept for the banded twin's form."""
    b = z.size // 2
    th = 1.0 - np.exp(z[:b])
    thh = 1.0 - np.exp(z[b:])
    with np.errstate(all="ignore"):
        om = _residues(th, thh)
        omh = _residues(thh, th)
        if not (np.all(np.isfinite(om)) and np.all(np.isfinite(omh))):
            return math.inf, np.zeros_like(z), math.inf
        Pc, Pr = _powers(th, n), _powers(thh, n)
        c, r = _series(om, Pc), _series(omh, Pr)
        E, gr = error_and_gradient(r, workload, reduction)
        S, gc = pattern_value_and_gradient(c, n, participation)
        if not (math.isfinite(E) and math.isfinite(S) and E > 0 and S > 0):
            return math.inf, np.zeros_like(z), math.inf
        kk = np.arange(1, n - 1, dtype=np.float64)
        A, Ah = Pc @ gc[1:], Pr @ gr[1:]                  # ∂/∂ω, ∂/∂ω̂
        D = om * (Pc[:, :-1] @ (gc[2:] * kk))            # ∂/∂θ through the powers
        Dh = omh * (Pr[:, :-1] @ (gr[2:] * kk))
        om_th, om_thh = _residue_jacobian(th, thh, om)
        omh_thh, omh_th = _residue_jacobian(thh, th, omh)
        d_th = (D + A @ om_th) / S + (Ah @ omh_th) / E
        d_thh = (A @ om_thh) / S + (Dh + Ah @ omh_thh) / E
    grad = np.concatenate([d_th * -(1.0 - th), d_thh * -(1.0 - thh)])
    if not np.all(np.isfinite(grad)):
        return math.inf, np.zeros_like(z), math.inf
    return math.log(E) + math.log(S), grad, E


def initial_parameters(n: int, b: int) -> np.ndarray:
    """The interlaced start (module docstring) as ``(log(1 − θ), log(1 − θ̂))``."""
    rho = float(n) ** (1.0 / (2 * b))
    gaps = np.array([rho ** k / n for k in range(2 * b)])
    return np.log(np.concatenate([gaps[0::2], gaps[1::2]]))


def optimize_blt(n: int, buffers: int, *, workload: ToeplitzWorkload | None = None,
                 reduction: Reduction = "total", participation: Participation | None = None,
                 max_iter: int = 1000) -> LongOptimum:
    """The b-buffer BLT minimising ``E·S`` (module docstring) for n steps. The record (θ, ω)
    is re-evaluated on its own (``toeplitz.strategy_error`` and the column it defines); when
    two decays have merged in the optimum (ω's then cancel and the record is ill-conditioned:
    its objective differs from the pair's by more than 1e-7, relative) the optimum is sought
    with one buffer fewer."""
    n = integer("n", n, 2, PrivacyError)
    b = integer("buffers", buffers, 1, PrivacyError)
    w = workload or ToeplitzWorkload.prefix()
    t0 = time.perf_counter()
    iterations = 0
    for nb in range(b, 0, -1):
        opt = _optimize_pair(n, nb, w, reduction, participation, max_iter)
        iterations += opt.iterations
        if opt.strategy is not None:
            s = opt.strategy
            with np.errstate(all="ignore"):
                E = strategy_error(s, w, reduction)
            S = pattern_value_and_gradient(s.certified_column().value, n, participation)[0]
            if math.isfinite(E * S) and abs(E * S / opt.objective - 1.0) <= 1e-7:
                if participation is not None:  # report the certified value, not the smooth one
                    S = certified_sensitivity(s, participation).value ** 2
                return LongOptimum(s, E * S, E, iterations, time.perf_counter() - t0,
                                   f"{nb} buffers: {opt.message}")
    raise SolverError(f"BLT optimisation at n={n} found no well-conditioned record with ≤ {b} buffers")


@dataclass(frozen=True)
class _PairOptimum:
    strategy: BLT | None
    objective: float
    iterations: int
    message: str


def _interlace(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``z = (log(1 − θ), log(1 − θ̂))`` from free variables v, and ``∂z/∂v``: the sequence
    ``q_0 = v_0``, ``q_k = q_{k−1} − e^{v_k}`` (decreasing), ``s_k = −e^{q_k}`` (increasing,
    negative), read as ``log(1 − θ_1) < log(1 − θ̂_1) < log(1 − θ_2) < … < 0``: decays
    interlaced in (0, 1) for every v."""
    inc = -np.exp(v)
    inc[0] = v[0]
    seq = -np.exp(np.cumsum(inc))
    dq = np.tril(np.ones((v.size, v.size))) * np.where(np.arange(v.size) == 0, 1.0, -np.exp(v))[None, :]
    jac = seq[:, None] * dq
    b = v.size // 2
    order = np.concatenate([np.arange(0, 2 * b, 2), np.arange(1, 2 * b, 2)])
    return seq[order], jac[order]


def _uninterlace(z: np.ndarray) -> np.ndarray:
    """Free variables v with ``_interlace(v)[0] = z`` for z interlaced (the start)."""
    q = np.log(-np.sort(z))
    return np.concatenate([[q[0]], np.log(np.maximum(q[:-1] - q[1:], 1e-12))])


def _optimize_pair(n: int, b: int, w: ToeplitzWorkload, reduction: Reduction,
                   participation: Participation | None, max_iter: int) -> _PairOptimum:
    """One L-BFGS-B run. Under participation the decays are kept interlaced, θ_1 > θ̂_1 > θ_2 >
    … (:func:`_interlace`): then every ω_i > 0 and c is positive and non-increasing, where the
    smooth sensitivity is the exact one — otherwise the optimiser would exploit the closed
    form's blind spot for coefficients of both signs (module ``toeplitz``)."""
    from scipy.optimize import minimize

    impulse = np.zeros(n)
    impulse[0] = 1.0
    z0 = initial_parameters(n, b)
    if participation is None:
        def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
            val, grad, _ = blt_objective(z, n, w, reduction, participation, impulse)
            return val, grad

        res = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=[(_LOG_LO, _LOG_HI)] * (2 * b),
                       options={"maxiter": max_iter, "maxcor": 20, "ftol": 1e-14, "gtol": 1e-10})
        z = np.asarray(res.x, dtype=np.float64)
    else:
        def fun_interlaced(v: np.ndarray) -> tuple[float, np.ndarray]:
            z, jac = _interlace(v)
            val, grad, _ = blt_objective(z, n, w, reduction, participation, impulse)
            return val, grad @ jac

        res = minimize(fun_interlaced, _uninterlace(z0), jac=True, method="L-BFGS-B",
                       bounds=[(-8.0, math.log(-_LOG_LO))] + [(-40.0, 4.0)] * (2 * b - 1),
                       options={"maxiter": max_iter, "maxcor": 20, "ftol": 1e-14, "gtol": 1e-10})
        z = _interlace(np.asarray(res.x, dtype=np.float64))[0]
    logJ, _, _ = blt_objective(z, n, w, reduction, participation, impulse)
    try:
        strategy = blt_from_pair(1.0 - np.exp(z[:b]), 1.0 - np.exp(z[b:]), n)
    except (SolverError, PrivacyError):
        strategy = None
    if not math.isfinite(logJ):
        strategy = None
    return _PairOptimum(strategy, math.exp(logJ) if math.isfinite(logJ) else math.inf,
                        int(res.nit), str(res.message))
