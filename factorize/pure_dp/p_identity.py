"""The Laplace objective of a p-Identity strategy and its analytic gradient.

Reference: McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional
statistical queries under differential privacy", PVLDB 11(10), 2018 — the p-Identity
strategy template of its explicit-strategy optimiser OPT_0.

A p-Identity strategy over n cells is parameterised by a non-negative ``Θ ∈ R^{p×n}``:

    A(Θ) = [I_n ; Θ] · D,        D = diag(1 / (1 + Σ_i θ_ij)) = diag(1/c_j),

so every column of A has L1 norm exactly 1 (``‖A‖_{1→1} = 1``, the add/remove L1
sensitivity). The Laplace matrix mechanism with scale ``b = ‖A‖₁/ε`` answers W with total
variance ``2 b² tr(W (AᵀA)⁻¹ Wᵀ)``; the objective minimised here is the scale-free part

    f(Θ) = ‖A‖₁² · tr(G (AᵀA)⁻¹) = tr(C G C (I + ΘᵀΘ)⁻¹),   G = WᵀW,  C = diag(c),

(per-query RMSE at ε = 1: ``sqrt(2 f / k)``). With ``S = I_p + ΘΘᵀ`` and Woodbury,
``Y = (I + ΘᵀΘ)⁻¹ = I − Θᵀ S⁻¹ Θ``; with ``H = CGC``, ``B = S⁻¹Θ``:

    f = Σ_j c_j² G_jj − ⟨B, ΘH⟩,

    ∂f/∂θ_ij = 2 v_j − 2 (Θ Y H Y)_ij,
    v_j = (G C Y)_jj = c_j G_jj − (1/c_j) Σ_i (ΘH)_ij B_ij,
    Θ Y H Y = ΘH − (ΘΘᵀ)(BH) − (ΘHBᵀ)Θ + (ΘΘᵀ)(BHBᵀ)Θ,    BH = S⁻¹(ΘH).

(the first term differentiates C through the column sums, the second ``Y = X⁻¹`` with
``dX = dΘᵀΘ + ΘᵀdΘ``). The only O(n²) work is one product ``ΘH = (C Θᵀ)ᵀ G C``: O(p n²)
per evaluation, no n×n inverse (HDMM's own implementation forms two such products).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from factorize.pure_dp.errors import PureDPError

__all__ = ["PIdentityObjective", "p_identity_strategy", "theta_from_strategy"]


@dataclass(frozen=True)
class PIdentityObjective:
    """``f(Θ) = ‖A(Θ)‖₁² tr(G (A(Θ)ᵀA(Θ))⁻¹)`` for a fixed Gram matrix ``G = WᵀW`` (n×n).

    ``k`` is the number of queries behind G (for the per-query RMSE ``sqrt(2 f / k)`` at
    ε = 1). Call with a flat parameter vector of length ``p·n`` (row-major Θ).
    """

    G: np.ndarray
    k: int
    diag: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        G = np.ascontiguousarray(np.asarray(self.G, dtype=np.float64))
        if G.ndim != 2 or G.shape[0] != G.shape[1]:
            raise PureDPError(f"G must be a square matrix, got shape {G.shape}")
        object.__setattr__(self, "G", G)
        object.__setattr__(self, "diag", np.diagonal(G).copy())

    @property
    def n(self) -> int:
        return int(self.G.shape[0])

    def rows(self, theta: np.ndarray) -> int:
        """p, the number of non-identity rows of a flat parameter vector."""
        size = int(np.asarray(theta).size)
        if size % self.n:
            raise PureDPError(f"a p-Identity parameter vector has a multiple of n={self.n} entries, "
                             f"got {size}")
        return size // self.n

    def value(self, theta: np.ndarray) -> float:
        """f(Θ) (see the module docstring)."""
        return self.value_and_grad(theta, need_grad=False)[0]

    def value_and_grad(self, theta: np.ndarray, need_grad: bool = True) -> tuple[float, np.ndarray]:
        """``(f(Θ), ∇f(Θ))``, the gradient flattened like ``theta``."""
        n = self.n
        p = self.rows(theta)
        T = np.asarray(theta, dtype=np.float64).reshape(p, n)
        c = 1.0 + T.sum(axis=0)
        if p == 0:
            return float(np.dot(c * c, self.diag)), np.zeros(0)
        TT = T @ T.T
        S = TT + np.eye(p)
        # ΘH = (H Θᵀ)ᵀ with H = CGC: the only O(p n²) product
        TH = (c[:, None] * (self.G @ (c[:, None] * T.T))).T
        sol = np.linalg.solve(S, np.hstack([T, TH]))
        B, BH = sol[:, :n], sol[:, n:]
        f = float(np.dot(c * c, self.diag) - np.sum(B * TH))
        if not need_grad:
            return f, np.zeros(0)
        THBt = TH @ B.T
        BHBt = BH @ B.T
        TZ = TH - TT @ BH - THBt @ T + TT @ (BHBt @ T)
        v = self.diag * c - np.sum(TH * B, axis=0) / c
        grad = 2.0 * v[None, :] - 2.0 * TZ
        return f, grad.ravel()

    def rmse(self, theta: np.ndarray) -> float:
        """Per-query RMSE of the Laplace mechanism at ε = 1: ``sqrt(2 f / k)``."""
        return float(np.sqrt(2.0 * max(self.value(theta), 0.0) / self.k))


def p_identity_strategy(theta: np.ndarray, n: int) -> np.ndarray:
    """The dense strategy ``A = [I; Θ] D`` ((n + p) × n), every column of L1 norm 1."""
    T = np.asarray(theta, dtype=np.float64).reshape(-1, n)
    A = np.vstack([np.eye(n), T])
    return A / (1.0 + T.sum(axis=0))[None, :]


def theta_from_strategy(M: np.ndarray, identity_share: float = 0.2) -> np.ndarray:
    """A p-Identity starting point Θ from a candidate strategy M (m × n, e.g. the rows of
    the γ_F optimum or a tree): ``Θ = s·|M|`` with s chosen so that the identity part keeps
    ``identity_share`` of the L1 mass of the widest column (``1/(1 + s·max_j ‖m_j‖₁)``)."""
    M = np.abs(np.asarray(M, dtype=np.float64))
    if M.ndim != 2:
        raise PureDPError("a strategy is a 2-D matrix")
    width = float(M.sum(axis=0).max())
    if width <= 0.0:
        return np.zeros_like(M)
    s = (1.0 / identity_share - 1.0) / width
    return s * M
