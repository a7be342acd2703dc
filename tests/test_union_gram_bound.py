"""The uniform-weight lower bound of union plans (a certified lower bound for
unions, and its gap): ``‖W‖_tr/√(kN)`` from W·Wᵀ formed block by block, against the dense
trace norm and the dense certified optimum; plans written with the older certificate method
still verify."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.structured import union
from factorize.structured.workload_blocks import workload_blocks
from workloads import Domain
from workloads.spec import parse_workload

SPEC = ("vstack(kron(identity:2,total:3,prefix:4),kron(total:2,identity:3,identity:4),"
        "kron(identity:2,identity:3,total:4),kron(total:2,total:3,total:4))")
SIZES = (2, 3, 4)
DOMAIN = Domain(["a", "b", "c"], list(SIZES))


def test_uniform_bound_is_the_dense_trace_norm_and_below_the_optimum():
    from factorize.planner.routes import solve

    W = parse_workload(SPEC)
    bound = union.uniform_trace_lower(workload_blocks(W, SIZES), SIZES)
    Wd = W.dense()
    k, N = Wd.shape
    exact = float(np.linalg.svd(Wd, compute_uv=False).sum()) / math.sqrt(k * N)
    assert bound <= exact and bound == pytest.approx(exact, rel=1e-12)
    res = solve(W, "gamma_f")
    assert bound <= res.verification.upper * (1 + 1e-9)


def test_union_plans_state_it_and_old_plans_still_verify(monkeypatch):
    # where the symmetry reduction declines (sectors too large); else the reduced dual, whose
    # first iterate is this bound, replaces it (tests/test_symmetry_bound.py)
    from factorize.structured import symmetry

    monkeypatch.setattr(symmetry, "MAX_SECTOR", 1)
    plan = build_structured_plan(SPEC, "rho=0.5", domain=DOMAIN, strategy="union")
    assert plan.certificate["method"] == union.CERTIFICATE_GRAM
    gram = union.uniform_trace_lower(workload_blocks(parse_workload(SPEC), SIZES), SIZES)
    assert plan.certificate["lower"] >= gram
    assert verify_structured_plan(plan).passed
    # a plan written before the bound: the older method, re-derived by the older rule
    old = union.certificate_lower(type("P", (), {
        "certificate": {"method": union.CERTIFICATE}, "certificate_arrays": plan.certificate_arrays,
        "domain": plan.domain, "strategy": plan.strategy, "norm": plan.norm})(), parse_workload(SPEC))
    from factorize.numerics import relative_gap

    plan = dataclasses.replace(plan, certificate={
        **plan.certificate, "method": union.CERTIFICATE, "lower": old,
        "gap": relative_gap(plan.certificate["upper"], old), "laplace_factorization": None})
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    assert old <= gram
    # claiming the uniform bound's method with a higher lower bound is refused
    plan = dataclasses.replace(plan, certificate={
        **plan.certificate, "method": union.CERTIFICATE_GRAM, "lower": gram * 1.01,
        "gap": relative_gap(plan.certificate["upper"], gram * 1.01)})
    assert not verify_structured_plan(plan).passed
