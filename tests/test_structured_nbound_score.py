"""The n bound's block choice (``structured.records.choose``) scores each workload block by
``‖Rᵀb‖₂``; ``records._c_norm`` computes it from per-attribute inner products instead of the
strategy-side vector. Independent truth: the vector itself (``records._c_vector``), on the plans
of every structured family that applies to random unions (single terms, several terms on one
strategy block — marginal weights —, mixed blocks — the symmetric family)."""

from __future__ import annotations

import numpy as np
import pytest
from random_unions import draw

from factorize.structured import records


def _problem(case, privacy: str):
    from factorize.cli.common import parse_domain
    from factorize.families import PlanProblem
    from factorize.plan.build_inputs import plan_inputs
    from workloads.spec import resolve_workload_spec

    dom = parse_domain(case.domain, None)
    spec, dom = resolve_workload_spec(case.spec, dom)
    W, g, rel, dom = plan_inputs(spec, privacy, "add_remove", dom, False)
    noise = "laplace" if g.kind == "pure_dp" else "gaussian"
    return PlanProblem(W, g, rel, dom, noise, "gamma_f")


@pytest.mark.parametrize("seed", [5, 23])
@pytest.mark.parametrize("privacy", ["rho=0.5", "epsilon=1"])
def test_score_equals_the_norm_of_the_vector(seed: int, privacy: str, tmp_path) -> None:
    import random

    from factorize.families import FAMILIES
    from factorize.structured.workload_blocks import workload_blocks

    case = draw(random.Random(seed), tmp_path, max_cells=256, invariant=seed == 23)
    checked = 0
    for fam in FAMILIES:
        problem = _problem(case, privacy)
        if fam.applies(problem) is not None or fam.name == "dense":
            continue
        try:
            plan = fam.plan(problem)
        except ValueError:
            continue
        recon = plan.reconstruction
        wblocks = workload_blocks(problem.workload, problem.domain.sizes)
        for o, wb in enumerate(wblocks):
            try:
                _, parts, weights = records._block_parts(recon, wb, o)
            except records.StructureError:
                continue
            want = float(np.linalg.norm(records._c_vector(recon, parts, weights)[1]))
            assert records._c_norm(recon, parts, weights) == pytest.approx(want, rel=1e-12, abs=1e-300)
            checked += 1
    assert checked > 0
