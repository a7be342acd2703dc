"""Optimised pure-DP strategies as exact factorizations W = R·A a plan can carry.

``optimized_candidates(W, seed=…)`` runs :func:`factorize.pure_dp.api.plan_pure_dp` (every
strategy family that applies to W: p-Identity for a 1-D workload, Kronecker products of
p-Identity factors, their flat refinement, unions, marginal weights; McKenna et al.,
"Optimizing error of high-dimensional statistical queries under differential privacy",
PVLDB 11(10) 2018) and writes each strategy it returns as a factorization:

* a Kronecker strategy ``⊗_i A_i`` for a workload that is one Kronecker product
  ``⊗_i W_i`` with matching leaves: ``R = ⊗_i W_i A_i⁺`` (every p-Identity factor has full
  column rank, so ``R_i A_i = W_i`` exactly up to the least-squares solve's rounding, which
  the plan's certificate check bounds);
* any strategy over a domain small enough to form densely (``max_cells`` columns,
  ``max_entries`` entries of W): ``A`` dense and ``R = W A⁺`` by least squares.

A strategy that fits neither (a union or marginal-weights strategy over a large domain) is
left out: the plan kinds of ``factorize.structured`` measure those. The optimiser's record
— family, base seed, winning start, the random starts' seeds and the runners-up values —
travels with each candidate, so a plan states how it was found and can be re-planned from
its seed (the search is deterministic: a work budget in multiply-adds, not in seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.factorization import Factorization
from factorize.planner.strategies import OPTIMIZED_PREFIX
from factorize.structured.blocks import StructureError
from workloads import Workload
from workloads.structured import kron_leaves

from .api import MAX_FLAT_CELLS, PureDPStrategy, plan_pure_dp

__all__ = ["OptimizedCandidate", "optimized_candidates"]


@dataclass(frozen=True)
class OptimizedCandidate:
    """One optimised strategy as ``W = R·A`` (``factorization``) with the optimiser's record."""

    name: str
    factorization: Factorization
    record: dict[str, Any] = field(default_factory=dict)


def optimized_candidates(W: Workload, *, seed: int = 0, max_cells: int,
                         max_entries: int) -> list[OptimizedCandidate]:
    """The strategies of ``plan_pure_dp(W, seed=seed)`` as factorizations (module docstring);
    an empty list when no family applies or none can be written."""
    k, N = W.shape
    try:
        _, found = plan_pure_dp(W, seed=seed, flat=N <= MAX_FLAT_CELLS)
    except StructureError:
        return []
    out = []
    dense_W: np.ndarray | None = None
    for s in found:
        fact = _kron_factorization(W, s)
        if fact is None and max_cells >= N and k * N <= max_entries:
            if dense_W is None:
                dense_W = np.asarray(W.dense(), dtype=np.float64)
            fact = _dense_factorization(dense_W, s.dense())
        if fact is None:
            continue
        out.append(OptimizedCandidate(f"{OPTIMIZED_PREFIX}{s.family} (seed {seed})", fact,
                                      _record(s, seed)))
    return out


def _kron_factorization(W: Workload, s: PureDPStrategy) -> Factorization | None:
    """``⊗_i W_i A_i⁺`` for a Kronecker strategy whose factors match W's leaves one to one."""
    if s.factors is None or len(s.factors) < 2:
        return None
    leaves = kron_leaves(W)
    if len(leaves) != len(s.factors) or any(leaf.shape[1] != A.shape[1]
                                            for leaf, A in zip(leaves, s.factors, strict=True)):
        return None
    R = tuple(_reconstruction(np.asarray(leaf.dense(), dtype=np.float64), A)
              for leaf, A in zip(leaves, s.factors, strict=True))
    return Factorization(R, tuple(np.asarray(A, dtype=np.float64) for A in s.factors))


#: A least-squares reconstruction is kept when ``max|R·A − W| ≤ RESIDUAL_TOL·max|W|`` (W's
#: rows in A's row space: always for full column rank, and for marginal-weight strategies
#: that measure every marginal the workload needs); the plan's certificate re-checks it.
RESIDUAL_TOL = 1e-10


def _dense_factorization(W: np.ndarray, A: np.ndarray) -> Factorization | None:
    """``R = W A⁺`` when W's rows lie in A's row space: ``max|W(A⁺A − I)| ≤ RESIDUAL_TOL·max|W|``
    (first by Cauchy–Schwarz from the rows' and columns' 2-norms, O(kN + N²); the k×N product
    only when that bound does not already settle it)."""
    A = np.asarray(A, dtype=np.float64)
    pinv = _pseudo_inverse(A)
    P = pinv @ A
    P[np.diag_indices_from(P)] -= 1.0  # A⁺A − I: W·P = R·A − W
    limit = RESIDUAL_TOL * max(1.0, float(np.max(np.abs(W))))
    cs = float(np.sqrt(np.einsum("ij,ij->i", W, W).max() * np.einsum("ij,ij->j", P, P).max()))
    if not cs <= limit and not np.max(np.abs(W @ P)) <= limit:
        return None  # W's rows are not in A's row space
    return Factorization.dense(W @ pinv, A)


def _pseudo_inverse(A: np.ndarray) -> np.ndarray:
    """``A⁺`` (N×m) from one SVD of A, singular values below ``lstsq``'s default cutoff
    (``eps·max(m, N)·σ_max``) dropped: ``W A⁺`` is then the minimum-norm least-squares
    solution ``numpy.linalg.lstsq(Aᵀ, Wᵀ)`` gives, without a factorization per right-hand
    side (W may have tens of thousands of rows)."""
    U_, s, Vt = np.linalg.svd(A, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return np.zeros(A.T.shape)
    keep = s > np.finfo(np.float64).eps * max(A.shape) * s[0]
    return (Vt[keep].T / s[keep]) @ U_[:, keep].T


def _reconstruction(W: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``R = W A⁺`` (minimum-norm least squares: the best linear unbiased reconstruction for
    i.i.d. noise when W's rows lie in A's row space)."""
    return W @ _pseudo_inverse(np.asarray(A, dtype=np.float64))


def _record(s: PureDPStrategy, seed: int) -> dict[str, Any]:
    """What the plan records of the search: JSON-ready, starts' details left out."""
    opt = s.optimizer or {}
    rec: dict[str, Any] = {"family": s.family, "seed": int(seed),
                           "optimizer_rmse_eps1": float(s.rmse), "seconds": round(s.seconds, 3)}
    if "winner" in opt:
        rec["winner"] = opt["winner"]
    if "seeds" in opt:
        rec["seeds"] = [int(x) for x in opt["seeds"]]
    if "runners_up" in opt:
        rec["runners_up"] = [float(x) for x in opt["runners_up"][:5]]
    if opt.get("work_budget") is not None:  # the deterministic budget the search ran under
        rec["work_budget"] = float(opt["work_budget"])
    if "factors" in opt:  # a Kronecker search: one record per factor
        rec["factors"] = [None if f is None else {
            "winner": f["winner"], "seeds": f["seeds"],
            "runners_up": [float(x) for x in f["runners_up"][:5]],
            **({"work_budget": float(f["work_budget"])} if f.get("work_budget") is not None else {})}
            for f in opt["factors"]]
    if "kronecker" in opt:  # a flat refinement of a Kronecker start
        rec["from_kronecker_value"] = float(opt["kronecker"]["value"])
    return rec
