"""The subspace-split trace-norm bound of unions (``structured.subspace_bound``): against the
dense trace norm at the same weights (it can never exceed it), the dense certified optimum,
closed forms (one block; blocks meeting in no direction), the bound of the benchmark's prefix
and CDF unions, its verification and tampering."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.structured import subspace_bound as sb
from factorize.structured import subspace_bound_build as sbb
from factorize.structured import union, union_build
from factorize.structured.workload_blocks import workload_blocks
from tests.random_unions import draw
from workloads import Domain
from workloads.spec import parse_workload

CDFS = "vstack(kron(prefix:100,total:2,identity:100),kron(total:100,identity:2,prefix:100))"
PAIRS = "vstack(" + ",".join(
    "kron(" + ",".join("prefix:64" if a in (i, j) else "total:64" for a in range(5)) + ")"
    for i, j in itertools.combinations(range(5), 2)) + ")"


def _witnesses(wblocks, norm):
    out = {}
    for wb in wblocks:
        for f in wb.factors:
            if f.kind == "matrix" and f.key not in out:
                out[f.key] = union_build.factor_solution(f, norm, None)[2]
    return out


def _dense_at(W, splits, rows=None):
    """‖D_p^{1/2} W D_q^{1/2}‖_tr / √(Σp Σq) densely, q = ⊗ s_j² (p = 1 unless given)."""
    s = np.ones(1)
    for sp in splits:
        s = np.kron(s, sp.s)
    M = W.dense() * s[None, :]
    p = np.ones(M.shape[0]) if rows is None else rows
    M = np.sqrt(p)[:, None] * M
    return float(np.linalg.svd(M, compute_uv=False).sum()) / math.sqrt(float(p.sum()) * float((s * s).sum()))


def _splits(wblocks, sizes, rng):
    out = []
    for j, n in enumerate(sizes):
        q = np.array([rng.uniform(0.2, 1.0) for _ in range(n)])
        sp, _ = sbb.split_for(sb.distinct_factors(wblocks, j), np.sqrt(q / q.sum()))
        out.append(sp)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_never_above_the_dense_trace_norm_at_the_same_weights(seed, tmp_path):
    rng = random.Random(1000 + seed)
    case = draw(rng, tmp_path, max_cells=192)
    W = parse_workload(case.spec)
    wb = workload_blocks(W, case.sizes)
    splits = _splits(wb, case.sizes, rng)
    low = sb.certified_lower(wb, case.sizes, splits)
    assert 0 <= low <= _dense_at(W, splits) * (1 + 1e-12)
    # γ₂ form: block scales and per-factor row weights; the dense matrix with the same p
    rw = [np.concatenate([np.array([rng.uniform(0.3, 1.0) for _ in range(f.rows)])
                          for f in sb.distinct_factors(wb, j)]) for j in range(len(case.sizes))]
    sig = [rng.uniform(0.5, 2.0) for _ in wb]
    low2 = sb.certified_lower(wb, case.sizes, splits, rw, sig)
    p = np.concatenate([
        (sig[o] * _kron([rw[j][sb.row_weight_slices(wb, j)[b.factor(j).key]] for j in range(len(case.sizes))])) ** 2
        for o, b in enumerate(wb)])
    assert 0 <= low2 <= _dense_at(W, splits, p) * (1 + 1e-12)


def _kron(vs):
    out = np.ones(1)
    for v in vs:
        out = np.kron(out, v)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_search_stays_below_the_certified_optimum(seed, tmp_path):
    from factorize.planner.routes import solve

    rng = random.Random(2000 + seed)
    case = draw(rng, tmp_path, max_cells=128)
    W = parse_workload(case.spec)
    wb = workload_blocks(W, case.sizes)
    for norm in ("gamma_f", "gamma_2"):
        found = sbb.search(wb, case.sizes, norm, _witnesses(wb, norm))
        if found is None:
            assert len(wb) < 2
            continue
        upper = solve(W, norm).verification.upper
        assert found[0] <= upper * (1 + 1e-9)


def test_one_block_is_its_trace_norm():
    W = parse_workload("vstack(kron(prefix:6,total:4),kron(prefix:6,total:4))")
    wb = workload_blocks(W, (6, 4))
    splits = [sbb.split_for(sb.distinct_factors(wb, j), np.full(n, 1 / math.sqrt(n)))[0]
              for j, n in enumerate((6, 4))]
    # two equal blocks: ‖[M; M]‖_tr = √2 ‖M‖_tr, attained
    assert sb.certified_lower(wb, (6, 4), splits) == pytest.approx(_dense_at(W, splits), rel=1e-12)


def test_blocks_in_orthogonal_directions_add_up():
    # kron(I, 1ᵀ) and kron(1ᵀ, I) share only the direction 𝟙⊗𝟙: the bound is the dense trace norm
    W = parse_workload("vstack(kron(identity:5,total:7),kron(total:5,identity:7))")
    wb = workload_blocks(W, (5, 7))
    splits = [sbb.split_for(sb.distinct_factors(wb, j), np.full(n, 1 / math.sqrt(n)))[0]
              for j, n in enumerate((5, 7))]
    low = sb.certified_lower(wb, (5, 7), splits)
    assert low == pytest.approx(_dense_at(W, splits), rel=1e-12)
    one_atom = [sb.AxisSplit(sp.s, np.eye(sp.s.size), np.zeros(sp.s.size, dtype=np.int64)) for sp in splits]
    assert sb.certified_lower(wb, (5, 7), one_atom) < 0.8 * low


def test_benchmark_unions_far_above_the_per_block_bound():
    for spec, sizes, per_block, upper in ((CDFS, (100, 2, 100), 2.235, 2.5265),
                                          (PAIRS, (64,) * 5, 4.409, 13.944)):
        wb = workload_blocks(parse_workload(spec), sizes)
        low, _ = sbb.search(wb, sizes, "gamma_f", _witnesses(wb, "gamma_f"))
        assert low <= upper
        if spec == CDFS:
            assert upper / low < 1.05  # was 1.13
        else:
            assert low > 2.2 * per_block  # gap 3.16 → 1.38


def test_plans_state_it_and_verify_and_tampering_is_refused():
    dom = Domain(["x", "g", "y"], [100, 2, 100])
    plan = build_structured_plan(CDFS, "rho=0.5", domain=dom, strategy="union")
    c = plan.certificate
    assert c["subspace"]["method"] == sb.METHOD and c["lower"] == c["subspace"]["lower"]
    assert c["gap"] < 0.05
    assert verify_structured_plan(plan).passed
    raised = dataclasses.replace(plan, certificate={**c, "lower": c["lower"] * 1.01,
                                                    "subspace": {**c["subspace"], "lower": c["lower"] * 1.01}})
    assert not verify_structured_plan(raised).passed
    arrays = dict(plan.certificate_arrays)
    s2 = arrays["cert.sub.s.2"].copy()
    s2[0, :50] *= 3.0  # other weights: a lower bound, not the one stated
    arrays["cert.sub.s.2"] = s2
    assert not verify_structured_plan(dataclasses.replace(plan, certificate_arrays=arrays)).passed
    del arrays["cert.sub.basis.0"]
    assert not verify_structured_plan(dataclasses.replace(plan, certificate_arrays=arrays)).passed


def test_gamma_2_plans_state_it_and_verify():
    dom = Domain(["x", "g", "y"], [100, 2, 100])
    plan = build_structured_plan(CDFS, "rho=0.5", domain=dom, strategy="union", norm="gamma_2")
    assert "subspace" in plan.certificate
    assert verify_structured_plan(plan).passed
    old = union.certificate_lower(plan, parse_workload(CDFS))
    assert plan.certificate["lower"] > 1.2 * old
