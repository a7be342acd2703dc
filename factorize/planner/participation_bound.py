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
``norms.trace_norm_lower_bound``; the multiplier sum is rounded up (the solver-free evaluation,
``training.certificate.pattern_bound_value``, is what a verifier re-runs).

Patterns used: ``epochs=K`` — all b = n/K of them; ``k=K,min_sep=B`` — the arithmetic progressions
``{i, i+B, …}`` of K steps that fit (a subset of the patterns: fewer constraints, still a lower
bound). The multipliers are chosen by L-BFGS on their logarithms (any choice is valid; the
search only tightens the bound).

For ``epochs=K`` the dual of the exact program (``training.certificate``: a block-PSD Z with
constant diagonal per pattern, which contains this Z) is tight — 6,954.078 at prefix:256, four
epochs, against 6,857.45 here; this relaxation remains the bound the min-sep plans print.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from factorize.privacy.participation import Participation
from factorize.training.certificate import bound_patterns, membership, pattern_bound_value


@dataclass(frozen=True)
class ParticipationBound:
    """``value ≤ min tr(W X⁻¹ Wᵀ)`` over strategies with sensitivity ≤ 1 under ``participation``;
    ``a``, ``c`` the multipliers of ``patterns`` (rows: the steps of each pattern)."""

    value: float
    a: np.ndarray
    c: np.ndarray
    patterns: list[np.ndarray]
    participation: Participation


def lower_bound(W: np.ndarray, participation: Participation, max_iter: int = 2000) -> ParticipationBound:
    """The bound of the module docstring for workload ``W`` (k × n steps)."""
    from scipy.optimize import minimize

    W = np.asarray(W, dtype=np.float64)
    n = W.shape[1]
    pats = bound_patterns(n, participation)
    S = membership(n, pats)
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
    return ParticipationBound(pattern_bound_value(W, pats, a, c), a, c, pats, participation)
