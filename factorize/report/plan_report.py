"""A plan → :class:`~factorize.report.model.Report` (``factorize report FILE.plan``).

Every plan kind has its report (:func:`plan_report` dispatches on the plan's class): dense /
Kronecker factorization plans and structured plans (every family of
``structured.families.FAMILY_NAMES``) share one (:func:`_factorization_report`, read through
:class:`_Accuracy`), projection plans and local plans have their own. Every number quoted is
read from the plan (its ``expected_error``, certificate — ``bounds`` of a dense plan,
``certificate`` of a structured one —, ``noise``) or derived from its stored arrays by the
plan's own functions (per-query standard deviations ``√v·‖r_i‖``: ``Factorization.row_norms_R``
and the noise's ``NoiseSpec.variance_bound`` for a dense plan, the reconstruction's exact row
norms and the plan's stated ``expected_error.noise_variance`` for a structured one) — never
re-solved — so the report cannot drift from the plan; what a kind does not carry (a
structured plan has no stored residual or post-processing) is not shown. New quantities
(error at other dataset sizes, baselines) are computed on the spot and labelled as such.

Every kind's report lists the workload's named tables (``executor.labels``) with their
precision — standard error smallest, largest and RMS over each table's cells, and the hint when
the smallest table comes out the least precise (``executor.precision``) —, or, for the kinds
that state no per-query deviation (projection, local), says so with the error they do state.
A ρ-zCDP guarantee is also given as (ε, δ) at the δ of :data:`DELTAS` (``privacy.zcdp``'s
conversions, :func:`zcdp_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model import Figure, Report, Section, paged

#: Dataset sizes for the error-vs-n figure.
NS = np.array([10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000])
#: Above this many queries the per-query plot is skipped (the numbers are still given).
MAX_PLOTTED_QUERIES = 200_000


#: The δ at which a ρ-zCDP guarantee is stated as (ε, δ)-DP (:func:`zcdp_rows`).
DELTAS = (1e-5, 1e-6, 1e-8, 1e-10)


def guarantee_words(g: Any, relation: str) -> str:
    """The guarantee (a ``privacy.Guarantee``) under ``relation`` (``"add_remove"``,
    ``"replace"``, or a local release's ``"local …"``) in plain words; a ρ-zCDP guarantee
    with its ε at δ = 10⁻⁶ (:func:`zcdp_rows` gives more)."""
    from factorize.privacy.zcdp import zcdp_epsilon

    who = ("adding or removing one person's record" if relation == "add_remove"
           else "changing one user's record to any other (each user's message on its own: the "
                "collector is not trusted)" if relation.startswith("local")
           else "replacing one person's record by another (the number of records n is public)")
    if g.kind == "approx_dp":
        eps, delta = g.epsilon, g.delta
        return (f"(ε, δ)-differential privacy with ε = {eps:g} and δ = {delta:g}: {who} changes the "
                f"probability of any set of outputs by at most a factor e^ε ≈ {math.exp(eps):.3g}, "
                f"plus an additive δ = {delta:g}.")
    if g.kind == "zcdp":
        rho = g.rho
        return (f"ρ-zero-concentrated differential privacy with ρ = {rho:g} under {who}; it implies "
                f"(ε, δ)-DP for every δ > 0 — e.g. ε = {zcdp_epsilon(rho, 1e-6):.4g} at δ = 10⁻⁶ "
                "(the table below gives other δ).")
    eps = g.epsilon
    return (f"pure ε-differential privacy with ε = {eps:g}: {who} changes the probability of any "
            f"set of outputs by at most a factor e^ε ≈ {math.exp(eps):.3g}, with no additive slack.")


def zcdp_rows(rho: float) -> list[list[str]]:
    """What ρ-zCDP means as (ε, δ)-DP at each δ of :data:`DELTAS`: a table (header first) of
    the ε of Canonne, Kamath & Steinke 2020, Cor. 13 (``privacy.zcdp.zcdp_epsilon``, the
    tighter) and of Bun & Steinke 2016, Prop. 1.3, ``ε = ρ + 2√(ρ ln(1/δ))``
    (``privacy.zcdp.zcdp_to_approx_dp``)."""
    from factorize.privacy.zcdp import zcdp_epsilon, zcdp_to_approx_dp

    rows = [["δ", "ε (Canonne, Kamath & Steinke 2020, Cor. 13)", "ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016)"]]
    rows += [[f"{d:g}", f"{zcdp_epsilon(rho, d):.4g}", f"{zcdp_to_approx_dp(rho, d):.4g}"] for d in DELTAS]
    return rows


ZCDP_NOTE = ("A ρ-zCDP guarantee holds as (ε, δ)-DP for every δ at once, each δ with its ε (the "
             "table): choose δ well below 1/n, n the number of records. Both conversions are valid; "
             "the first is the tighter.")


def noise_words(n: Any, m: int) -> str:
    """The noise (a ``privacy.NoiseSpec``) in plain words."""
    fam = {"gaussian": "Gaussian", "laplace": "Laplace", "l2_knorm": "ℓ2-ball K-norm"}[n.family]
    sampler = {"discrete_gaussian": f"sampled exactly as a discrete Gaussian on the grid "
                                    f"{n.grid or 0:.3g}·ℤ (Canonne–Kamath–Steinke 2020)",
               "discrete_laplace": f"sampled exactly as a discrete Laplace on the grid "
                                   f"{n.grid or 0:.3g}·ℤ",
               "float": "sampled in floating point (not exact: the executor refuses it unless "
                        "--allow-float-noise)"}[n.sampler]
    return (f"{fam} noise of scale {n.scale:.6g} is added once to each of the m = {m} measured "
            f"values, calibrated to their {n.sensitivity_norm.upper()} sensitivity "
            f"{n.sensitivity:.6g} (one record's largest possible influence), {sampler}, from "
            "the operating system's randomness.")


def _grid_shape(W: Any) -> tuple[int, int] | None:
    """(rows of factor 0, rows of factor 1) when W is a product of exactly two Kronecker
    factors: the per-query plot draws its answers as that grid."""
    from workloads.structured import kron_leaves

    leaves = kron_leaves(W)
    if len(leaves) == 2:
        return int(leaves[0].shape[0]), int(leaves[1].shape[0])
    return None


def _grid_axes(tables: list[Any], grid: tuple[int, int] | None
               ) -> tuple[str, list[str], str, list[str]] | None:
    """The value labels of the per-query heat map's axes — (row attribute, row labels, column
    attribute, column labels) — when the workload is one table whose two columns are the grid's
    rows and columns (``executor.labels.Column``: the first steps every c rows, the second every
    row); None otherwise (the axes then show query indices)."""
    if grid is None or len(tables) != 1 or len(tables[0].columns) != 2:
        return None
    r, c = grid
    first, second = tables[0].columns
    if first.stride != c or second.stride != 1:
        return None
    rows = [str(first.texts[i]) for i in first.indices(0, r * c)[::c]]
    cols = [str(second.texts[i]) for i in second.indices(0, c)]
    return first.name, rows, second.name, cols


def _precision_section(plan: Any, W: Any, numbers: dict[str, Any], no_std: str,
                       std: np.ndarray | None = None) -> Section:
    """Every table of the workload (``executor.labels``: its name and cells) with its standard
    errors — smallest, largest, RMS over its cells (``executor.precision.table_precision``, the
    plan's own per-query deviations) — and the hint when the smallest table comes out the least
    precise (``precision_hint``). A kind that states no per-query deviation (projection,
    local) lists the tables and says ``no_std`` instead; ``std``: the plan's per-query
    deviations when the caller has them. Adds ``tables`` (and
    ``precision_hint``) to ``numbers``."""
    from dataclasses import asdict

    from factorize.executor.labels import workload_tables
    from factorize.executor.precision import precision_hint, table_precision, target_lines

    try:
        prec = table_precision(plan, W, std)
    except NotImplementedError:
        tables = workload_tables(W, plan.domain)
        numbers["tables"] = [{"name": t.name, "cells": t.rows} for t in tables]
        rows = [["table", "cells"]] + [[t.name, f"{t.rows:,}"] for t in tables]
        paras = [f"The workload has {len(tables):,} tables. {no_std}"]
        return Section("Precision per table", paras, **paged(rows, "tables"))
    numbers["tables"] = [asdict(t) for t in prec]
    hint = precision_hint(prec)
    numbers["precision_hint"] = hint
    rows = [["table", "cells", "std min", "std max", "std RMS"]]
    rows += [[t.name, f"{t.cells:,}", f"{t.std_min:.4g}", f"{t.std_max:.4g}", f"{t.std_rms:.4g}"]
             for t in prec]
    paras = [f"The workload has {len(prec):,} tables, each named by the attributes it crosses and "
             "its form (or the name the spec gives). The standard error of every answer of a "
             "table, in counts: smallest, largest and root mean square over its cells (the "
             "plan's own per-query deviations)."]
    estimates = _estimate_words(plan)
    if estimates is not None:
        numbers["estimates"] = estimates
        paras.append(f"Estimates: {estimates}.")
    targets = target_lines(plan, prec)
    if targets:  # per-table weights or targets (plan.table_targets): the plan measures D·W
        numbers["table_targets"] = targets
        paras.append("The plan was made for per-table " + ("weights" if targets[0].startswith("weights")
                     else "targets") + ": it measures the workload with each table's rows scaled "
                     "by d_t (√weight, or 1/target SE) and releases the unscaled answers; the "
                     "errors above are those of the released answers. " + " ".join(
                         " ".join(line.split()) + "." for line in targets))
    elif hint is not None:
        paras.append(f"Hint: {hint}.")
    return Section("Precision per table", paras, **paged(rows, "tables"))


def _estimate_words(plan: Any) -> str | None:
    """How a linear plan's answers are estimated (issue 29 item 2): one least-squares estimate
    for a dense or Kronecker factorization (R = W·A⁺) and the structured families that have it,
    separate per block for the others (``structured.families.estimate_words``); None for the
    kinds without a reconstruction (projection, local, training)."""
    from factorize.structured.families import ONE_ESTIMATE, estimate_words

    kind = getattr(plan, "plan_kind", None)
    if kind == "structured":
        return estimate_words(plan.family)
    return ONE_ESTIMATE if kind == "factorization" else None


def plan_report(plan: Any, *, baselines: bool = True) -> Report:
    """The report of any plan kind: factorization (dense or structured), projection, local,
    training; a plan of another kind is refused (``ReportError``), never drawn as another's."""
    from factorize.kinds.local.plan import LocalPlan
    from factorize.kinds.projection.plan import ProjectionPlan
    from factorize.kinds.structured.plan import StructuredPlan

    kind = getattr(type(plan), "plan_kind", None)
    if kind == "training":
        return _training_report(plan)
    if kind not in ("factorization", "structured", "projection", "local"):
        from .errors import ReportError

        raise ReportError(f"no plan report for a plan of kind {kind!r}")
    if isinstance(plan, ProjectionPlan):
        return _projection_report(plan)
    if isinstance(plan, LocalPlan):
        return _local_report(plan)
    if isinstance(plan, StructuredPlan):
        return _factorization_report(plan, _structured_accuracy(plan), baselines=baselines)
    return _factorization_report(plan, _dense_accuracy(plan), baselines=baselines)


@dataclass(frozen=True)
class _Accuracy:
    """What the factorization report reads from a dense or a structured plan.

    ``bounds``: the certificate (``norm``, ``upper`` — at least the value this plan achieves —,
    ``lower``, ``gap``, and where the kind has them ``residual``, ``laplace_factorization``,
    ``any_mechanism``, ``symmetry`` — a structured plan's symmetry-reduced lower bound);
    ``m``: the number of measurements; ``std``: each answer's standard deviation; ``eta``: the
    approximate factorization's η (None: exact up to rounding);
    ``witness``: how the lower bound is certified; ``strategy``: a sentence on the strategy
    (structured plans), ``postprocess``: the dense plan's post-processing."""

    bounds: dict[str, Any]
    m: int
    std: np.ndarray
    eta: float | None
    witness: str
    strategy: str | None = None
    postprocess: dict[str, Any] = field(default_factory=dict)


def _dense_accuracy(plan: Any) -> _Accuracy:
    """A dense / Kronecker plan: ``bounds``, std ``√v·‖r_i‖`` with v the noise's variance bound."""
    from factorize.executor.precision import per_query_std

    std = per_query_std(plan)
    return _Accuracy(bounds=plan.bounds, m=plan.strategy_rows, std=std, eta=plan.certificate.eta,
                     witness="a witness re-checked by one SVD per Kronecker factor",
                     postprocess=plan.postprocess or {})


def _structured_accuracy(plan: Any) -> _Accuracy:
    """A structured plan: its ``certificate`` (upper ≥ the value the plan achieves), std
    ``√v·‖r_i‖`` from the reconstruction's exact row norms, v the variance of the noise the
    sampler draws (the plan's ``expected_error.noise_variance``, as its own statements)."""
    from factorize.executor.precision import per_query_std
    from factorize.structured.families import codec

    c = plan.certificate
    std = per_query_std(plan)
    s = plan.strategy
    strategy = (f"The strategy is {codec(plan.family).words}: {len(s.blocks)} Kronecker blocks, "
                f"m = {s.m} measurements computed from {len(s.supports())} marginal tables of the "
                "records — the histogram over all cells is never formed.")
    return _Accuracy(bounds=dict(c), m=int(s.m), std=std, eta=None,
                     witness=f"re-checked by `factorize verify`: {c['method']}", strategy=strategy)


def _header(plan: Any, mechanism: str) -> tuple[str, str]:
    """The report's title (the workload spec) and subtitle (mechanism, shape, domain,
    fingerprint)."""
    k, N = plan.shape
    dom = ", ".join(f"{a} ({s})" for a, s in zip(plan.domain.attributes, plan.domain.sizes, strict=True))
    return (f"Mechanism plan: {plan.workload['spec']}",
            f"{mechanism} mechanism · {k} queries over {N} cells · domain {dom} · "
            f"workload fingerprint {plan.workload['fingerprint'][:16]}…")


def privacy_section(title: str, guarantee: Any, relation: str, paragraphs: list[str]) -> Section:
    """The guarantee in words (:func:`guarantee_words`) then ``paragraphs``; for ρ-zCDP, what ρ
    means as (ε, δ) (:func:`zcdp_rows`)."""
    zcdp = guarantee.kind == "zcdp"
    return Section(title, [guarantee_words(guarantee, relation), *paragraphs,
                           *([ZCDP_NOTE] if zcdp else [])],
                   table=zcdp_rows(guarantee.rho) if zcdp else None)


def _search_section(record: Any) -> Section | None:
    """The strategy search's table (``provenance.strategy_search``, re-checked by verify)."""
    if not isinstance(record, dict):
        return None
    rows = [["family", "score", "seconds", "note"]]
    for r in record.get("tried") or []:
        s = r.get("score")
        rows.append([str(r.get("family")), f"{s:.6g}" if isinstance(s, (int, float)) else "—",
                     f"{float(r.get('seconds') or 0.0):.2f}",
                     "chosen" if r.get("family") == record.get("chosen") else
                     (f"failed: {str(r.get('failed'))[:120]}" if s is None else "")])
    for r in record.get("not_applicable") or []:
        rows.append([str(r.get("family")), "—", "—", f"did not apply: {str(r.get('why'))[:160]}"])
    objective = record.get("objective")
    what = {"rmse": "RMSE over all queries", "per_query_std_max":
            "largest per-query standard deviation"}.get(objective, "error") \
        if isinstance(objective, str) else "error"
    return Section("Strategy search", [
        f"The planner tried every strategy family that applies to this workload and kept "
        f"{record.get('chosen')}, the least {what} under this plan's own noise (seed "
        f"{record.get('seed')} for the seeded searches). `factorize verify` re-derives the chosen "
        "score and refuses a plan that states another family better."], table=rows)


def _factorization_report(plan: Any, acc: _Accuracy, *, baselines: bool) -> Report:
    """A factorization plan, dense or structured (``acc``: what the kind carries)."""
    from factorize.plan.embedded import plan_workload

    from . import plots

    k, N = plan.shape
    mech = plan.provenance.get("mechanism", "factorization")
    title, subtitle = _header(plan, mech if acc.strategy is None else f"structured {mech} ({plan.family})")
    W = plan_workload(plan)
    e, b, n = plan.expected_error, acc.bounds, plan.noise
    std = acc.std
    numbers: dict[str, Any] = {
        "rmse": e["rmse"], "per_query_std_max": e["per_query_std_max"],
        "per_query_std_min": e["per_query_std_min"], "expected_max_bound": e["expected_max_bound"],
        "upper": b["upper"], "lower": b["lower"], "gap": b["gap"], "noise_scale": n.scale,
        "sensitivity": n.sensitivity, "strategy_rows": acc.m,
    }
    sections = [privacy_section("Privacy guarantee and noise", plan.guarantee, plan.relation.key, [
        noise_words(n, acc.m), *([acc.strategy] if acc.strategy else []),
        (f"The answers are R·(A·h + noise): an estimate of every query with the per-query "
         f"standard deviations below and a bias of at most {e['bias_per_record']:.3g}·n (n the "
         f"number of records): |W − R·A| ≤ {e['bias_per_record']:.3g} entrywise, certified by "
         f"`factorize verify`" + (" — the approximate factorization's η" if acc.eta
                                  else ", rounding level") + "."
         if e.get("bias_per_record") is not None else
         f"The answers are R·(A·h + noise): an unbiased estimate of every query, with the "
         f"per-query standard deviations below (the factorization W = R·A is checked to "
         f"{b['residual']:.1e} by `factorize verify`)."),
    ])]

    norm = b["norm"]
    quantity = {"gamma_f": ("γ_F", "the root-mean-square error over all queries", e["rmse"]),
                "gamma_2": ("γ₂", "the largest per-query standard deviation", e["per_query_std_max"]),
                "approx_gamma_2": ("γ₂(·; η)", "the largest per-query standard deviation",
                                   e["per_query_std_max"])}[norm]
    sym, what, value = quantity
    binds = n.family == "gaussian" and plan.relation.key == "add_remove"
    choice = plan.provenance.get("strategy_choice") or {}
    table = [["quantity", "value"], ["upper bound (this plan)", f"{b['upper']:.10g}"],
             ["lower bound (dual certificate)", f"{b['lower']:.10g}"], ["relative gap", f"{b['gap']:.3g}"]]
    if binds:
        best = value * b["lower"] / b["upper"] if b["upper"] > 0 else value
        numbers["factorization_floor"] = best
        cert = [
            f"Upper bound {b['upper']:.10g}, lower bound {b['lower']:.10g}, relative gap "
            f"{b['gap']:.3g} on {sym}, which is {what} per unit of noise.",
            f"What it means: the lower bound is a dual certificate ({acc.witness}). No factorization mechanism W = R·A with noise calibrated "
            f"to the same privacy guarantee can have a smaller {sym}: {what} is at least "
            f"{best:.6g}, and this plan achieves {value:.6g}"
            + (" — it is optimal to within the gap." if mech == "factorization" else
               f" — the {mech} mechanism is {b['upper'] / b['lower']:.3g}× the optimum's {sym}."),
        ]
        if isinstance(b.get("symmetry"), dict):
            cert.append("The lower bound is the γ_F dual reduced by the workload's symmetries "
                        "(permutations of values inside each attribute's twin classes; "
                        "factorize.structured.symmetry): at its optimum it is γ_F(W) itself, "
                        "so the gap measures this strategy against the best possible one.")
        if isinstance(b.get("subspace"), dict):
            cert.append("The lower bound is a trace-norm witness split over subspaces that every "
                        "workload factor preserves (factorize.structured.subspace_bound): blocks "
                        "of the union are charged only for the directions they share. It is not "
                        "the optimum's dual, so the gap may overstate how far this plan is from "
                        "the best one.")
        table.append(["binds", f"every factorization mechanism with this guarantee ({sym})"])
    else:
        # the γ certificate is Gaussian add/remove's: it says nothing about optimality here
        cert = [f"The certificate bounds {sym} — the objective of Gaussian noise under add/remove "
                f"neighbours — between {b['lower']:.10g} and {b['upper']:.10g}. This plan adds "
                f"{n.family} noise calibrated to the {n.sensitivity_norm.upper()} sensitivity under "
                f"{plan.relation.key} neighbours, so the certificate does not bind this class of "
                "mechanisms and says nothing about this plan's optimality"
                + (f"; the plan took the best of {len(choice['candidates'])} candidate strategies "
                   f"by its own calibrated error: {choice['chosen']}." if choice.get("candidates")
                   else ".")]
        lap = b.get("laplace_factorization")
        if lap:
            own = e[lap["measure"]]
            numbers["laplace_factorization_floor"] = lap["value"]
            cert.append(f"What binds instead: {lap['bound']}. Every such mechanism has "
                        f"{lap['measure'].replace('_', ' ')} ≥ {lap['value']:.6g}; this plan "
                        f"{own:.6g} ({own / lap['value']:.3g}× that bound — the bound is not "
                        "known to be attainable).")
            table.append(["pure-DP lower bound (Laplace factorizations)", f"{lap['value']:.6g}"])
        table.append(["binds", f"Gaussian factorization mechanisms under add/remove neighbours "
                               f"({sym}) — not this plan's noise"])
    anyb = b.get("any_mechanism")
    if anyb:
        numbers["any_mechanism_lower"] = anyb["value"]
        cert.append(f"A weaker statement about every mechanism (not only factorizations): "
                    f"{anyb['bound']} gives RMSE ≥ {anyb['value']:.4g} per query for {anyb['binds']}. "
                    "Its constants are explicit but loose.")
    if (plan.workload or {}).get("table_targets") is not None:  # plan.table_targets
        cert.append("Per-table weights or targets: these numbers are those of the scaled workload "
                    "D·W the plan measures (each table's rows times its scale d_t), i.e. of the "
                    "weighted objective — Σ_t d_t²·(total variance of table t) for γ_F, "
                    "max_t d_t·(largest standard error of table t) for γ₂ —, not of the released "
                    "answers, whose errors the section on precision per table gives.")
    sections.append(Section("Certificate", cert, table=table))
    search = _search_section(plan.provenance.get("strategy_search"))
    if search is not None:
        sections.append(search)

    figs = []
    if k <= MAX_PLOTTED_QUERIES:
        from factorize.executor.labels import workload_tables

        tables = workload_tables(W, plan.domain)
        grid = _grid_shape(W)
        groups = None if grid or len(tables) < 2 else [(t.name, t.start, t.stop) for t in tables]
        figs.append(Figure(plots.per_query_std_plot(std, grid_shape=grid, labels=groups,
                                                    axes_labels=_grid_axes(tables, grid),
                                                    title="Standard deviation of each answer"),
                           "per-query standard deviation", "per_query_std"))
    emax_method = e.get("expected_max_method") or (
        "Gaussian tails: √v·max‖r_i‖·√(2 ln 2k) plus the rounding bias" if n.family == "gaussian"
        else "Jensen: √v·‖R‖_F plus the rounding bias")  # structured plans' rule (structured_plan)
    err = [f"Per-query standard deviation from {e['per_query_std_min']:.6g} to "
           f"{e['per_query_std_max']:.6g} (mean {e['per_query_std_mean']:.6g}); RMSE over all "
           f"queries {e['rmse']:.6g}; expected largest error over all {k} queries ≤ "
           f"{e['expected_max_bound']:.6g} ({emax_method}).",
           f"95% intervals: estimate ± {e['ci_multiplier']:.4g}·std ({e['ci_method']})"
           + (f" + rounding bias ≤ {e['rounding_bias_max']:.3g}" if e.get("rounding_bias_max") else "")
           + (f" + bias ≤ {e['bias_per_record']:.3g}·n⁺, n⁺ a bound on n taken from the release "
              "(it fails with probability 10⁻³; the noise term takes the rest of the 5%)"
              if e.get("bias_per_record") else "") + "."]
    sections.append(Section("Error of each answer", err, figures=figs))
    sections.append(_precision_section(plan, W, numbers, "", std))

    beta = float(e.get("bias_per_record") or 0.0)
    series = {"RMSE (counts)": np.full(NS.size, e["rmse"])}
    scaling = ["The noise does not depend on the data, so the error in counts is the same at "
               "every dataset size n; relative to n (answers as fractions) it falls like 1/n."]
    if beta * float(NS.max()) > 1e-3 * e["rmse"]:
        series["RMSE + bias β·n (bound)"] = np.sqrt(e["rmse"] ** 2 + (beta * NS) ** 2)
        scaling.append(f"The reconstruction has a bias of at most β·n, β = {beta:.3g} per record: "
                       "it grows with n, so relative to n the error tends to β, not to 0.")
    post = acc.postprocess
    if post.get("method") == "least_squares" and post.get("bound_coefficient") is not None:
        from factorize.kinds.factorization.plan import least_squares_rmse_bound

        lsb = np.array([least_squares_rmse_bound(post["bound_coefficient"], e["rmse"], float(x), k,
                                                 post["gap_tol"]) for x in NS])
        series["least-squares RMSE (bound)"] = lsb
        scaling.append("This plan projects the released answers onto n·conv{w_j} (least squares): "
                       "its error bound min(RMSE, √(c·n/k)) + √(2·gap/k) is smaller for small n "
                       "(the sparse regime), equal to the RMSE beyond.")
        numbers["least_squares_bound_coefficient"] = post["bound_coefficient"]
    sections.append(Section("Error and dataset size", scaling, figures=[Figure(
        plots.error_vs_n_plot(NS, series, title="Error vs dataset size", relative=True),
        "error vs dataset size", "error_vs_n")]))

    if baselines:
        sections.append(_baseline_section(plan, W, numbers, b.get("norm")))
    return Report(title, subtitle, sections, numbers)


def _baseline_section(plan: Any, W: Any, numbers: dict[str, Any], norm: str | None) -> Section:
    """This plan against the standard strategies (``report.baselines``, computed now with the
    plan's guarantee and relation); under γ_F, says so when one of them has a smaller worst
    per-query standard deviation. Adds the baselines' RMSEs to ``numbers``."""
    from . import plots
    from .baselines import baselines as compute

    e = plan.expected_error
    rows = [["mechanism", "RMSE", "max per-query std", "E[max error] ≤", "vs this plan (RMSE)"]]
    rows.append(["this plan", f"{e['rmse']:.6g}", f"{e['per_query_std_max']:.6g}",
                 f"{e['expected_max_bound']:.6g}", "1"])
    names, rmse, mx = ["this plan"], [e["rmse"]], [e["per_query_std_max"]]
    skipped = []
    for bl in compute(W, plan.guarantee, plan.relation):
        if not bl.applies:
            skipped.append(f"{bl.name}: {bl.reason}")
            continue
        rows.append([bl.name, f"{bl.rmse:.6g}", f"{bl.max_std:.6g}", f"{bl.expected_max_bound:.6g}",
                     f"{bl.rmse / e['rmse']:.3g}×"])
        names.append(bl.name)
        rmse.append(bl.rmse)
        mx.append(bl.max_std)
    numbers["baselines"] = {n_: r for n_, r in zip(names[1:], rmse[1:], strict=False)}
    paras = ["Standard strategies for the same workload and guarantee, calibrated by the same "
             "functions as the plan (computed now, not stored in the plan)."]
    if skipped:
        paras.append("Not applicable: " + "; ".join(skipped) + ".")
    worse = [(nm, m) for nm, m in zip(names[1:], mx[1:], strict=False) if m < e["per_query_std_max"] * (1 - 1e-9)]
    if worse and norm == "gamma_f":
        nm, m = min(worse, key=lambda z: z[1])
        paras.append(f"On the worst query, {nm} beats this plan ({m:.6g} against "
                     f"{e['per_query_std_max']:.6g}): this plan minimises the RMSE over all queries "
                     "(γ_F). If the worst query matters, plan with `--norm gamma_2`, which minimises "
                     "the largest per-query standard deviation.")
        numbers["worst_query_beaten_by"] = nm
    figs = [Figure(plots.comparison_plot(names, np.array(rmse), np.array(mx), highlight=0,
                                         title="This plan against standard strategies"),
                   "comparison with baselines", "baselines")] if len(names) > 1 else []
    return Section("Comparison with standard strategies", paras, table=rows, figures=figs)


def _training_report(plan: Any) -> Report:
    """A training plan (``kinds.training``): the guarantee under its participation, the
    strategy's parameters, certified sensitivity, error per unit σ² and the certified lower
    bound — the plan's own statements, each re-derived by ``verify``."""
    o, lb, sens = plan.objective, plan.lower_bound, plan.sensitivity
    per = "total over the n steps" if o["reduction"] == "total" else "at the worst step"
    rows = [["quantity", "value"],
            ["steps n", f"{plan.n:,}"],
            ["participation", "each record in one step" if plan.participation is None else plan.participation.key],
            ["sensitivity Δ (certified)", f"{sens['value']:.12g}" + (" (exact)" if sens["exact"] else "")],
            ["noise σ per unit clipping norm", f"{plan.sigma:.12g}"],
            [f"error per unit σ² ({per})", f"{o['error']:.6g}"],
            ["error·Δ² (the objective)", f"{o['normalised']:.6g}"],
            ["certified lower bound on error·Δ²", f"{lb['value']:.6g}"],
            ["relative gap", f"{o['normalised'] / lb['value'] - 1:.3g}" if lb["value"] > 0 else "—"]]
    sections = [
        privacy_section("Privacy guarantee and noise", plan.guarantee, "add_remove", [
            f"Participation: {rows[2][1]}; the sensitivity is recomputed from the stored strategy "
            f"parameters ({sens['method']}).",
            "The noise is drawn step by step inside the training loop "
            "(`factorize.kinds.training.stream.open_stream`), charged to the ledger once."]),
        Section("Error and its certificate", [
            f"Lower bound: {lb['how']}."], table=rows)]
    return Report(f"Training plan: {plan.workload} over {plan.n:,} steps", " · ".join(plan.summary_lines()[:2]),
                  sections, {"sigma": plan.sigma, "sensitivity": sens["value"], "error": o["error"],
                             "lower_bound": lb["value"]})


def _projection_report(plan: Any) -> Report:
    """A projection plan (jl, covariance, relaxed projection): guarantee, noise and decoder,
    its RMSE bounds (this plan's upper bound, every mechanism's lower bound), and the upper
    bound at other dataset sizes where it can be re-evaluated."""
    from factorize.plan.embedded import plan_workload

    from . import plots

    k, N = plan.shape
    title, subtitle = _header(plan, plan.kind)
    b, n = plan.bounds, plan.noise
    numbers: dict[str, Any] = {"upper_rmse": b["upper_rmse"], "lower_rmse": b.get("lower_rmse"),
                               "noise_scale": n.scale, "sensitivity": n.sensitivity, "n": plan.n}
    sections = [privacy_section("Privacy guarantee and noise", plan.guarantee, plan.relation.key, [
        noise_words(n, int(n.dim)),
        f"Decoding (post-processing of the released values only): {plan.decoder['description']}.",
    ])]
    cert = [f"RMSE per query ≤ {b['upper_rmse']:.6g} ({b['upper_note']})."]
    rows = [["quantity", "value"], ["upper bound on RMSE per query", f"{b['upper_rmse']:.6g}"]]
    if b.get("lower_rmse") is not None:
        cert.append(f"Every mechanism with this guarantee has RMSE ≥ {b['lower_rmse']:.4g} on some "
                    f"dataset of n = {plan.n} records ({b['lower_note']}); explicit but loose "
                    "constants.")
        rows.append(["lower bound (any mechanism)", f"{b['lower_rmse']:.4g}"])
    cert.append("A projection mechanism's answers are not unbiased and have no per-query "
                "intervals: the bound above is on the root-mean-square error over the queries.")
    sections.append(Section("Error bounds", cert, table=rows))

    W = plan_workload(plan)
    sections.append(_precision_section(
        plan, W, numbers, "A projection mechanism states no per-query standard error: its "
        f"bound, RMSE ≤ {b['upper_rmse']:.6g} per query, is on the root-mean-square error over "
        "all queries of all tables together, and no table is promised more."))
    ns = NS[max(10 * plan.n, 1000) >= NS]
    curve = _projection_bound_curve(plan, W, ns)
    if curve is not None:
        sections.append(Section("Error and dataset size", [
            f"The bound at other dataset sizes (this plan is calibrated for n = {plan.n}; a plan "
            "for another n has its own projection and, for JL, its own ℓ)."],
            figures=[Figure(plots.error_vs_n_plot(ns, {"RMSE (bound)": curve},
                                                  title="Error bound vs dataset size", relative=True),
                            "error bound vs dataset size", "error_vs_n")]))
    return Report(title, subtitle, sections, numbers)


def _projection_bound_curve(plan: Any, W: Any, ns: np.ndarray) -> np.ndarray | None:
    """The per-query RMSE bound at each n of ``ns``: JL's explicit error bound at the plan's ℓ
    (the trivial bound where smaller), divided by √k, or, under Gaussian noise, the moment
    plans' bound from the stated measurement RMSE; None where neither applies."""
    if plan.kind == "jl":
        from factorize.geometry.jl import jl_error_bound, workload_diameter

        Wd = W.dense()
        norms, diam = np.linalg.norm(Wd, axis=0), workload_diameter(Wd)
        k = W.shape[0]
        out = []
        for x in ns:
            bd = jl_error_bound(int(plan.decoder["ell"]), float(x), plan.guarantee.epsilon, k,
                                norms, diameter=diam, relation=plan.relation.key,
                                fw_gap=plan.decoder["gap_tol"])
            out.append(min(bd.total, bd.trivial) / math.sqrt(k))
        return np.array(out)
    meas = plan.expected_error.get("measurement_rmse")
    if meas is None or plan.noise.family != "gaussian":
        return None
    from factorize.kinds.projection.plan import moment_layout

    lay = moment_layout(W)
    return np.array([lay.answer_rmse_bound(meas, float(x), plan.decoder["gap_tol"]) for x in ns])


def _local_report(plan: Any) -> Report:
    """A local-model plan: the randomizer, the certified γ₂(W; η), error vs number of users and
    the sample sizes (this plan's upper bound, every ε-LDP protocol's lower bound)."""
    from factorize.kinds.local.plan import predicted_errors

    from . import plots

    k, N = plan.shape
    title, subtitle = _header(plan, "local")
    b, r = plan.bounds, plan.randomizer
    numbers: dict[str, Any] = {"gamma2_upper": b["gamma2_upper"], "gamma2_lower": b["gamma2_lower"],
                               "eta": plan.eta, "predicted_max_error": b["predicted_max_error"],
                               "n_needed_upper": b.get("n_needed_upper"),
                               "n_needed_lower": b.get("n_needed_lower")}
    kind = {"l2": "the ℓ2 randomizer (Duchi–Jordan–Wainwright / Bhowmick et al.): a point of "
                  f"norm B = {r['scale']:.6g} on a random hemisphere around the user's vector",
            "gaussian": f"Gaussian noise of standard deviation {r['scale']:.6g}"}[r["kind"]]
    sections = [privacy_section("Privacy guarantee (local model)", plan.guarantee, "local", [
        f"Each user sends one message: the strategy column a_x ∈ R^{r['dim']} of their record "
        f"(‖a_x‖ ≤ 1), randomized by {kind}; it is unbiased, with per-coordinate variance ≤ "
        f"{r['variance']:.6g}. The server adds the messages and releases R·ΣY.",
    ])]
    rows = [["quantity", "value"], ["η (max |W − R·A|)", f"{plan.eta:.4g}"],
            ["γ₂(W; η) upper (this plan)", f"{b['gamma2_upper']:.10g}"],
            ["γ₂(W; η) lower (dual certificate)", f"{b['gamma2_lower']:.10g}"]]
    paras = [f"The approximate factorization has |W − R·A| ≤ η = {plan.eta:.4g} entrywise (a bias of "
             f"at most η·n per count) and ‖R‖_(2→∞)·max‖a_x‖ = {b['gamma2_upper']:.6g}; the dual "
             f"witness (U, d) certifies that no factorization with this η does better than "
             f"{b['gamma2_lower']:.6g} (Edmonds, Nikolov & Ullman 2020, §3.3)."]
    if b.get("target_alpha") is not None:
        a = b["target_alpha"]
        rows.append([f"users for error ≤ {a:g}·n, this plan (normal approximation)",
                     f"{b['n_needed_predicted']:.4g}"])
        rows.append([f"users for error ≤ {a:g}·n, this plan (proved)", f"{b['n_needed_upper']:.4g}"])
        if b.get("n_needed_lower") is not None:
            rows.append(["users needed by every ε-LDP protocol (error on the sample)",
                         f"{b['n_needed_lower']:.4g}"])
            rows.append(["users needed by every ε-LDP protocol (error against the population)",
                         f"{b['n_needed_lower_distributional']:.4g}"])
            paras.append(f"Sample size: this plan answers every query within {a:g}·n with about "
                         f"{b['n_needed_predicted']:.4g} users (provably with {b['n_needed_upper']:.4g}); "
                         f"every non-interactive ε-LDP protocol needs n ≥ {b['n_needed_lower']:.4g} "
                         f"for error on the sample and ≥ {b['n_needed_lower_distributional']:.4g} for "
                         "error against the population (Edmonds, Nikolov & Ullman 2020, Thm 23, from "
                         "the same witness, explicit constants — far from tight).")
        else:
            paras.append(b.get("n_needed_lower_note", ""))
    sections.append(Section("Certificate and sample size", paras, table=rows))
    from factorize.plan.embedded import plan_workload

    sections.append(_precision_section(
        plan, plan_workload(plan), numbers, "A local plan states its error for all queries "
        f"together, as a fraction of the number of users n: at n = {b['plan_n']} the worst query "
        f"≤ {b['predicted_max_error']:.4g} (RMSE ≈ {b['predicted_rmse']:.4g}); no table is "
        "promised more."))
    ns = NS[NS >= 100]
    worst = np.array([predicted_errors(plan.R, plan.eta, r["variance"], int(x))["predicted_max_error"]
                      for x in ns])
    rmse = np.array([predicted_errors(plan.R, plan.eta, r["variance"], int(x))["predicted_rmse"]
                     for x in ns])
    sections.append(Section("Error and number of users", [
        f"Predicted error as a fraction of n: worst query ≤ η + ‖R‖_(2→∞)·√(2 v ln 2k / n); at the "
        f"planning size n = {b['plan_n']}: {b['predicted_max_error']:.4g} (RMSE ≈ "
        f"{b['predicted_rmse']:.4g})."],
        figures=[Figure(plots.error_vs_n_plot(ns, {"worst query (fraction of n)": worst,
                                                   "RMSE (fraction of n)": rmse},
                                              title="Local model: predicted error vs users"),
                        "error vs number of users", "error_vs_n")]))
    return Report(title, subtitle, sections, numbers)
