"""Per-table precision targets: a statistics office's weights or target standard errors per
table, planned as one positive scale per table.

The request (``factorize plan --table-weights`` / ``--table-targets``, ``plan.table_request``)
names tables of the workload (``executor.labels``: every part of its ``vstack``, every marginal
of a ``marginals`` family, by its ``table(NAME,SPEC)`` name or its default one, ``age,sex``,
``cdf(age) by sex``):

* weights ``w_t > 0``: ``"age,sex=4;cdf(age) by sex=1"`` — table t gets the scale
  ``d_t = √w_t``;
* targets: ``"sex,income=se:2.0;age,education=halfwidth:5"`` — a target standard error ``s_t``
  of the table's least precise cell, or a target 95 % half-width ``h_t`` of its noise term,
  ``s_t = h_t / c`` with c the release's interval multiplier for the plan's noise
  (``plan.manifest.ci_multiplier``: the normal quantile for Gaussian noise, Chebyshev's
  otherwise); table t gets ``d_t = 1/s_t``.

``*`` stands for every table the request does not name (``"*=1;sex=9"``); a weight defaults to 1,
a target has no default (a table without one is an error). A name holding ``;`` or ``=`` is
written in double quotes (``""`` for ``"``). An unknown name is an error that lists the tables.

The planner plans ``D·W`` (D = diag(d_t) on each table's rows) instead of W — one generic
rewrite of the workload before any strategy family sees it (:func:`scaled_workload`): its spec
is ``vstack(table("NAME",scale(d_t,PART)),…)``, every table keeping its name. The objectives
become, with var_i the variance of answer i of W:

* γ_F: ``Σ_i d_{t(i)}² var_i = Σ_t w_t · (total variance of table t)`` (weights; with targets
  ``Σ_t Σ_{i∈t} var_i / s_t²``);
* γ₂: ``max_i d_{t(i)} √var_i = max_t (largest SE in table t) / s_t`` (targets; with weights
  ``max_t √w_t·SE_t``).

D is block-diagonal with positive scalars, so ``D·W = R'·A`` gives ``W = (D⁻¹R')·A``: the same
measurement (privacy unchanged, the same A), and the answers of W are D⁻¹ times those of D·W
(post-processing). Every family's certificate for D·W is a certificate for the weighted
objective (the γ_F / γ₂ of ``D·W``: a workload's rows weighted by their importance, McKenna,
Miklau, Hay & Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 2018, §3), and a marginal family stays one — a weighted one, whose
weighted sum of variances ResidualPlanner optimises natively (Xiao, He, Zhang & Kifer, "An
Optimal and Scalable Matrix Mechanism for Noisy Marginals under Convex Loss Functions",
NeurIPS 2023, §4).

The plan stores the request and D in ``workload.table_targets`` (:func:`targets_record`); its
``workload.spec`` is D·W's, on which every claim is verified as for any plan. The verifier
(:func:`check_table_targets`) rebuilds W from the record, recomputes every d_t from the stated
weights or targets, rebuilds D·W's spec and requires it to be the plan's, character for
character; the release (``executor.table_scales``) then returns W's answers, standard errors
and intervals, and post-processes W's answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import PlanError
from .table_request import REST, Kind, Request, parse_request

if TYPE_CHECKING:
    from workloads import Domain, Workload

    from .check_record import PlanCheck

__all__ = ["TableScale", "TableScales", "parse_request", "table_parts", "resolve", "scaled_workload",
           "targets_record", "with_targets", "stated_scales", "check_table_targets", "KEY"]

#: The key of the record inside the plan's ``workload`` section.
KEY = "table_targets"


@dataclass(frozen=True)
class Part:
    """One table of W: its unique ``name``, rows ``start .. stop-1`` and the spec of the part."""

    name: str
    start: int
    stop: int
    spec: str


@dataclass(frozen=True)
class TableScale:
    """One table's request (``kind``: weight, se or halfwidth; ``value``) and its scale d_t."""

    name: str
    start: int
    stop: int
    kind: Kind
    value: float
    scale: float


@dataclass(frozen=True)
class TableScales:
    """A plan's tables with their scales (verified or as stated): ``workload`` is W (unscaled),
    ``multiplier`` the interval multiplier a half-width target was converted with."""

    request: Request
    tables: tuple[TableScale, ...]
    multiplier: float | None
    workload: Any = None

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """d_{t(i)} for the answers ``lo .. hi-1``."""
        out = np.empty(max(0, hi - lo), dtype=np.float64)
        for t in self.tables:
            a, b = max(lo, t.start), min(hi, t.stop)
            if a < b:
                out[a - lo:b - lo] = t.scale
        return out


def table_parts(W: Workload, domain: Domain) -> list[Part]:
    """W's tables (``executor.labels.workload_tables``: names, rows) with each part's spec: a
    part of a ``vstack`` by its own spec, a marginal S of a family over the domain's sizes by
    ``scale(w_S, kron(identity/total per attribute))`` (w_S its weight in the family).
    :class:`PlanError` for a part without a spec (a workload not built from one)."""
    from factorize.executor.labels import workload_tables

    specs: list[str] = []
    _part_specs(W, tuple(int(n) for n in domain.sizes), specs)
    tables = workload_tables(W, domain)
    if len(tables) != len(specs):  # the two walks disagree: a bug, refused rather than guessed
        raise PlanError(f"the workload's {len(tables)} tables and {len(specs)} parts do not line up")
    return [Part(t.name, t.start, t.stop, s) for t, s in zip(tables, specs, strict=True)]


def _part_specs(W: Any, sizes: tuple[int, ...], out: list[str]) -> None:
    """The walk of ``executor.labels._walk``, collecting each table's spec."""
    from workloads.spec import format_weight

    structure = getattr(W, "marginal_structure", None)
    if callable(structure):
        fam_sizes, subsets, weights = structure()
        if tuple(int(n) for n in fam_sizes) == sizes:
            for S, w in zip(subsets, weights, strict=True):
                factors = [f"{'identity' if j in S else 'total'}:{n}" for j, n in enumerate(sizes)]
                body = f"kron({','.join(factors)})" if len(factors) > 1 else factors[0]
                out.append(body if float(w) == 1.0 else f"scale({format_weight(float(w))},{body})")
            return
    blocks = getattr(W, "blocks", None)
    if blocks is not None and getattr(W, "factors", None) is None:
        for b in blocks:
            _part_specs(b, sizes, out)
        return
    if not W.spec:
        raise PlanError("a table of the workload has no spec; per-table targets rewrite the spec")
    out.append(W.spec)


def derive_scale(kind: Kind, value: float, multiplier: float | None) -> float:
    """d_t of one request: ``√w``, ``1/s`` or ``c/h`` (module docstring)."""
    if kind == "weight":
        return math.sqrt(value)
    if kind == "se":
        return 1.0 / value
    if multiplier is None:
        raise PlanError("a half-width target needs the interval multiplier of the plan's noise")
    return multiplier / value


def resolve(parts: list[Part], wanted: dict[str, tuple[Kind, float]], request: Request,
            multiplier: float | None) -> tuple[TableScale, ...]:
    """Each table's request and scale; :class:`PlanError` for a name that is no table, a
    target missing, a scale outside ``[1e-12, 1e12]`` or fewer than two tables."""
    from workloads.compose import WEIGHT_MAX, WEIGHT_MIN

    names = [p.name for p in parts]
    shown = "; ".join(repr(n) for n in names[:40]) + (" …" if len(names) > 40 else "")
    unknown = [n for n in wanted if n != REST and n not in names]
    if unknown:
        by_parts = {frozenset(x.strip() for x in n.split(",")): n for n in names}
        hints = [f"{n!r} is {by_parts[key]!r}" for n in unknown
                 if (key := frozenset(x.strip() for x in n.split(","))) in by_parts]
        raise PlanError(f"no table named {', '.join(repr(n) for n in unknown)}"
                        + (f" (did you mean: {'; '.join(hints)} — attributes in the domain's order?)"
                           if hints else "") + f"; the workload's tables are {shown}")
    if len(parts) < 2:
        raise PlanError(f"per-table {request} compare tables, and the workload has one ({shown}); "
                        "its per-query standard errors are the plan's own (inspect prints them)")
    rest = wanted.get(REST, ("weight", 1.0) if request == "weights" else None)
    got = {p.name: wanted.get(p.name, rest) for p in parts}
    missing = [n for n, g in got.items() if g is None]
    if missing:
        raise PlanError(f"no target for table(s) {', '.join(repr(n) for n in missing[:20])}: give "
                        "each table a target, or '*=se:S' for the rest")
    out = []
    for p in parts:
        kind, value = got[p.name] or ("weight", 1.0)  # never the default: missing refused above
        d = derive_scale(kind, value, multiplier)
        if not WEIGHT_MIN <= d <= WEIGHT_MAX:
            raise PlanError(f"table {p.name!r}: its scale {d:g} is outside [{WEIGHT_MIN:g}, "
                            f"{WEIGHT_MAX:g}]")
        out.append(TableScale(p.name, p.start, p.stop, kind, value, d))
    return tuple(out)


def scaled_spec(parts: list[Part], scales: tuple[TableScale, ...]) -> str:
    """The spec of D·W: ``vstack(table("NAME",scale(d_t,PART)),…)`` (``scale`` left out where
    d_t = 1), every table under its own name."""
    from workloads.spec import format_weight, named_spec

    body = []
    for p, t in zip(parts, scales, strict=True):
        inner = p.spec if t.scale == 1.0 else f"scale({format_weight(t.scale)},{p.spec})"
        body.append(named_spec(p.name, inner))
    return f"vstack({','.join(body)})"


def scaled_workload(W: Workload, domain: Domain, text: str, request: Request,
                    multiplier: float | None) -> tuple[Workload, dict[str, Any]]:
    """D·W for the request ``text`` (module docstring) and the plan's record of it
    (:func:`targets_record`). W's custom matrices are carried over (``file:sha256=…``)."""
    from workloads.spec import embedded_files, parse_workload

    parts = table_parts(W, domain)
    scales = resolve(parts, parse_request(text, request), request, multiplier)
    spec = scaled_spec(parts, scales)
    DW = parse_workload(spec, embedded=embedded_files(W), read_files=False)
    if DW.spec != spec:  # the verifier compares the plan's spec with this text: they must agree
        raise PlanError(f"the scaled spec does not normalize to itself: {spec[:200]!r}")
    return DW, targets_record(W, request, scales, multiplier)


def targets_record(W: Workload, request: Request, scales: tuple[TableScale, ...],
                   multiplier: float | None) -> dict[str, Any]:
    """``workload.table_targets``: W's spec and fingerprint, the request, the multiplier and,
    per table, its name, rows, weight or target and scale d_t."""
    tables = [{"name": t.name, "rows": [t.start, t.stop], t.kind: t.value, "scale": t.scale}
              for t in scales]
    return {"spec": W.spec, "fingerprint": W.fingerprint(), "request": request,
            "multiplier": multiplier, "tables": tables}


def with_targets(plan: Any, record: dict[str, Any]) -> Any:
    """``plan`` (built for D·W) carrying the record in ``workload.table_targets``; a
    :class:`PlanError` when the plan is not D·W's or its noise is not the one a half-width
    target was converted for."""
    from dataclasses import replace

    from .manifest import ci_multiplier

    if record["multiplier"] is not None and record["multiplier"] != ci_multiplier(plan.noise):
        raise PlanError("the half-width targets were converted for another noise than the plan's "
                        f"({plan.noise.family}); state them as se:S")
    out = replace(plan, workload={**plan.workload, KEY: record})
    scales = _stated(record)
    if plan.workload["spec"] != scaled_spec(table_parts(_unscaled(record, plan), plan.domain), scales.tables):
        raise PlanError("the plan was not made for D·W of these weights or targets")
    return out


def _unscaled(record: dict[str, Any], plan: Any) -> Workload:
    """W rebuilt from the record (custom matrices from the plan's own arrays)."""
    from workloads.spec import parse_workload

    try:
        return parse_workload(str(record["spec"]), embedded=getattr(plan, "embedded", None) or {},
                              read_files=False)
    except Exception as exc:  # noqa: BLE001 — a bad spec is a refused plan
        raise PlanError(f"cannot rebuild the unscaled workload: {exc}") from None


def _stated(record: dict[str, Any]) -> TableScales:
    """The record's scales as stated (no check): :class:`PlanError` when malformed."""
    from factorize.numerics import is_positive_number

    try:
        request = record["request"]
        if request not in ("weights", "targets"):
            raise PlanError(f"unknown table request {request!r}")
        tables = []
        for t in record["tables"]:
            kinds: list[Kind] = [k for k in ("weight", "se", "halfwidth") if k in t]
            if len(kinds) != 1:
                raise PlanError(f"table {t.get('name')!r} states {len(kinds)} of weight, se, halfwidth")
            rows, value, scale = t["rows"], t[kinds[0]], t["scale"]
            if not (isinstance(t["name"], str) and isinstance(rows, list) and len(rows) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in rows)
                    and is_positive_number(value) and is_positive_number(scale)):
                raise PlanError(f"table {t.get('name')!r}: name, rows [start, stop], positive "
                                f"{kinds[0]} and scale expected")
            tables.append(TableScale(t["name"], rows[0], rows[1], kinds[0], float(value), float(scale)))
        mult = record.get("multiplier")
        if mult is not None and not is_positive_number(mult):
            raise PlanError(f"the interval multiplier {mult!r} is not a positive number")
        return TableScales(request, tuple(tables), None if mult is None else float(mult))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"malformed workload.{KEY}: {type(exc).__name__}: {exc}") from None


def stated_scales(plan: Any) -> TableScales | None:
    """The plan's scales as its file states them (None: no targets) — for ``inspect`` and the
    report, which print the file's claims; a release uses the verified ones."""
    record = (getattr(plan, "workload", None) or {}).get(KEY)
    return None if record is None else _stated(record)


def check_table_targets(out: PlanCheck, plan: Any) -> None:
    """The verifier's check (module docstring): records ``table targets`` for a plan that
    states them and sets ``out.derived["table_scales"]`` (a verified :class:`TableScales`, or
    None for a plan without targets)."""
    record = plan.workload.get(KEY)
    out.derived["table_scales"] = None
    if record is None:
        return
    try:
        out.derived["table_scales"] = _verify(record, plan)
        out.record("table targets", True, "W rebuilt, every scale re-derived from its table's "
                   "weight or target, the plan's workload is D·W")
    except PlanError as exc:
        out.derived["table_scales"] = None
        out.record("table targets", False, str(exc))


def _verify(record: Any, plan: Any) -> TableScales:
    from .manifest import ci_multiplier

    if not isinstance(record, dict):
        raise PlanError(f"workload.{KEY} is not an object")
    stated = _stated(record)
    W = _unscaled(record, plan)
    if W.fingerprint() != record.get("fingerprint"):
        raise PlanError("the unscaled workload's fingerprint differs from the record's")
    mult = ci_multiplier(plan.noise) if any(t.kind == "halfwidth" for t in stated.tables) else None
    if mult != stated.multiplier:
        raise PlanError(f"the record's interval multiplier {stated.multiplier!r} is not the plan "
                        f"noise's {mult!r}")
    post = getattr(plan, "postprocess", None)
    if post is not None and post.get("method") not in ("nonneg", "integer"):
        raise PlanError(f"post-processing {post.get('method')!r} does not take per-table targets")
    parts = table_parts(W, plan.domain)
    if [(p.name, p.start, p.stop) for p in parts] != [(t.name, t.start, t.stop) for t in stated.tables]:
        raise PlanError("the record's tables (names, rows) are not the unscaled workload's")
    scales = []
    for t in stated.tables:
        d = derive_scale(t.kind, t.value, mult)
        if d != t.scale:
            raise PlanError(f"table {t.name!r}: {t.kind} {t.value!r} gives the scale {d!r}, the "
                            f"record states {t.scale!r}")
        scales.append(TableScale(t.name, t.start, t.stop, t.kind, t.value, d))
    if scaled_spec(parts, tuple(scales)) != plan.workload["spec"]:
        raise PlanError("the plan's workload is not D·W for the stated weights or targets")
    return TableScales(stated.request, tuple(scales), mult, W)
