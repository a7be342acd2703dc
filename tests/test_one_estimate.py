"""One estimate per cell: every family that says so (``FamilyCodec.one_estimate``) releases
``W·Ã⁺ỹ`` — checked densely against the pseudo-inverse on random unions — and ``inspect``
says which kind of estimate a plan releases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.structured.families import CODECS, ONE_ESTIMATE, SEPARATE_ESTIMATES
from tests.random_unions import draw
from workloads import Domain
from workloads.spec import parse_workload


@pytest.mark.parametrize("seed", range(8))
def test_families_that_claim_one_estimate_release_w_times_the_least_squares_estimate(seed, tmp_path):
    case = draw(random.Random(300 + seed), tmp_path, max_cells=96)
    W = parse_workload(case.spec).dense()
    dom = Domain([f"a{j}" for j in range(len(case.sizes))], list(case.sizes))
    for name, fam in CODECS.items():
        if not fam.one_estimate:
            continue
        for privacy in ("rho=0.5", "epsilon=1"):
            try:
                plan = build_structured_plan(case.spec, privacy, domain=dom, strategy=name)
            except Exception:  # noqa: BLE001 — the family does not apply to this workload
                continue
            A = plan.strategy.measured().dense()
            R = plan.reconstruction.dense()
            ls = W @ np.linalg.pinv(A, rcond=1e-12)
            assert np.abs(R - ls).max() <= 1e-6 * max(1.0, float(np.abs(R).max())), (name, privacy, case.spec)


def test_a_union_plan_says_its_blocks_are_separate_estimates():
    spec = "vstack(kron(identity:3,total:4),kron(identity:3,identity:4))"
    dom = Domain(["a", "b"], [3, 4])
    union = build_structured_plan(spec, "rho=0.5", domain=dom, strategy="union")
    assert f"estimates   {SEPARATE_ESTIMATES}" in union.summary_lines()
    R, A = union.reconstruction.dense(), union.strategy.measured().dense()
    W = parse_workload(spec).dense()
    # the totals of the 3×4 table differ from the 3-cell table's estimates as linear maps
    assert not np.allclose(R[:3], R[3:].reshape(3, 4, -1).sum(axis=1))
    assert not np.allclose(R, W @ np.linalg.pinv(A))
    kron = build_structured_plan(spec, "rho=0.5", domain=dom, strategy="kron")
    assert f"estimates   {ONE_ESTIMATE}" in kron.summary_lines()
    Rk = kron.reconstruction.dense()
    assert np.allclose(Rk[:3], Rk[3:].reshape(3, 4, -1).sum(axis=1))
