"""Integral strategies need no rounding inflation: with integer entries and γ = 2⁻ᵏ ≤ 1,
``Ã h / γ`` is an integer for every histogram, the lattice release rounds nothing, and the
calibrated sensitivity is Δ itself (``privacy.sensitivity.rounding_free``, spread 0)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.privacy.sensitivity import kron_spread, rounding_free


def test_identity_and_histogram_plans_are_rounding_free_and_exact():
    plan = build_plan("identity:64", "epsilon=1")
    assert plan.noise.spread == 0
    assert plan.noise.sensitivity == pytest.approx(plan.noise.base_sensitivity, rel=1e-14)
    assert plan.expected_error["rmse"] == pytest.approx(math.sqrt(2), rel=1e-12)
    assert verify_plan(plan).passed
    # the exact measurement of an integer histogram is Ãh/γ with nothing to round
    from factorize.executor.release import measure

    h = np.random.default_rng(0).integers(0, 1000, 64)
    q = measure(plan, h)
    assert np.array_equal(np.asarray(q, dtype=np.float64) * plan.noise.grid, h.astype(np.float64))


def test_rounding_free_needs_integers_and_a_grid_at_most_one():
    I = np.eye(4)
    assert rounding_free([I, np.ones((1, 3))], 2.0 ** -10)
    assert not rounding_free([I * 0.5], 2.0 ** -10)       # a fraction
    assert not rounding_free([I], 2.0)                     # γ > 1: h/γ need not be an integer
    assert not rounding_free([I], None)                    # no lattice
    assert not rounding_free([I], 2.0 ** -10, scales=[0.75])
    assert kron_spread([I * 0.5], "add_remove", 2.0 ** -10) == 1
    assert kron_spread([I], "replace", 2.0 ** -10) == 0


def test_a_forged_zero_spread_is_refused():
    plan = build_plan("prefix:16", "epsilon=1")  # a p-Identity strategy: fractional entries
    assert plan.noise.spread and plan.noise.spread > 0
    from factorize.privacy import calibrate

    g = plan.guarantee
    forged_noise = calibrate(g, sensitivity_l1=plan.noise.base_sensitivity, grid=plan.noise.grid,
                             dim=plan.noise.dim, relation=plan.relation, family="laplace", spread=0)
    forged = dataclasses.replace(plan, noise=forged_noise)
    check = verify_plan(forged)
    assert not check.passed
    assert any("move" in f for f in check.failures), check.failures
