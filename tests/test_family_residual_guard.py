"""A structured family whose strategy misses ``R·A = W`` past the verifier's limit is refused at
plan time (the planner never writes a plan ``verify`` refuses)."""

from __future__ import annotations

import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.plan.errors import PlanError
from workloads import Domain

SPEC = "vstack(kron(prefix:5,total:3),kron(total:5,identity:3))"


def test_the_limit_is_the_verifiers(monkeypatch):
    import factorize.planner.certificate as cert

    dom = Domain(["a", "b"], [5, 3])
    plan = build_structured_plan(SPEC, "rho=0.5", domain=dom, strategy="union")
    beta = plan.bias.get("beta", None) if isinstance(plan.bias, dict) else None
    assert beta is None or beta <= cert.DEFAULT_RESIDUAL_TOL
    monkeypatch.setattr(cert, "DEFAULT_RESIDUAL_TOL", -1.0)  # no residual can pass
    with pytest.raises(PlanError, match="verifier's limit"):
        build_structured_plan(SPEC, "rho=0.5", domain=dom, strategy="union")
