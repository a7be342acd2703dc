"""A certified lower bound on the total squared error of any factorization ``W = R·A`` of a
streaming workload when one record takes part in several steps (``privacy.participation``).

For a strategy with L2 sensitivity ≤ 1 under participation and ``X = AᵀA``, the error at unit
noise is ``tr(W X⁻¹ Wᵀ)`` (R = W A⁺; Denisov et al., NeurIPS 2022, §3). Sensitivity ≤ 1 means
``⟨X_ππ, Y⟩ ≤ 1`` for every pattern π and every Y in the elliptope (``privacy.participation``),
in particular ``tr X_ππ ≤ 1`` (Y = I) and ``𝟙ᵀX_ππ𝟙 ≤ 1`` (Y = 𝟙𝟙ᵀ). Lagrange multipliers
``a_π, c_π ≥ 0`` on these, ``Z = Σ_π a_π Diag(𝟙_π) + c_π 𝟙_π𝟙_πᵀ ⪰ 0``, give for every feasible X

    tr(W X⁻¹ Wᵀ) ≥ min_{X≻0} tr(W X⁻¹ Wᵀ) + ⟨X, Z⟩ − Σ_π (a_π + c_π)
                 = 2 ‖W Z^{1/2}‖_tr − Σ_π (a_π + c_π)

(the inner minimum is at ``X = C^{1/2}(C^{1/2} Z C^{1/2})^{-1/2} C^{1/2}``, C = WᵀW, the γ_F dual
of docs/math.md §4.1 with a non-diagonal Z). With ``Z = BBᵀ``, ``B = [Diag(√(Σ_π a_π 𝟙_π)),
[√c_π 𝟙_π]_π]`` (n × (n + |patterns|)), ``‖W Z^{1/2}‖_tr = ‖W B‖_tr``: one SVD, certified by
``norms.trace_norm_lower_bound``; the multiplier sum is rounded up.

Patterns used: ``epochs=K`` — all b = n/K of them; ``k=K,min_sep=B`` — the arithmetic progressions
``{i, i+B, …}`` of K steps that fit (a subset of the patterns: fewer constraints, still a lower
bound). The multipliers are chosen by L-BFGS on their logarithms (any choice is valid; the
search only tightens the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factorize.privacy.participation import Participation


@dataclass(frozen=True)
class ParticipationBound:
    """``value ≤ min tr(W X⁻¹ Wᵀ)`` over strategies with sensitivity ≤ 1 under ``participation``;
    ``a``, ``c`` the multipliers of ``patterns`` (rows: the steps of each pattern)."""

    value: float
    a: np.ndarray
    c: np.ndarray
    patterns: list[np.ndarray]
    participation: Participation


def patterns(n: int, p: Participation) -> list[np.ndarray]:
    """The participation patterns the bound uses (module docstring)."""
    if p.kind == "epochs":
        if n % p.k:
            from factorize.privacy.guarantees import PrivacyError

            raise PrivacyError(f"epochs={p.k} needs a number of steps divisible by {p.k}, got {n}")
        b = n // p.k
        return [np.arange(i, n, b) for i in range(b)]
    span = (p.k - 1) * p.min_sep
    return [np.arange(i, i + span + 1, p.min_sep) for i in range(n - span)] or [np.arange(1)]


def _membership(n: int, pats: list[np.ndarray]) -> np.ndarray:
    S = np.zeros((n, len(pats)))
    for i, pat in enumerate(pats):
        S[pat, i] = 1.0
    return S


def certified_value(W: np.ndarray, pats: list[np.ndarray], a: np.ndarray, c: np.ndarray) -> float:
    """``2‖W B‖_tr − Σ(a + c)`` with a certified lower bound on the trace norm and the sum
    rounded up (module docstring); may be negative for poor multipliers."""
    from factorize.norms import trace_norm_lower_bound
    from factorize.numerics import frobenius_upper, gamma, round_up
    from factorize.privacy.guarantees import PrivacyError

    n = W.shape[1]
    a, c = np.asarray(a, dtype=np.float64), np.asarray(c, dtype=np.float64)
    if a.shape != (len(pats),) or c.shape != (len(pats),) or np.any(a < 0) or np.any(c < 0) \
            or not (np.all(np.isfinite(a)) and np.all(np.isfinite(c))):
        raise PrivacyError("participation multipliers must be finite, non-negative, one pair per pattern")
    S = _membership(n, pats)
    B = np.hstack([np.diag(np.sqrt(S @ a)), S * np.sqrt(c)[None, :]])
    # ‖WB‖_tr of the exact product: fl(WB) is within γ_n |W||B| entrywise, and a matrix of
    # rank ≤ r has ‖E‖_tr ≤ √r ‖E‖_F
    WB = W @ B
    err = round_up(math.sqrt(min(WB.shape)) * gamma(n + 2) * frobenius_upper(np.abs(W) @ np.abs(B)), 3)
    tr = trace_norm_lower_bound(WB) - err
    # Z := BBᵀ exactly for the computed B. Its rank-one part is Σ_π c'_π 𝟙_π𝟙_πᵀ with
    # c'_π = fl(√c_π)² (the entries of B's pattern columns are exact copies); its diagonal part
    # d_t = fl(√fl((Sa)_t))² ≤ (Sa)_t (1 + γ_P)(1 + u)², so Σ_t d_t X_tt ≤ (1 + γ_{P+3}) Σ_π a_π
    # for every feasible X (Σ_{t∈π} X_tt ≤ 1): the multipliers charged are those, rounded up
    c_eff = np.sqrt(c) ** 2
    charge = math.fsum(a.tolist()) * (1.0 + gamma(len(pats) + 3)) + math.fsum(c_eff.tolist())
    return 2.0 * tr - round_up(charge, 2 * len(pats) + 4)


def lower_bound(W: np.ndarray, participation: Participation, max_iter: int = 2000) -> ParticipationBound:
    """The bound of the module docstring for workload ``W`` (k × n steps)."""
    from scipy.optimize import minimize

    W = np.asarray(W, dtype=np.float64)
    n = W.shape[1]
    pats = patterns(n, participation)
    S = _membership(n, pats)
    C = W.T @ W
    lam, V = np.linalg.eigh(C)
    Ch = (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T
    P = len(pats)

    def negdual(x: np.ndarray) -> tuple[float, np.ndarray]:
        a, c = np.exp(x[:P]), np.exp(x[P:])
        Z = np.diag(S @ a) + (S * c[None, :]) @ S.T
        M = Ch @ Z @ Ch
        mu, U = np.linalg.eigh(0.5 * (M + M.T))
        r = np.sqrt(np.clip(mu, 1e-300, None))
        val = 2.0 * float(r.sum()) - float(a.sum() + c.sum())
        G = Ch @ ((U / r) @ U.T) @ Ch
        ga = S.T @ np.diag(G) - 1.0
        gc = np.einsum("ti,tu,ui->i", S, G, S) - 1.0
        return -val, -np.concatenate([ga * a, gc * c])

    res = minimize(negdual, np.zeros(2 * P), jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    a, c = np.exp(res.x[:P]), np.exp(res.x[P:])
    return ParticipationBound(certified_value(W, pats, a, c), a, c, pats, participation)
