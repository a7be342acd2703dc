"""The one release of a linear measurement (``executor.linear_release``): the
one float-noise refusal, a release that the verification did not give a bias for is refused
(never a silent β = 0), and the dense and structured kinds produce the same fields."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from factorize.errors import InternalError
from factorize.executor.linear_release import EXACT_SAMPLERS, refuse_float_noise
from factorize.executor.release import release_dense
from factorize.executor.session import ExecutionError
from factorize.kinds.factorization.verify import verify_plan
from factorize.privacy import TestRandom
from tests.plan_fixtures import small_plan


def test_only_exact_samplers_run_unless_float_noise_is_allowed():
    for sampler in EXACT_SAMPLERS:
        refuse_float_noise(sampler, False)
    refuse_float_noise("float", True)
    for sampler, allowed in (("float", False), ("none", True), ("gaussian", True)):
        with pytest.raises(ExecutionError, match="not exact"):
            refuse_float_noise(sampler, allowed)


def test_a_release_without_the_verified_bias_is_refused():
    plan = small_plan("prefix:8", "rho=0.5")
    check = verify_plan(plan, certificate=False)
    h = np.array([5, 0, 3, 9, 1, 0, 2, 7])
    rel = release_dense(plan, h, TestRandom(1), check=check)
    assert rel.metadata["ci"]["bias_per_record"] == check.derived["beta"]
    for key in ("beta", "n_bound", "mu", "b_l1"):  # no default stands in for a verified value
        forgetful = dataclasses.replace(check, derived={k: v for k, v in check.derived.items() if k != key})
        with pytest.raises(InternalError, match=f"did not establish '{key}'"):
            release_dense(plan, h, TestRandom(1), check=forgetful)


def test_dense_and_structured_releases_carry_the_same_fields(tmp_path):
    from factorize.executor.structured import release as structured_release
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.kinds.structured.verify import verify_structured_plan

    dense = release_dense(small_plan("prefix:8", "rho=0.5"), np.arange(8), TestRandom(2))
    splan = build_structured_plan("marginals:2x3:1", "rho=0.5")
    check = verify_structured_plan(splan)
    measurement = splan.strategy.measured().measure(
        _tables(splan, np.arange(6).reshape(2, 3)), splan.noise.grid)
    structured = structured_release(splan, check, measurement, TestRandom(2))
    forgetful = dataclasses.replace(check, derived={k: v for k, v in check.derived.items() if k != "beta"})
    with pytest.raises(InternalError, match="did not establish 'beta'"):
        structured_release(splan, forgetful, measurement, TestRandom(2))
    for rel in (dense, structured):
        assert set(rel.metadata) >= {"test_mode", "workload", "workload_fingerprint", "domain",
                                     "guarantee", "neighbouring", "noise", "ci", "n_queries", "warning"}
        assert np.all(rel.ci_low <= rel.estimate) and np.all(rel.estimate <= rel.ci_high)
        assert rel.metadata["warning"].startswith("NOT PRIVATE")
    assert "labels" not in structured.extra and "labels" not in dense.extra  # the pipeline labels them


def _tables(plan, counts):
    """The marginal tables of a dense 2×3 histogram on the strategy's supports."""
    from factorize.structured.strategy import marginal_of

    return {S: marginal_of(counts.reshape(-1), plan.domain.sizes, S) for S in plan.strategy.supports()}
