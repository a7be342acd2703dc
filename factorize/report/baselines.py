"""Standard strategies for the report's comparison table, computed on the spot.

Every baseline is a factorization mechanism ``M(h) = R (A h + Z)`` with ``R A = W``
(docs/math.md §2) whose noise is calibrated by *exactly* the steps ``kinds.factorization.build.build_plan``
applies to an optimised strategy, so the numbers in the table are the ones a plan with that
strategy would state:

1. sensitivity of the strategy A under the plan's neighbouring relation
   (``privacy.kron_sensitivity`` on the factors of A: L2 for Gaussian / K-norm noise, L1 for
   Laplace noise; add/remove ``max_x ||a_x||``, replace ``max_{x≠y} ||a_x − a_y||``, exact
   for N ≤ 4096 and the bound ``2 × add/remove`` beyond, as for a plan);
2. noise family from the guarantee (Gaussian for (ε, δ)-DP and ρ-zCDP, Laplace for pure
   ε-DP; ``noise_family`` overrides as in ``build_plan``) and, for exact sampling, the lattice
   spacing ``rules.choose_grid(Δ, m, norm)`` with the discretisation inflation of the
   sensitivity (``privacy.discretized_sensitivity``) — all through ``privacy.calibrate``;
3. the error summary ``kinds.factorization.plan.expected_error`` of the factorization (per-query std
   ``√v·||r_i||``, RMSE ``√v·||R||_F/√k``, expected max ``√v·||R||_{2→∞}·√(2 ln 2k)`` for
   Gaussian noise or ``√v·||R||_F`` otherwise, plus the lattice rounding bias
   ``(γ/2)·max_i ||r_i||₁``), with ``v = NoiseSpec.variance_bound``.

The strategies (:func:`baselines` returns them in this order, skipped ones with
``applies=False`` and a reason, so a table built from them always has the same rows):

* ``"W directly"`` — ``A = W, R = I_k``: noise on every query answer. For a Kronecker
  workload ``W = ⊗ W_j`` the factors are kept (``A = ⊗ W_j``, ``R = ⊗ I``), so no dense W is
  needed.
* ``"histogram (identity strategy)"`` — ``A = I_N, R = W``: noise on every cell
  (Kronecker workloads: ``A = ⊗ I``, ``R = ⊗ W_j``).
* ``"hierarchical tree"`` — for 1-D range workloads (every row of W a contiguous run of
  ones): the b-ary tree of nested intervals for b ∈ {2, 4, 8, 16}, padded to ``b^L ≥ N`` cells
  (empty nodes dropped), so each record lies in exactly one node per level (``L + 1`` levels,
  L2 sensitivity ``√(L+1)``, L1 sensitivity ``L + 1`` under add/remove), with the least-squares
  ("consistent") reconstruction ``R = W A⁺ = W (AᵀA)⁻¹ Aᵀ`` of Hay, Rastogi, Miklau & Suciu
  (PVLDB 2010, "Boosting the accuracy of differentially private histograms through
  consistency"); branching factors as studied by Qardaji, Yang & Li (PVLDB 2013,
  "Understanding hierarchical methods for differentially private histograms"). The b with
  the smallest RMSE is reported; every b's RMSE is in ``params["rmse_by_branching"]``.
* ``"marginal tables"`` and ``"marginal tables + least squares"`` — for marginal workloads
  (``marginal_algebra.marginal_family``): ``A = W`` (one noisy contingency table per block;
  each record adds 1 to one cell of every table, so the add/remove L2 sensitivity is
  ``√(#tables)`` and the L1 sensitivity ``#tables``), released as is (``R = I_k``) or made
  mutually consistent by least squares, ``R = W W⁺`` — the orthogonal projector onto
  range(W) (Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar, PODS 2007, "Privacy, accuracy,
  and consistency too"; the matrix-mechanism view of Li, Miklau, Hay, McGregor & Rastogi,
  VLDB J. 2015). Row i of the projector has ``||p_i||² = P_ii``; for a row of table S this is
  ``Σ_{T⊆S} c_{S,T}/λ_T`` in the algebra of attribute subsets (the tests check that).

The strategy of "W directly" and of "marginal tables" is the same matrix, so for marginal
workloads those two rows coincide (both are listed so the table reads the same for every
workload).

Dense matrices are formed only within ``max_entries`` entries (W: ``k·N``; the strategy:
``m·N``; the reconstruction: ``k·m``); a baseline that would need more is skipped with a
reason. Nothing here needs a solver.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.factorization import Factorization
from factorize.kinds.factorization.plan import expected_error
from factorize.plan.rules import choose_grid
from factorize.planner.strategies import TREE_BRANCHING, is_range_workload, tree_strategy
from factorize.privacy import (
    Neighbouring,
    PrivacyError,
    calibrate,
    kron_sensitivity,
    parse_guarantee,
)
from workloads import DEFAULT_MAX_DENSE_ENTRIES, Workload, as_workload
from workloads.structured import kron_leaves

__all__ = [
    "NAME_DIRECT",
    "NAME_IDENTITY",
    "NAME_MARGINAL",
    "NAME_MARGINAL_LS",
    "NAME_TREE",
    "TREE_BRANCHING",
    "Baseline",
    "baselines",
    "baselines_for_plan",
    "direct_baseline",
    "evaluate_factorization",
    "identity_baseline",
    "is_range_workload",
    "marginal_baselines",
    "tree_baseline",
    "tree_strategy",
]

#: Branching factors tried for the hierarchical strategy (Qardaji et al. 2013 find b ≈ 16
#: best for large N with the consistent estimator; small N favours small b).

NAME_DIRECT = "W directly"
NAME_IDENTITY = "histogram (identity strategy)"
NAME_TREE = "hierarchical tree"
NAME_MARGINAL = "marginal tables"
NAME_MARGINAL_LS = "marginal tables + least squares"


@dataclass(frozen=True)
class Baseline:
    """One row of the comparison table.

    ``applies`` False means the strategy was not evaluated (``reason`` says why; all numbers
    are None). Otherwise: ``strategy_rows`` m; ``sensitivity`` the strategy's sensitivity
    before lattice inflation (norm ``sensitivity_norm``, ``sensitivity_exact`` False when it is
    the replace bound ``2 × add/remove``); ``noise_family`` / ``noise_scale`` (σ, b or the
    K-norm radius scale; ``noise`` holds the full ``NoiseSpec.to_dict()``: grid, inflated
    sensitivity, accounting); ``per_query_std`` (length k, read-only) ``= √v·||r_i||``;
    ``rmse = √v·||R||_F/√k``; ``max_std = √v·||R||_{2→∞}``; ``expected_max_bound`` as in
    ``kinds.factorization.plan.expected_error`` (rounding bias included for lattice noise); ``residual``
    ``max |R A − W|`` (the reconstruction is exact up to rounding); ``params`` extra facts
    (e.g. the branching factor of the tree).
    """

    name: str
    description: str
    applies: bool
    reason: str = ""
    strategy_rows: int | None = None
    sensitivity: float | None = None
    sensitivity_norm: str | None = None
    sensitivity_exact: bool | None = None
    noise_family: str | None = None
    noise_scale: float | None = None
    per_query_std: np.ndarray | None = field(default=None, compare=False, repr=False)
    rmse: float | None = None
    max_std: float | None = None
    expected_max_bound: float | None = None
    residual: float | None = None
    noise: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    params: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """JSON-compatible summary; the per-query array only when ``per_query`` is True."""
        out: dict[str, Any] = {
            "name": self.name, "description": self.description, "applies": self.applies,
            "reason": self.reason, "strategy_rows": self.strategy_rows,
            "sensitivity": self.sensitivity, "sensitivity_norm": self.sensitivity_norm,
            "sensitivity_exact": self.sensitivity_exact, "noise_family": self.noise_family,
            "noise_scale": self.noise_scale, "rmse": self.rmse, "max_std": self.max_std,
            "expected_max_bound": self.expected_max_bound, "residual": self.residual,
            "noise": None if self.noise is None else dict(self.noise),
            "params": dict(self.params),
        }
        if self.per_query_std is not None:
            out["per_query_std_min"] = float(self.per_query_std.min())
            out["per_query_std_mean"] = float(self.per_query_std.mean())
            if per_query:
                out["per_query_std"] = self.per_query_std.tolist()
        return out


def _skip(name: str, description: str, reason: str, **params: Any) -> Baseline:
    return Baseline(name=name, description=description, applies=False, reason=reason,
                    params=dict(params))


# ---------------------------------------------------------------------------------------
# calibration: the same steps as kinds.factorization.build.build_plan


def _family(guarantee: Any, noise_family: str | None) -> str:
    return noise_family or ("laplace" if guarantee.kind == "pure_dp" else "gaussian")


def evaluate_factorization(fact: Factorization, guarantee: Any,
                           relation: Neighbouring | str = "add_remove", *, exact: bool = True,
                           noise_family: str | None = None, name: str = "strategy",
                           description: str = "", W_dense: np.ndarray | None = None,
                           params: dict[str, Any] | None = None) -> Baseline:
    """Calibrate noise for the strategy of ``fact`` as ``build_plan`` would, and its error.

    ``Δ = kron_sensitivity(A factors, "l1" for Laplace else "l2", relation)``; with ``exact``
    (and not the K-norm) the grid ``γ = choose_grid(Δ, m, norm)``; ``noise =
    calibrate(guarantee, Δ, grid=γ, dim=m, relation, family)``; the error is
    ``model.expected_error(fact, noise)``. ``W_dense``, when given, is used for the residual
    ``max |R A − W|``. A zero-sensitivity strategy (no noise needed; ``build_plan`` refuses
    it) gives ``applies=False``.
    """
    residual = None
    if W_dense is not None:
        residual = (float(np.max(np.abs(fact.R_dense() @ fact.A_dense() - W_dense)))
                    if W_dense.size else 0.0)
    return _evaluate(fact.A_factors, fact, guarantee, relation, exact=exact,
                     noise_family=noise_family, name=name, description=description,
                     residual=residual, params=params)


def _unit_rows_proxy(k: int) -> Factorization:
    """A factorization whose R has the same error summary as ``R = I_k`` without k² entries.

    ``expected_error`` reads R only through k, its row 2-norms and 1-norms and its Frobenius
    norm; the k×1 all-ones column has unit rows (2- and 1-norm 1) and Frobenius norm √k,
    exactly like ``I_k``. Used for the error of ``R = I`` only; the sensitivity is always
    computed from the real strategy.
    """
    return Factorization.dense(np.ones((k, 1)), np.ones((1, 1)))


def _evaluate(A_factors: Sequence[np.ndarray], error_fact: Factorization, guarantee: Any,
              relation: Neighbouring | str, *, exact: bool, noise_family: str | None,
              name: str, description: str, residual: float | None,
              params: dict[str, Any] | None) -> Baseline:
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    rel = Neighbouring.parse(relation)
    family = _family(g, noise_family)
    snorm = "l1" if family == "laplace" else "l2"
    m = math.prod(int(A.shape[0]) for A in A_factors)
    sens = kron_sensitivity(list(A_factors), snorm, rel)
    if not sens.value > 0:
        return _skip(name, description, f"the strategy has zero {snorm} sensitivity under "
                     f"{rel.key.replace('_', '/')} neighbours: its answers need no noise, and "
                     "a plan refuses such a strategy", **(params or {}))
    use_grid = exact and family != "l2_knorm"
    grid = choose_grid(sens.value, m, snorm) if use_grid else None
    try:
        spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                         sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=m,
                         relation=rel, family=family)
    except PrivacyError as exc:
        return _skip(name, description, f"cannot calibrate: {exc}", **(params or {}))
    noise = {**spec.to_dict(), "sensitivity_exact": sens.exact,
             "variance_bound": spec.variance_bound}
    err = expected_error(error_fact, spec)
    per_query = math.sqrt(spec.variance_bound) * error_fact.row_norms_R()
    per_query.setflags(write=False)
    return Baseline(
        name=name, description=description, applies=True, strategy_rows=int(m),
        sensitivity=float(sens.value), sensitivity_norm=snorm, sensitivity_exact=sens.exact,
        noise_family=spec.family, noise_scale=float(spec.scale), per_query_std=per_query,
        rmse=float(err["rmse"]), max_std=float(err["per_query_std_max"]),
        expected_max_bound=float(err["expected_max_bound"]), residual=residual,
        noise=noise, params=dict(params or {}),
    )


# ---------------------------------------------------------------------------------------
# helpers


def _dense_or_none(W: Workload, max_entries: int) -> np.ndarray | None:
    k, N = W.shape
    if k * N > max_entries:
        return None
    return W.dense(max_entries=max_entries)


def _too_large(what: str, entries: int, max_entries: int) -> str:
    return (f"{what} would have {entries:,} entries, more than the {max_entries:,} the report "
            "forms densely; not computed")


def _kron_parts(W: Workload, max_entries: int) -> list[np.ndarray] | None:
    """Dense Kronecker leaves of W when it has ≥ 2 leaves that each fit, else None."""
    leaves = kron_leaves(W)
    if len(leaves) < 2:
        return None
    if any(int(l.shape[0]) * int(l.shape[1]) > max_entries for l in leaves):
        return None
    return [l.dense(max_entries=max_entries) for l in leaves]


# ---------------------------------------------------------------------------------------
# 1. W directly, 2. identity strategy

_DESC_DIRECT = "Add noise to every query answer and publish the noisy answers as they are."
_DESC_IDENTITY = ("Add noise to every cell of the histogram and compute each query answer "
                  "from the noisy counts.")


def direct_baseline(W: Workload | str | np.ndarray, guarantee: Any,
                    relation: Neighbouring | str = "add_remove", *, exact: bool = True,
                    noise_family: str | None = None,
                    max_entries: int = DEFAULT_MAX_DENSE_ENTRIES) -> Baseline:
    """``A = W, R = I_k``: per-query std ``√v`` for every query, sensitivity of W's columns.

    A Kronecker workload keeps its factors (``A = ⊗W_j``: sensitivities via
    ``kron_sensitivity`` as for a Kronecker plan), so W need not fit in memory. ``R A = W``
    holds exactly (residual 0).
    """
    W = as_workload(W)
    k, N = W.shape
    if k > max_entries:
        return _skip(NAME_DIRECT, _DESC_DIRECT, _too_large("the per-query error vector", k,
                                                           max_entries))
    parts = _kron_parts(W, max_entries)
    if parts is None:
        Wd = _dense_or_none(W, max_entries)
        if Wd is None:
            return _skip(NAME_DIRECT, _DESC_DIRECT, _too_large("W", k * N, max_entries))
        parts = [Wd]
    return _evaluate(parts, _unit_rows_proxy(k), guarantee, relation, exact=exact,
                     noise_family=noise_family, name=NAME_DIRECT, description=_DESC_DIRECT,
                     residual=0.0, params={"kron_factors": len(parts)})


def identity_baseline(W: Workload | str | np.ndarray, guarantee: Any,
                      relation: Neighbouring | str = "add_remove", *, exact: bool = True,
                      noise_family: str | None = None,
                      max_entries: int = DEFAULT_MAX_DENSE_ENTRIES) -> Baseline:
    """``A = I_N, R = W``: per-query std ``√v·||w_i||₂``; sensitivity 1 (add/remove, L1 and
    L2), √2 (replace, L2) or 2 (replace, L1). Kronecker workloads keep their factors."""
    W = as_workload(W)
    k, N = W.shape
    if k > max_entries:
        return _skip(NAME_IDENTITY, _DESC_IDENTITY,
                     _too_large("the per-query error vector", k, max_entries))
    parts = _kron_parts(W, max_entries)
    if parts is not None:
        if any(P.shape[1] * P.shape[1] > max_entries for P in parts):
            return _skip(NAME_IDENTITY, _DESC_IDENTITY,
                         _too_large("an identity factor", max(P.shape[1] ** 2 for P in parts),
                                    max_entries))
        fact = Factorization(tuple(parts), tuple(np.eye(P.shape[1]) for P in parts))
    else:
        Wd = _dense_or_none(W, max_entries)
        if Wd is None:
            return _skip(NAME_IDENTITY, _DESC_IDENTITY, _too_large("W", k * N, max_entries))
        if max_entries < N * N:
            return _skip(NAME_IDENTITY, _DESC_IDENTITY,
                         _too_large("the identity strategy", N * N, max_entries))
        fact = Factorization.dense(Wd, np.eye(N))
    # R A = W · I = W exactly: residual 0 (no N×N product formed).
    return _evaluate(fact.A_factors, fact, guarantee, relation, exact=exact,
                     noise_family=noise_family, name=NAME_IDENTITY, description=_DESC_IDENTITY,
                     residual=0.0, params={"kron_factors": len(fact.A_factors)})


# ---------------------------------------------------------------------------------------
# 3. hierarchical tree for 1-D ranges


def _tree_rows(N: int, b: int) -> int:
    L = 0
    while b ** L < N:
        L += 1
    return sum(-(-N // b ** (L - level)) for level in range(L + 1))


_DESC_TREE = ("Add noise to the counts of a tree of nested intervals with {b} children per node "
              "(each record is counted once per level) and answer every range by least "
              "squares over all levels.")


def tree_baseline(W: Workload | str | np.ndarray, guarantee: Any,
                  relation: Neighbouring | str = "add_remove", *, exact: bool = True,
                  noise_family: str | None = None,
                  branching: Sequence[int] = TREE_BRANCHING,
                  max_entries: int = DEFAULT_MAX_DENSE_ENTRIES) -> Baseline:
    """The best b-ary tree (smallest RMSE, ties to the smaller b) with ``R = W A⁺``.

    ``A = tree_strategy(N, b)`` has full column rank (its last level is ``I_N``), so
    ``A⁺ = (AᵀA)⁻¹Aᵀ`` and ``R = W (AᵀA)⁻¹ Aᵀ`` — computed by a Cholesky solve with the
    N×N Gram matrix — is the least-squares ("consistent") estimator of Hay et al. 2010:
    ``R(Ah + Z) = W ĥ`` with ``ĥ = argmin_x ||A x − (A h + Z)||₂``. Applies only to 1-D range
    workloads (:func:`is_range_workload`).
    """
    import scipy.sparse as sp
    from scipy.linalg import cho_factor, cho_solve

    W = as_workload(W)
    k, N = W.shape
    generic = _DESC_TREE.format(b="b")
    Wd = _dense_or_none(W, max_entries)
    if Wd is None:
        return _skip(NAME_TREE, generic, _too_large("W", k * N, max_entries))
    if not is_range_workload(Wd):
        return _skip(NAME_TREE, generic, "not a 1-D range workload (some row of W is not a "
                     "contiguous run of ones); the hierarchical strategy is for range queries")
    results: dict[int, Baseline] = {}
    skipped: dict[int, str] = {}
    for b in sorted({int(x) for x in branching}):
        m = _tree_rows(N, b)
        if m * N > max_entries or k * m > max_entries:
            skipped[b] = _too_large(f"the {b}-ary tree or its reconstruction",
                                    max(m * N, k * m), max_entries)
            continue
        A = tree_strategy(N, b)
        As = sp.csr_matrix(A)  # 0/1 with N·(L+1) ones: sparse products are cheap
        G = (As.T @ As).toarray()
        Y = cho_solve(cho_factor(G, lower=False), Wd.T)  # (AᵀA)⁻¹ Wᵀ, N×k
        R = np.ascontiguousarray((As @ Y).T)  # W (AᵀA)⁻¹ Aᵀ, k×m
        residual = float(np.max(np.abs((As.T @ R.T).T - Wd))) if Wd.size else 0.0
        levels = int(A[:, 0].sum())
        results[b] = _evaluate(
            (A,), Factorization.dense(R, A), guarantee, relation, exact=exact,
            noise_family=noise_family, name=NAME_TREE, description=_DESC_TREE.format(b=b),
            residual=residual, params={"branching": b, "levels": levels})
    usable = {b: r for b, r in results.items() if r.applies}
    if not usable:
        reasons = [f"b={b}: {r.reason}" for b, r in results.items()] + \
                  [f"b={b}: {why}" for b, why in skipped.items()]
        return _skip(NAME_TREE, generic, "; ".join(reasons) or "no branching factor given")
    best_b = min(usable, key=lambda b: (usable[b].rmse, b))
    best = usable[best_b]
    params = dict(best.params)
    params["rmse_by_branching"] = {b: r.rmse for b, r in sorted(usable.items())}
    if skipped:
        params["skipped_branching"] = dict(skipped)
    return dataclasses.replace(best, params=params)


# ---------------------------------------------------------------------------------------
# 4. marginal tables

_DESC_MARGINAL = "Add noise to every cell of each marginal table and publish the noisy tables."
_DESC_MARGINAL_LS = ("Add noise to every cell of each marginal table, then make the tables agree "
                     "with each other by least squares before publishing them.")


def marginal_baselines(W: Workload | str | np.ndarray, guarantee: Any,
                       relation: Neighbouring | str = "add_remove", *, exact: bool = True,
                       noise_family: str | None = None,
                       max_entries: int = DEFAULT_MAX_DENSE_ENTRIES) -> list[Baseline]:
    """Per-table measurement ``A = W`` with ``R = I_k`` and with ``R = W W⁺``.

    ``W W⁺ = U_r U_rᵀ`` (U_r: left singular vectors of W for its r nonzero singular values)
    is the orthogonal projector onto range(W); ``R A = W W⁺ W = W``. The rank r is the exact
    ``Σ_{T in the closure} dim_T`` of the marginal algebra (``gram_eigenvalues``), not a
    numerical tolerance. Applies when ``marginal_algebra.marginal_family(W)`` recognises W.
    """
    from factorize.planner.marginal_algebra import gram_eigenvalues, marginal_family, subset_dim

    W = as_workload(W)
    k, N = W.shape
    family = marginal_family(W)
    if family is None:
        why = ("not a marginal workload (not a stack of Kronecker products of identities and "
               "all-ones rows)")
        return [_skip(NAME_MARGINAL, _DESC_MARGINAL, why),
                _skip(NAME_MARGINAL_LS, _DESC_MARGINAL_LS, why)]
    tables = len(family.subsets)
    Wd = _dense_or_none(W, max_entries)
    if Wd is None:
        why = _too_large("W", k * N, max_entries)
        return [_skip(NAME_MARGINAL, _DESC_MARGINAL, why, tables=tables),
                _skip(NAME_MARGINAL_LS, _DESC_MARGINAL_LS, why, tables=tables)]
    params = {"tables": tables, "subsets": [list(S) for S in family.subsets]}
    plain = _evaluate([Wd], _unit_rows_proxy(k), guarantee, relation, exact=exact,
                      noise_family=noise_family, name=NAME_MARGINAL, description=_DESC_MARGINAL,
                      residual=0.0, params=params)
    if k * k > max_entries or k * N > max_entries:
        ls = _skip(NAME_MARGINAL_LS, _DESC_MARGINAL_LS,
                   _too_large("the k×k projector", k * k, max_entries), **params)
        return [plain, ls]
    rank = sum(subset_dim(family.sizes, t) for t, lam in gram_eigenvalues(family).items()
               if lam > 0)
    U, _, _ = np.linalg.svd(Wd, full_matrices=False)
    Ur = U[:, :rank]
    P = Ur @ Ur.T
    ls = evaluate_factorization(Factorization.dense(P, Wd), guarantee, relation, exact=exact,
                                noise_family=noise_family, name=NAME_MARGINAL_LS,
                                description=_DESC_MARGINAL_LS, W_dense=Wd,
                                params={**params, "rank": int(rank)})
    return [plain, ls]


# ---------------------------------------------------------------------------------------
# all of them


def baselines(W: Workload | str | np.ndarray, guarantee: Any,
              relation: Neighbouring | str = "add_remove", *, exact: bool = True,
              max_entries: int = DEFAULT_MAX_DENSE_ENTRIES,
              noise_family: str | None = None,
              branching: Sequence[int] = TREE_BRANCHING) -> list[Baseline]:
    """The comparison table: W directly, identity, best tree, marginal tables (plain, LS).

    ``W``: a workload, spec string or matrix. ``guarantee``: a Guarantee or its text
    (``"epsilon=1,delta=1e-6"``, ``"rho=0.5"``, ``"epsilon=1"``). ``relation``:
    ``"add_remove"`` or ``"replace"``. ``exact``: lattice noise on ``rules.choose_grid``'s grid
    (the default of ``build_plan``) or floating-point noise. ``noise_family``: as in
    ``build_plan`` (default Gaussian, Laplace for pure DP). Always five entries, in that order;
    the ones that do not apply have ``applies=False`` and a ``reason``.
    """
    W = as_workload(W)
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    rel = Neighbouring.parse(relation)
    out = [direct_baseline(W, g, rel, exact=exact, noise_family=noise_family, max_entries=max_entries),
           identity_baseline(W, g, rel, exact=exact, noise_family=noise_family, max_entries=max_entries),
           tree_baseline(W, g, rel, branching=branching, exact=exact, noise_family=noise_family,
                         max_entries=max_entries)]
    out.extend(marginal_baselines(W, g, rel, exact=exact, noise_family=noise_family,
                                  max_entries=max_entries))
    return out


def baselines_for_plan(plan: Any, **kwargs: Any) -> list[Baseline]:
    """:func:`baselines` with a plan's workload, guarantee, relation, noise family and sampler
    (exact lattice noise unless the plan's sampler is ``"float"``)."""
    from factorize.plan.embedded import plan_workload

    W = plan_workload(plan)
    kwargs.setdefault("exact", plan.noise.is_exact)
    kwargs.setdefault("noise_family", plan.noise.family)
    return baselines(W, plan.guarantee, plan.relation, **kwargs)
