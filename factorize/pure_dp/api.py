"""One function per strategy family, each returning the strategy in dense per-attribute form
and its exact Laplace error recomputed from that form (``pure_dp.evaluate``), and
``plan_pure_dp`` that tries every family that applies and keeps the best.

Families (McKenna et al., "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10) 2018 — its strategy optimisers OPT_0, OPT_⊗, OPT_+
and OPT_M; section names below are descriptive, not numbered):

* ``plan_p_identity``  — one p-Identity strategy over all N cells (dense W);
* ``plan_kron``        — ``⊗_i A_i``, one p-Identity factor per attribute (product workloads,
                         unions of them by alternating per-factor optimisation);
* ``plan_kron_flat``   — ``plan_kron``'s product refined as one p-Identity strategy over the
                         whole domain (small N);
* ``plan_union_kron``  — ``[α_b ⊗_i A_{b,i}]_b``, one Kronecker strategy per workload block;
* ``plan_marginals``   — marginal weights ``[θ_S Q_S]_S`` (marginal workloads, also
                         Kronecker products of identity/total stacks).

The objective optimised is the add/remove one, ``‖A‖₁² tr(W (AᵀA)⁺ Wᵀ)``; every result also
reports the replace-neighbour RMSE with the replace L1 sensitivity of the returned strategy.
RMSE = ``sqrt(2 Δ₁² tr / k)`` at ε = 1 (Laplace scale Δ₁/ε, variance 2b² per measurement).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.pure_dp.errors import PureDPError
from factorize.structured.blocks import StructureError
from workloads import Workload, parse_workload

from .evaluate import LaplaceError, evaluate_dense, evaluate_kron, evaluate_marginal_weights, evaluate_union
from .flat import DEFAULT_FLAT_WORK, MAX_FLAT_ROWS, flat_rows, refine_flat
from .kron import optimize_kron, optimize_union
from .l1_marginal_weights import optimize_marginal_weights
from .one_d import optimize_p_identity
from .structure import ProductWorkload, marginal_structure_of, product_structure

__all__ = ["PureDPStrategy", "plan_p_identity", "plan_kron", "plan_kron_flat", "plan_union_kron",
           "plan_marginals", "plan_pure_dp", "MAX_DENSE_CELLS", "MAX_FLAT_CELLS"]

#: Largest domain planned as one dense p-Identity strategy.
MAX_DENSE_CELLS = 4096
#: Work budget of the fresh flat p-Identity search beside a Kronecker strategy (a quarter of
#: ``one_d.DEFAULT_WORK_BUDGET``: marginals:8x2x32:1, one BLAS thread, 2.7 s and RMSE 5.883
#: against 10 s and 5.867 at the default; kron(prefix:16,prefix:16): the same 8.679 in 1.6 s).
FRESH_FLAT_WORK = 5e9
#: Largest domain on which a Kronecker strategy is refined as one flat p-Identity strategy
#: by ``plan_pure_dp`` (O(p N²) per iteration).
MAX_FLAT_CELLS = 1024
#: ``plan_pure_dp`` tries Kronecker strategies for a marginal family only up to this many
#: blocks (beyond, the marginal weights are the family that scales).
MAX_KRON_BLOCKS_FOR_MARGINALS = 16


@dataclass(frozen=True)
class PureDPStrategy:
    """A pure-DP strategy and its exact Laplace error.

    Exactly one of the strategy fields is set:

    * ``factors``: dense ``A_i`` per attribute, the strategy is ``⊗_i A_i`` (one factor for a
      flat strategy over all cells);
    * ``union``: ``(α_b, (A_{b,1}, …))`` per workload block, the strategy stacks
      ``α_b ⊗_i A_{b,i}`` and block b is answered from its own term;
    * ``marginal``: ``(θ_S, S)`` pairs, the strategy stacks ``θ_S Q_S`` (``Q_S`` the
      marginal-table query matrix of attribute subset S).

    ``error`` is recomputed from that field (``pure_dp.evaluate``); ``optimizer`` summarises
    the search (winning start, seeds, runners-up values).
    """

    family: str
    sizes: tuple[int, ...]
    error: LaplaceError
    factors: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    union: tuple[tuple[float, tuple[np.ndarray, ...]], ...] | None = field(default=None, repr=False)
    marginal: tuple[tuple[float, tuple[int, ...]], ...] | None = None
    optimizer: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0

    @property
    def rmse(self) -> float:
        """Per-query RMSE at ε = 1, add/remove neighbours."""
        return self.error.rmse

    @property
    def rmse_replace(self) -> float:
        """Per-query RMSE at ε = 1, replace neighbours."""
        return self.error.rmse_replace

    def dense(self) -> np.ndarray:
        """The full strategy matrix (small domains only)."""
        from .evaluate import marginal_strategy_dense

        if self.factors is not None:
            A = np.ones((1, 1))
            for F in self.factors:
                A = np.kron(A, F)
            return A
        if self.union is not None:
            blocks = []
            for a, fs in self.union:
                B = np.ones((1, 1))
                for F in fs:
                    B = np.kron(B, F)
                blocks.append(a * B)
            return np.vstack(blocks)
        if self.marginal is None:
            raise StructureError(f"the {self.family} pure-DP strategy states none of its factors, union "
                                 "or marginal weights")
        return marginal_strategy_dense(self.sizes, self.marginal)


def _workload(W: Workload | str) -> Workload:
    return parse_workload(W) if isinstance(W, str) else W


def plan_p_identity(W: Workload | str, *, seed: int = 0, replace_exact: bool = True,
                    **options: Any) -> PureDPStrategy:
    """OPT_0: one p-Identity strategy over all N ≤ MAX_DENSE_CELLS cells (``one_d``);
    ``options`` go to ``one_d.optimize_p_identity`` (default: its deterministic work budget)."""
    t0 = time.perf_counter()
    W = _workload(W)
    k, N = W.shape
    if N > MAX_DENSE_CELLS:
        raise PureDPError(f"a flat p-Identity strategy is planned for N ≤ {MAX_DENSE_CELLS} cells, got {N}")
    Wd = np.asarray(W.dense(), dtype=np.float64)
    res = optimize_p_identity(Wd.T @ Wd, k, seed=seed, **options)
    A = res.A
    err = evaluate_dense(Wd, A, replace=replace_exact)
    return PureDPStrategy("p-identity", (N,), err, factors=(A,),
                          optimizer={"winner": res.search.winner, **res.search.summary(),
                                     "p": int(res.theta.shape[0])},
                          seconds=time.perf_counter() - t0)


def _kron_plan(P: ProductWorkload, seed: int, one_d: dict | None):
    return optimize_kron(P, seed=seed, one_d=one_d)


def plan_kron(W: Workload | str, *, seed: int = 0, one_d: dict | None = None) -> PureDPStrategy:
    """OPT_⊗: ``⊗_i A_i`` with p-Identity factors (``kron.optimize_kron``)."""
    t0 = time.perf_counter()
    P = product_structure(_workload(W))
    ks = _kron_plan(P, seed, one_d)
    err = evaluate_kron(P, ks.factors)
    return PureDPStrategy("kronecker", P.sizes, err, factors=ks.factors,
                          optimizer=_kron_summary(ks), seconds=time.perf_counter() - t0)


def _kron_summary(ks) -> dict:
    return {"value": ks.value, "sweeps": ks.sweeps, "history": list(ks.history),
            "factors": [None if s is None else {"winner": s.search.winner, "p": int(s.theta.shape[0]),
                                                "seeds": list(s.search.seeds),
                                                "runners_up": list(s.search.runners_up),
                                                "work_budget": s.search.work_budget}
                        for s in ks.searches]}


def plan_kron_flat(W: Workload | str, *, seed: int = 0, one_d: dict | None = None,
                   work_budget: float = DEFAULT_FLAT_WORK, time_budget: float | None = None,
                   kron=None) -> PureDPStrategy:
    """The Kronecker optimum refined as one p-Identity strategy over all N cells
    (``flat.refine_flat``); N ≤ MAX_DENSE_CELLS. ``kron``: a ``KronStrategy`` already found;
    ``work_budget`` multiply-adds (deterministic), ``time_budget`` an optional cap in seconds."""
    t0 = time.perf_counter()
    W = _workload(W)
    k, N = W.shape
    if N > MAX_DENSE_CELLS:
        raise PureDPError(f"flat refinement is for N ≤ {MAX_DENSE_CELLS} cells, got {N}")
    P = product_structure(W)
    ks = kron if kron is not None else _kron_plan(P, seed, one_d)
    thetas = []
    for F, s in zip(ks.factors, ks.searches, strict=True):
        if s is not None:
            thetas.append(s.theta)
        elif F.shape[0] == F.shape[1] and np.array_equal(F, np.eye(F.shape[0])):
            thetas.append(np.zeros((0, F.shape[0])))
        else:
            raise StructureError("a Kronecker factor that is not p-Identity cannot be flattened")
    if flat_rows(thetas) > MAX_FLAT_ROWS:
        raise StructureError(f"the flattened strategy would have {flat_rows(thetas)} extra rows "
                             f"(limit {MAX_FLAT_ROWS})")
    Wd = np.asarray(W.dense(), dtype=np.float64)
    res = refine_flat(Wd.T @ Wd, k, thetas, seed=seed, work_budget=work_budget,
                      time_budget=time_budget)
    A = res.A
    err = evaluate_dense(Wd, A)
    return PureDPStrategy("p-identity (flat, from kronecker)", (N,), err, factors=(A,),
                          optimizer={"kronecker": _kron_summary(ks), **res.search.summary()},
                          seconds=time.perf_counter() - t0)


def plan_union_kron(W: Workload | str, *, seed: int = 0, one_d: dict | None = None) -> PureDPStrategy:
    """OPT_+: one Kronecker strategy per workload block, cube-root weights
    (``kron.optimize_union``); block b answered from its own term."""
    t0 = time.perf_counter()
    P = product_structure(_workload(W))
    us = optimize_union(P, seed=seed, one_d=one_d)
    err = evaluate_union(P, us.weights, us.terms)
    return PureDPStrategy("union of kronecker", P.sizes, err,
                          union=tuple(zip(us.weights, us.terms, strict=True)),
                          optimizer={"value": us.value, "block_values": list(us.block_values)},
                          seconds=time.perf_counter() - t0)


def plan_marginals(W: Workload | str, *, seed: int = 0, **options: Any) -> PureDPStrategy:
    """OPT_M: marginal weights in the subset algebra (``marginals.optimize_marginal_weights``)."""
    t0 = time.perf_counter()
    fam = marginal_structure_of(_workload(W))
    if fam is None:
        raise StructureError("the workload is not a marginal family")
    res = optimize_marginal_weights(fam, seed=seed, **options)
    support = tuple(res.support())
    err = evaluate_marginal_weights(fam, support)
    return PureDPStrategy("marginal weights", fam.sizes, err, marginal=support,
                          optimizer={"winner": res.winner, "chord_rounds": res.chord_rounds,
                                     **{k: v for k, v in res.search.summary().items() if k != "winner"}},
                          seconds=time.perf_counter() - t0)


def plan_pure_dp(W: Workload | str, *, seed: int = 0, flat: bool = True,
                 one_d: dict | None = None) -> tuple[PureDPStrategy, list[PureDPStrategy]]:
    """Every family that applies to W (marginals, Kronecker, union, flat refinement, dense
    p-Identity for a 1-D workload); returns the best by add/remove RMSE and all candidates."""
    W = _workload(W)
    k, N = W.shape
    out: list[PureDPStrategy] = []
    marginal = marginal_structure_of(W) is not None
    if marginal:
        out.append(plan_marginals(W, seed=seed))
    try:
        P = product_structure(W)
    except StructureError:
        P = None
    if P is not None and marginal and len(P.blocks) > MAX_KRON_BLOCKS_FOR_MARGINALS:
        P = None
    if P is not None and (len(P.sizes) > 1 or len(P.blocks) > 1):
        t0 = time.perf_counter()
        ks = _kron_plan(P, seed, one_d)
        err = evaluate_kron(P, ks.factors)
        out.append(PureDPStrategy("kronecker", P.sizes, err, factors=ks.factors,
                                  optimizer=_kron_summary(ks), seconds=time.perf_counter() - t0))
        if len(P.blocks) > 1:
            out.append(plan_union_kron(W, seed=seed, one_d=one_d))
        if flat and N <= MAX_FLAT_CELLS and len(P.sizes) > 1:  # one attribute: the same problem
            with contextlib.suppress(StructureError):
                out.append(plan_kron_flat(W, seed=seed, kron=ks))
            # and a fresh flat search: the Kronecker start's basin can miss the flat optimum
            # (vstack(scale(3,kron(prefix:4,prefix:8)),kron(F,G)): 14.07 from it, 13.23 fresh)
            out.append(plan_p_identity(W, seed=seed, **{"work_budget": FRESH_FLAT_WORK,
                                                        **(one_d or {})}))
    elif P is not None and N <= MAX_DENSE_CELLS:
        out.append(plan_p_identity(W, seed=seed, **(one_d or {})))
    if not out:
        raise StructureError("no pure-DP strategy family applies to this workload")
    best = min(out, key=lambda s: s.rmse)
    return best, out
