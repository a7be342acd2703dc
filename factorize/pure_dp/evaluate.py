"""The exact per-query RMSE of a pure-DP (Laplace) strategy, recomputed from the strategy
itself — never from an optimizer's internal value.

The Laplace mechanism releases ``A h + Z``, ``Z_i ~ Lap(b)`` i.i.d. with ``b = Δ₁/ε`` (Δ₁ the
L1 sensitivity of A under the neighbouring relation, docs/math.md §6.3), variance ``2b²`` per
coordinate; answering ``W h`` by least squares ``R = W A⁺`` gives total variance
``2 b² ‖W A⁺‖_F² = 2 b² tr(W (AᵀA)⁺ Wᵀ)`` (when the row space of W lies in that of A), so
over k queries

    RMSE = sqrt(2 Δ₁² tr(W (AᵀA)⁺ Wᵀ) / k) / ε        (reported at ε = 1).

The sensitivities come from ``factorize.privacy.sensitivity`` (certified upper bounds: for a
dense A the column L1 norms, and for replace the exact ``max_{x≠y} ‖a_x − a_y‖₁``;
``kron_sensitivity`` for Kronecker factors — exact replace up to 4096 cells, else the
``2×`` bound, flagged), except for marginal weights, whose sensitivities have the closed
forms of ``pure_dp.l1_marginal_weights`` (``Σθ`` and ``2 Σ_{S≠∅} θ``). The trace is computed per
structure: dense (``pinv``), Kronecker (``Σ_b w_b² Π_i tr(G_{b,i} (A_iᵀA_i)⁺)``), union of
Kronecker strategies answered term by term, or in the marginal algebra
(``Σ_T dim_T λ_T / x_T`` with both spectra from ``marginal_algebra.gram_eigenvalues``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from factorize.planner.marginal_algebra import MarginalFamily, gram_eigenvalues, subset_dim
from factorize.privacy.guarantees import Neighbouring
from factorize.privacy.sensitivity import Sensitivity, kron_sensitivity, sensitivity
from factorize.pure_dp.errors import PureDPError

from .structure import ProductWorkload

__all__ = ["LaplaceError", "rmse_from", "evaluate_dense", "evaluate_kron", "evaluate_union",
           "evaluate_marginal_weights", "dense_laplace_objective", "marginal_strategy_dense",
           "gram_trace"]


@dataclass(frozen=True)
class LaplaceError:
    """``trace = tr(W (AᵀA)⁺ Wᵀ)``, the sensitivities and the per-query RMSE at ε = 1 under
    add/remove and replace neighbours."""

    trace: float
    k: int
    add_remove: Sensitivity
    replace: Sensitivity

    @property
    def rmse(self) -> float:
        """Per-query RMSE at ε = 1, add/remove neighbours."""
        return rmse_from(self.add_remove.value, self.trace, self.k)

    @property
    def rmse_replace(self) -> float:
        """Per-query RMSE at ε = 1, replace neighbours (``exact`` says whether the replace
        sensitivity is the exact maximum or the 2× bound)."""
        return rmse_from(self.replace.value, self.trace, self.k)

    def to_dict(self) -> dict:
        return {"trace": self.trace, "k": self.k, "rmse": self.rmse,
                "rmse_replace": self.rmse_replace, "sensitivity_add_remove": self.add_remove.to_dict(),
                "sensitivity_replace": self.replace.to_dict()}


def rmse_from(delta: float, trace: float, k: int, epsilon: float = 1.0) -> float:
    """``sqrt(2 Δ² tr / k) / ε``."""
    return float(math.sqrt(2.0 * delta * delta * trace / k) / epsilon)


def dense_laplace_objective(W: np.ndarray, A: np.ndarray) -> float:
    """``‖A‖₁² tr(W (AᵀA)⁺ Wᵀ)`` from dense matrices (np.linalg.pinv, column L1 norms); for
    tests and small cases."""
    A = np.asarray(A, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    l1 = float(np.abs(A).sum(axis=0).max())
    return l1 * l1 * float(np.trace(W @ np.linalg.pinv(A.T @ A) @ W.T))


def gram_trace(G: np.ndarray, A: np.ndarray) -> float:
    """``tr(G (AᵀA)⁺) = ‖W A⁺‖_F²`` for ``G = WᵀW``, after checking that ``R = W A⁺``
    reproduces W: ``‖W (I − (AᵀA)⁺AᵀA)‖_F² = tr(Eᵀ G E)`` must vanish (O(n³), no k)."""
    G = np.asarray(G, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    # (AᵀA)⁺ from A's SVD with the standard rank tolerance max(m, n)·eps·σ_max (a pinv of
    # AᵀA at rcond 1e-15 kept rounding-level eigenvalues of a rank-1 total and blew them up)
    _, sv, Vt = np.linalg.svd(A, full_matrices=False)
    keep = sv > max(A.shape) * np.finfo(np.float64).eps * (sv[0] if sv.size else 0.0)
    V = Vt[keep].T
    P = (V / sv[keep] ** 2) @ V.T
    E = np.eye(A.shape[1]) - V @ V.T
    resid = float(np.sum(E * (G @ E)))
    scale = float(np.trace(G))
    if resid > 1e-16 * max(scale, 1.0) * A.shape[1]:
        raise PureDPError(f"the strategy does not support the workload (‖W − W A⁺A‖_F² = {resid:.3g})")
    return float(np.sum(G * P))


def evaluate_dense(W: np.ndarray, A: np.ndarray, *, replace: bool = True) -> LaplaceError:
    """Exact error of a dense strategy A for a dense workload W."""
    W = np.asarray(W, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    trace = gram_trace(W.T @ W, A)
    ar = sensitivity(A, "l1", Neighbouring.ADD_REMOVE)
    rp = (sensitivity(A, "l1", Neighbouring.REPLACE) if replace
          else sensitivity(A, "l1", Neighbouring.REPLACE, exact=False))
    return LaplaceError(trace, W.shape[0], ar, rp)


def _block_trace(block_factors: Sequence[np.ndarray], weight: float,
                 strategy: Sequence[np.ndarray]) -> float:
    t = weight * weight
    for F, A in zip(block_factors, strategy, strict=True):
        t *= gram_trace(F.T @ F, A)
    return t


def evaluate_kron(P: ProductWorkload, factors: Sequence[np.ndarray]) -> LaplaceError:
    """Exact error of ``A = ⊗_i factors[i]`` for the product workload P."""
    trace = math.fsum(_block_trace(b.factors, b.weight, factors) for b in P.blocks)
    ar = kron_sensitivity(list(factors), "l1", Neighbouring.ADD_REMOVE)
    rp = kron_sensitivity(list(factors), "l1", Neighbouring.REPLACE)
    return LaplaceError(trace, P.k, ar, rp)


def evaluate_union(P: ProductWorkload, weights: Sequence[float],
                   terms: Sequence[Sequence[np.ndarray]]) -> LaplaceError:
    """Error of ``A = [α_b ⊗_i terms[b][i]]_b`` when workload block b is answered from term b
    alone (R block-diagonal; least squares over all terms can only do better). The L1
    sensitivity ``max_x Σ_b α_b Π_i ‖terms[b][i][:, x_i]‖₁`` is maximised over the product
    domain from the factors' column norms (``structured.product_max``: exact unless its work
    budget runs out, then the sum of per-block maxima or better); replace by twice that."""
    from factorize.structured.product_max import product_max

    if len(weights) != len(P.blocks) or len(terms) != len(P.blocks):
        raise PureDPError("one weighted term per workload block")
    tables = [np.stack([np.abs(np.asarray(t[i], dtype=np.float64)).sum(axis=0) for t in terms], axis=1)
              for i in range(len(P.sizes))]
    pm = product_max([abs(float(a)) for a in weights], tables)
    # block b's noise is scaled by 1/α_b relative to a unit-weight measurement
    trace = math.fsum(_block_trace(b.factors, b.weight, t) / (a * a)
                      for b, a, t in zip(P.blocks, weights, terms, strict=True))
    ar = Sensitivity(pm.value, "l1", Neighbouring.ADD_REMOVE, pm.exact)
    rp = Sensitivity(2.0 * pm.value, "l1", Neighbouring.REPLACE, False)
    return LaplaceError(trace, P.k, ar, rp)


def evaluate_marginal_weights(family: MarginalFamily,
                              weighted_subsets: Sequence[tuple[float, Sequence[int]]]) -> LaplaceError:
    """Exact error of the marginal-weights strategy ``[θ_S Q_S]_S`` for a marginal workload,
    in the algebra: ``x_T`` and ``λ_T`` both from ``gram_eigenvalues`` (the strategy is a
    weighted marginal family itself), ``tr = Σ_T dim_T λ_T / x_T``."""
    items = [(float(w), tuple(sorted(int(j) for j in S if family.sizes[int(j)] > 1)))
             for w, S in weighted_subsets if w > 0]
    if not items:
        raise PureDPError("the strategy has no positive weight")
    subsets = tuple(S for _, S in items)
    strat = MarginalFamily(sizes=family.sizes, subsets=subsets,
                           rows=tuple(math.prod(family.sizes[j] for j in S) for S in subsets),
                           weights=tuple(w for w, _ in items))
    x = gram_eigenvalues(strat)
    lam = gram_eigenvalues(family)
    terms = []
    for t, lt in lam.items():
        if float(lt) == 0.0:
            continue
        xt = float(x.get(t, 0.0))
        if xt <= 0.0:
            raise PureDPError(f"the strategy does not support the workload marginal {t:#b}")
        terms.append(subset_dim(family.sizes, t) * (float(lt) / xt))
    trace = math.fsum(terms)
    delta = math.fsum(w for w, _ in items)
    delta_rp = 2.0 * math.fsum(w for w, S in items if S)
    return LaplaceError(trace, family.k, Sensitivity(delta, "l1", Neighbouring.ADD_REMOVE, True),
                        Sensitivity(delta_rp, "l1", Neighbouring.REPLACE, True))


def marginal_strategy_dense(sizes: Sequence[int],
                            weighted_subsets: Sequence[tuple[float, Sequence[int]]]) -> np.ndarray:
    """Dense ``[θ_S Q_S]_S`` (small domains, tests)."""
    blocks = []
    for w, S in weighted_subsets:
        M: np.ndarray = np.ones((1, 1))
        for j, n in enumerate(sizes):
            M = np.kron(M, np.eye(n) if j in set(S) else np.ones((1, n)))
        blocks.append(w * M)
    return np.vstack(blocks)

