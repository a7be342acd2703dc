"""The release of a plan with per-table targets (``plan.table_targets``): the plan measures
and reconstructs ``D·W``; what it releases is W.

For D = diag(d_t) (one positive scale per table, the verifier's, ``check.derived
["table_scales"]``), the kind's release of D·W gives for each answer i of table t an estimate
``ŷ'_i``, a standard error ``se'_i`` and a 95 % interval ``[lo'_i, hi'_i]``; W's are

    ŷ_i = ŷ'_i / d_t,   se_i = se'_i / d_t,   [lo_i, hi_i] = [lo'_i / d_t, hi'_i / d_t]

— exact post-processing (d_t > 0: the interval holds for W's answer exactly when it holds for
D·W's, so the coverage is unchanged; every term of the half-width, the noise's, the lattice
rounding's and the reconstruction bias's, is divided by d_t). The plan's post-processing
(``--postprocess nonneg | integer``) runs on W's answers with W (``executor.postprocess``),
so tables are projected and rounded as counts, never as scaled counts. The metadata states W's
spec and fingerprint, and D.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .linear_release import AnswerColumn, ErrorBars, Release
from .session import ExecutionError

#: The kinds whose verifier checks per-table targets.
KINDS = ("factorization", "structured")


def states_targets(plan: Any) -> bool:
    """Whether the plan's workload record carries per-table targets."""
    from factorize.plan.table_targets import KEY

    record = getattr(plan, "workload", None)
    return isinstance(record, dict) and KEY in record


def verified_scales(kind: Any, plan: Any, check: Any) -> Any:
    """The verified scales of a plan with targets (None for a plan without); an
    :class:`ExecutionError` — before the charge: ``executor.pipeline`` calls it there — for a
    kind whose verifier does not check targets or a check that did not establish them."""
    if not states_targets(plan):
        return None
    if kind.name not in KINDS:
        raise ExecutionError(f"a {kind.name} plan does not take per-table targets; refusing")
    scales = check.established("table_scales")
    if scales is None:
        raise ExecutionError("the plan states per-table targets its verification did not establish")
    return scales


def release(kind: Any, plan: Any, check: Any, measurement: Any, rng: Any, *,
            allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
    """``kind.release`` of the plan, then W's answers (module docstring) for a plan with
    targets; any other plan's release unchanged."""
    scales = verified_scales(kind, plan, check)
    if scales is None:
        return kind.release(plan, check, measurement, rng, allow_float_noise=allow_float_noise,
                            metadata=metadata, deadline=deadline)
    post = plan.postprocess
    inner = replace(plan, postprocess=None) if post is not None else plan
    rel = kind.release(inner, check, measurement, rng, allow_float_noise=allow_float_noise,
                       metadata=metadata, deadline=deadline)
    unscale(rel, scales)
    if post is not None:
        from .postprocess import attach

        attach(rel, post["method"], lambda: _postprocess(kind.name, plan, scales.workload,
                                                         rel.estimate, post, deadline))
    return rel


def unscale(rel: Release, scales: Any) -> None:
    """Replace the release's columns of D·W by W's (module docstring), in place, and state W
    and D in its metadata."""
    d = scales.rows(0, rel.estimate.size)
    est = np.divide(rel.estimate, d)
    cols = {}
    for name in ("std_error", "ci_low", "ci_high"):
        col = getattr(rel, name)
        if isinstance(col, AnswerColumn):
            cols[name] = col
        else:
            setattr(rel, name, np.divide(np.asarray(col, dtype=np.float64), d))
    if cols:
        bars = UnscaledBars(next(iter(cols.values())).bars, est, scales)
        for name in cols:
            setattr(rel, name, AnswerColumn(bars, name))
    rel.estimate = est
    meta = rel.metadata
    W = scales.workload
    meta["workload"], meta["workload_fingerprint"] = W.spec, W.fingerprint()
    meta["table_targets"] = {
        "request": scales.request,
        "measured_workload": "D·W, D = diag(scale) on each table's rows; the answers, standard "
                             "errors and intervals are W's: D⁻¹ times D·W's",
        "tables": [{"name": t.name, t.kind: t.value, "scale": t.scale} for t in scales.tables]}


class UnscaledBars(ErrorBars):
    """The error bars of D·W (``inner``) divided by each row's d_t: ``(se/d, half/d)`` per
    range of rows, read-only; ``estimate``: W's."""

    def __init__(self, inner: ErrorBars, estimate: np.ndarray, scales: Any) -> None:
        super().__init__(estimate, inner.row_norms, inner.row_l1_norms, inner.sd, inner.multiplier,
                         inner.grid, inner.bias)
        self.inner = inner
        self.scales = scales

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        if self._last is not None and self._last[:2] == (lo, hi):
            return self._last[2], self._last[3]
        se, half = self.inner.rows(lo, hi)
        d = self.scales.rows(lo, hi)
        se, half = np.divide(se, d), np.divide(half, d)
        se.setflags(write=False)
        half.setflags(write=False)
        self._last = (lo, hi, se, half)
        return se, half


def _postprocess(kind: str, plan: Any, W: Any, est: np.ndarray, post: dict[str, Any],
                 deadline: float) -> dict[str, Any]:
    """The plan's post-processing on W's answers: the histogram's (dense plans) or the marginal
    tables' (structured plans), as the kind's release runs it for a plan without targets."""
    from .postprocess import integer_consistent, marginal_postprocess, nonneg_consistent

    if kind == "structured":
        return marginal_postprocess(W, plan.domain.sizes, est, post, deadline)
    method = {"nonneg": nonneg_consistent, "integer": integer_consistent}.get(post["method"])
    if method is None:  # unreachable: the verifier refuses such a plan (plan.table_targets)
        raise ExecutionError(f"post-processing {post['method']!r} does not take per-table targets")
    return method(W, est, max_iter=int(post["max_iter"]), tol=float(post["tol"]), deadline=deadline)
