"""OPT_+ (``structured.kron_groups``): one shared Kronecker strategy per group of blocks.

Independent truth: the plan's per-query error equals the dense computation from its own
strategy (the stack ``[α_g ⊗_j A_{g,j}]_g`` formed densely, each block answered from its
group's rows by the pseudo-inverse) and the closed-form Hölder total ``2(Σ_g V_g^{1/3})³``
(Laplace) / ``(Σ_g V_g^{1/2})²`` (Gaussian) of the optimiser's group values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from workloads import parse_workload

SPEC = ("vstack(kron(prefix:8,total:8),kron(prefix:8,identity:8),kron(total:8,prefix:8),"
        "kron(identity:8,prefix:8))")


def test_candidate_groupings_lie_strictly_between_union_and_kron():
    from factorize.structured.kron_groups import candidate_groupings
    from factorize.structured.workload_blocks import workload_blocks

    wb = workload_blocks(parse_workload(SPEC), [8, 8])
    cands = dict(candidate_groupings(wb))
    # supports {0}, {0,1}, {1}, {0,1}: same-support groups {0}, {1,3}, {2}; nested: {0,1,2,3}
    # is one group (kron's), so only the first is a grouping
    assert cands == {"same measured attributes": [[0], [1, 3], [2]]}


@pytest.mark.parametrize("privacy,noise", [("epsilon=1", "laplace"), ("rho=0.5", "gaussian")])
def test_grouped_plan_matches_its_dense_strategy_and_the_closed_form(privacy, noise):
    from factorize.structured.sensitivity import strategy_sensitivity

    plan = build_structured_plan(SPEC, privacy, strategy="kron_groups")
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    W = np.asarray(parse_workload(SPEC).dense())
    k = W.shape[0]
    s = plan.strategy.measured()
    rows = []
    for b in s.blocks:
        M = np.ones((1, 1))
        for j in range(2):
            F = s.arrays[b.names[b.support.index(j)]] if j in b.support else np.ones((1, 8))
            M = np.kron(M, F)
        rows.append(b.scale * M)
    A = np.vstack(rows)
    norm = "l1" if noise == "laplace" else "l2"
    delta = float(np.max(np.abs(A).sum(axis=0) if norm == "l1" else np.linalg.norm(A, axis=0)))
    assert strategy_sensitivity(s, norm, "add_remove").value == pytest.approx(delta, rel=1e-12)
    # block o from its own group's rows
    choice = plan.provenance["strategy_choice"]
    groups = next(t["groups"] for t in choice["search"]["tried"] if t["grouping"] == choice["search"]["chosen"])
    offs = np.cumsum([0] + [r.shape[0] for r in rows])
    wrows = [64 if i in (1, 3) else 8 for i in range(4)]
    woffs = np.cumsum([0] + wrows)
    total = 0.0
    for g, members in enumerate(groups):
        Ag = A[offs[g]:offs[g + 1]]
        for o in members:
            R = W[woffs[o]:woffs[o + 1]] @ np.linalg.pinv(Ag)
            total += float(np.sum(R * R))
    dense_rmse = delta * math.sqrt(total / k) * (math.sqrt(2.0) if noise == "laplace" else 1.0)
    stated = choice["rmse_at_epsilon_1"] if noise == "laplace" else choice["gaussian_rmse_per_sigma"]
    assert stated == pytest.approx(dense_rmse, rel=1e-9)
    # the optimiser's closed form (before measuring: quantization moves it by < 1e-12)
    tv = next(t["total_variance_per_unit_noise"] for t in choice["search"]["tried"]
              if t["grouping"] == choice["search"]["chosen"])
    assert math.sqrt(tv / k) == pytest.approx(dense_rmse, rel=1e-6)
