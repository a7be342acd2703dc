"""Union-of-Kronecker plans under Laplace noise: the block weights are the
Lagrange optimum for the L1 sensitivity, and the plan's error equals the dense computation."""

from __future__ import annotations

import math

import numpy as np

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.structured import union_build
from factorize.structured.workload_blocks import workload_blocks
from workloads import parse_workload

SPEC = "vstack(kron(prefix:4,total:3),kron(identity:4,identity:3),kron(total:4,prefix:3))"


def _objective(s: np.ndarray, V: np.ndarray, kappa1: np.ndarray) -> float:
    """Σ_o V_o/s_o² at Δ₁ = Σ_o s_o κ¹_o = 1 (the L1 bound the weights optimise)."""
    s = s / float(np.sum(s * kappa1))
    return float(np.sum(V / s ** 2))


def test_closed_form_weights_beat_every_other_weighting():
    W = parse_workload(SPEC)
    wb = workload_blocks(W, (4, 3))
    strat, recon, _, _, _ = union_build.build((4, 3), wb, "gamma_f", sensitivity_norm="l1")
    s = np.array([b.scale for b in strat.blocks])
    V, kappa1 = [], []
    for o, b in enumerate(strat.blocks):
        As = [strat.arrays[n] for n in b.names]
        kappa1.append(math.prod(float(np.abs(A).sum(axis=0).max()) for A in As))
        Rs = [recon.arrays[n] for n in recon.terms[o].names]
        V.append(wb[o].weight ** 2 * math.prod(float(np.sum(R * R)) for R in Rs))
    V, kappa1 = np.array(V), np.array(kappa1)
    best = _objective(s, V, kappa1)
    rng = np.random.default_rng(3)
    for _ in range(500):
        other = s * np.exp(rng.normal(0.0, 0.5, s.size))
        assert _objective(other, V, kappa1) >= best * (1.0 - 1e-6)
    # the stationarity condition of the Lagrangian: s_o³ κ¹_o / V_o equal across blocks
    ratio = s ** 3 * kappa1 / V
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-6)


def test_laplace_union_plan_error_equals_the_dense_computation():
    plan = build_structured_plan(SPEC, "epsilon=1")
    assert plan.noise.family == "laplace"
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    A = plan.strategy.measured().dense()
    R = plan.reconstruction.dense()
    Wd = parse_workload(SPEC).dense()
    np.testing.assert_allclose(R @ A, Wd, atol=1e-9)
    # Δ₁ of the measured strategy, exactly the largest column L1 norm
    assert plan.noise.base_sensitivity >= float(np.abs(A).sum(axis=0).max()) * (1 - 1e-12)
    from factorize.privacy import sampled_variance

    rmse = math.sqrt(sampled_variance(plan.noise) * float(np.sum(R * R)) / Wd.shape[0])
    assert abs(plan.expected_error["rmse"] - rmse) <= 1e-9 * rmse
    lap = plan.certificate["laplace_factorization"]
    assert lap is not None and plan.expected_error["rmse"] >= lap["value"]
