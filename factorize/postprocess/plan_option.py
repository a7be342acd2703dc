"""``--postprocess nonneg | integer`` at plan time: the record a plan carries, for each plan
kind that can serve it, and a clear refusal for one that cannot.

* a dense / Kronecker factorization plan (``kinds.factorization.plan.Plan``): the histogram is projected
  (``executor.postprocess.nonneg_consistent``) and, for ``integer``, rounded
  (``executor.postprocess.integer_consistent``); record ``{method, max_iter, tol}`` with the
  dense defaults :data:`DENSE_MAX_ITER`, :data:`DENSE_TOL`;
* a structured plan (``kinds.structured.plan.StructuredPlan``, every family) of a workload of
  Kronecker blocks whose factors are identities, totals, matrices of full column rank or
  groupings of the values (marginals, CDFs, ranges, age groups, their products —
  ``postprocess.tables``): the marginal tables the
  blocks read are estimated from the released answers, projected onto non-negative
  consistent tables (``postprocess.nonneg``) and, for ``integer``, rounded
  (``postprocess.rounding``), every answer read back through its block's factors; record
  ``{method, max_iter, tol}`` with :data:`MARGINAL_MAX_ITER`, :data:`MARGINAL_TOL` (ADMM's
  residual relative to the release's noise). The fit is the answers' least squares, so a
  table read by several blocks is fitted to all of them: plans that answer from one
  least-squares estimate (residual, marginal weights, subset algebra, Kronecker, symmetric)
  give those blocks one estimate of it, plans that estimate blocks apart (union, Kronecker
  groups) several, which the fit combines;
* any other plan — a structured plan of a workload with a block whose answers do not
  determine its marginal table (a factor of lower column rank, e.g. ranges of one width), a
  projection plan (jl, covariance, relaxed-projection: their decoding is their own
  projection), a least-squares plan (already projected) — is refused with the reason.

The verifier checks the record (``kinds.factorization.claims``); ``run`` stops the post-processing after
``max_iter`` iterations or its wall-clock limit, whichever comes first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import PostprocessError

if TYPE_CHECKING:
    from factorize.plan.records import PostprocessRecord

#: The methods ``--postprocess`` offers besides ``none``.
METHODS = ("nonneg", "integer")
#: Dense plans: FISTA iterations and KKT tolerance (``executor.postprocess.nonneg_consistent``).
DENSE_MAX_ITER = 2000
DENSE_TOL = 1e-8
#: Marginal tables: ADMM iterations and residual relative to the release's noise
#: (``postprocess.nonneg``). On Adult's 91 two-way tables 1e-2 takes about 50 iterations and
#: leaves the answers' squared error 0.4% above the fit run to 1e-6 (1,300 iterations; 1e-3:
#: 150 iterations, 0.1%); on its 470 tables of all ≤3-way marginals (21 million cells, about
#: a CPU second per iteration) 1e-2 takes about 50, 1e-3 more than 150.
MARGINAL_MAX_ITER = 5000
MARGINAL_TOL = 1e-2


def record(method: str, structured: bool) -> PostprocessRecord:
    """The plan's ``postprocess`` record for ``method`` (``plan.records.PostprocessRecord``)."""
    if method not in METHODS:
        raise PostprocessError(f"unknown post-processing {method!r}; expected one of {METHODS}")
    rec: PostprocessRecord = {"method": method,
                              "max_iter": MARGINAL_MAX_ITER if structured else DENSE_MAX_ITER,
                              "tol": MARGINAL_TOL if structured else DENSE_TOL}
    return rec


def serves_marginals(W: Any, sizes: Any) -> str | None:
    """None when post-processing in the algebra of marginals serves ``W`` over attribute
    sizes ``sizes`` (every block's answers determine the marginal table it reads,
    ``postprocess.tables.marginal_layout``); otherwise why not."""
    from .tables import marginal_layout

    try:
        marginal_layout(W, sizes)
    except PostprocessError as exc:
        return str(exc)
    return None


def with_postprocess(plan: Any, method: str, W: Any = None) -> Any:
    """``plan`` carrying the post-processing ``method`` (module docstring); ``W``: its
    workload where the caller has it (rebuilt from the plan's spec otherwise).
    :class:`PostprocessError` for a plan kind or workload that cannot be served."""
    from factorize.kinds.factorization.plan import Plan
    from factorize.kinds.structured.plan import StructuredPlan

    if method == "none":
        return plan
    if isinstance(plan, StructuredPlan):
        if W is None:
            from workloads.spec import parse_workload

            W = parse_workload(plan.workload["spec"], embedded=plan.embedded, read_files=False)
        why = serves_marginals(W, plan.domain.sizes)
        if why is not None:
            raise PostprocessError(f"--postprocess {method} on a structured plan projects the "
                                   f"marginal tables its answers are read from, and {why}; plan "
                                   "--strategy dense (the histogram is projected, N cells) or "
                                   "leave out --postprocess")
        return replace(plan, postprocess=record(method, structured=True))
    if isinstance(plan, Plan):
        if plan.postprocess is not None:
            raise PostprocessError(f"this plan already post-processes its answers "
                                   f"({plan.postprocess['method']}); --postprocess {method} "
                                   "does not combine with it")
        return replace(plan, postprocess=record(method, structured=False))
    raise PostprocessError(f"a {getattr(plan, 'plan_kind', type(plan).__name__)} plan decodes its "
                           f"answers by its own projection; --postprocess {method} does not apply")
