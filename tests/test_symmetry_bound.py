"""The symmetry-reduced γ_F dual (``structured.symmetry`` and
``solvers.dual_gamma_f_symmetric``), against independent truth:

* at any orbit weights, the certified sector sum is ≤ the dense trace norm ‖W D^{1/2}‖_tr of the
  N-column workload and equal to it to 1e-10 (a second algorithm: one SVD);
* its maximum equals the dense solver's certified γ_F optimum (``solvers.dual_gamma_f``,
  no reduction) to 1e-6 on random unions of every factor kind (fixed seeds);
* twin classes are exactly the refinement of random groupings, on integer and non-integer
  factors; a partition that is not one is refused;
* plans state it, ``verify`` re-derives it, and a forged weight, class or claim is refused.
"""

from __future__ import annotations

import dataclasses
import math
import random
from functools import reduce

import numpy as np
import pytest
from random_unions import draw

from factorize.structured import symmetry
from factorize.structured.workload_blocks import AxisFactor, workload_blocks
from solvers.dual_gamma_f import solve_gamma_f_dual
from solvers.dual_gamma_f_symmetric import solve_symmetric_gamma_f
from workloads import Domain
from workloads.spec import parse_workload

SEEDS = (3, 11, 19, 27, 35, 43, 51, 59)


def _dense(W, sizes):
    blocks = workload_blocks(W, sizes)
    return np.vstack([b.weight * reduce(np.kron, [f.dense() for f in b.factors]) for b in blocks]), blocks


def _cells(red, d):
    """Per-cell weights of orbit weights d (attribute 0 slowest)."""
    return np.asarray(d)[np.ix_(*red.labels)].reshape(-1)


def _grouping(labels, n):
    return np.array([[1.0 if labels[x] == g else 0.0 for x in range(n)] for g in sorted(set(labels))])


def test_sector_sum_is_the_dense_trace_norm(tmp_path):
    rng = np.random.default_rng(5)
    G1 = _grouping([0, 0, 1, 1, 1, 2], 6)
    np.save(tmp_path / "g.npy", G1)
    spec = (f"vstack(kron(file:{tmp_path}/g.npy,identity:4,total:3),scale(2,kron(total:6,"
            f"vstack(identity:4,total:4),identity:3)),kron(identity:6,total:4,prefix:3))")
    sizes = (6, 4, 3)
    W, blocks = _dense(parse_workload(spec), sizes)
    red = symmetry.reduce(blocks, sizes, min_reduction=1.0)
    assert red.shape == (3, 1, 3)
    for _ in range(5):
        d = rng.uniform(0.1, 2.0, size=red.shape)
        exact = float(np.linalg.svd(W * np.sqrt(_cells(red, d))[None, :], compute_uv=False).sum())
        lower = symmetry.certified_trace(red, d)
        assert lower <= exact and lower == pytest.approx(exact, rel=1e-10)
        f, diag, _ = symmetry.evaluate(red, d)
        assert f == pytest.approx(exact, rel=1e-8)  # float sum: √ of rounding-level eigenvalues
        # the per-orbit diagonal sums are the dense M^{1/2}'s
        q = _cells(red, d)
        M = np.sqrt(q)[:, None] * (W.T @ W) * np.sqrt(q)[None, :]
        lam, V = np.linalg.eigh(M)
        root_diag = (V * V) @ np.where(lam > 1e-13 * lam[-1], np.sqrt(np.clip(lam, 0, None)), 0.0)
        orbit = np.ravel_multi_index(tuple(np.meshgrid(*red.labels, indexing="ij")), red.shape).reshape(-1)
        assert np.allclose(np.bincount(orbit, weights=root_diag), diag.reshape(-1), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_reduced_optimum_is_the_dense_optimum(seed, tmp_path):
    case = draw(random.Random(seed), tmp_path, max_cells=256)
    W, blocks = _dense(parse_workload(case.spec), case.sizes)
    red = symmetry.reduce(blocks, case.sizes, min_reduction=1.0)  # also where it does not shrink
    assert red is not None
    res = solve_symmetric_gamma_f(red, target_gap=1e-10, max_iters=2500, stall_iters=300, progress_tol=0.0)
    lower = symmetry.certified_lower(red, res.weights)
    dense = solve_gamma_f_dual(W.T @ W, W.shape[0], target_gap=1e-10, max_iters=4000, stall_iters=200)
    assert lower <= dense.upper_estimate * (1 + 1e-12)
    assert lower == pytest.approx(dense.upper_estimate, rel=1e-6), case.spec
    # the bound is homogeneous in the weights: any positive multiple certifies the same value
    assert symmetry.certified_lower(red, 7.0 * res.weights) == pytest.approx(lower, rel=1e-12)


def test_twin_classes_refine_groupings():
    rng = np.random.default_rng(8)
    n = 12
    a, b = rng.integers(0, 3, size=n), rng.integers(0, 4, size=n)
    factors = [AxisFactor("matrix", n, _grouping(a, n)), AxisFactor("matrix", n, 0.1 * _grouping(b, n))]
    grams = [symmetry.exact_gram(f) for f in factors]
    labels = symmetry.twin_classes(grams, n)
    pairs = {(int(x), int(y)) for x, y in zip(a, b, strict=True)}
    assert len(set(labels.tolist())) == len(pairs)
    for i in range(n):
        for j in range(n):
            assert (labels[i] == labels[j]) == (a[i] == a[j] and b[i] == b[j])
    assert symmetry.classes_valid(grams, labels)
    assert not symmetry.classes_valid(grams, np.zeros(n, dtype=np.int64))
    # 0.1 is not a binary fraction: the exact Gram tells 0.1·0.1·3 from 0.1·0.1·2 + 0.01
    assert symmetry.exact_gram(factors[1]).dtype == object


def test_identity_and_total_factors_make_one_class_and_the_marginal_optimum():
    spec = "vstack(kron(identity:5,total:4),kron(total:5,identity:4),kron(identity:5,identity:4))"
    W, blocks = _dense(parse_workload(spec), (5, 4))
    red = symmetry.reduce(blocks, (5, 4), min_reduction=1.0)
    assert red.shape == (1, 1) and len(red.sectors) == 4
    res = solve_symmetric_gamma_f(red)
    dense = solve_gamma_f_dual(W.T @ W, W.shape[0], target_gap=1e-10)
    assert symmetry.certified_lower(red, res.weights) == pytest.approx(dense.upper_estimate, rel=1e-9)


def test_stated_classes_are_checked(tmp_path):
    np.save(tmp_path / "g.npy", _grouping([0, 0, 1, 1], 4))
    blocks = workload_blocks(parse_workload(f"kron(file:{tmp_path}/g.npy,identity:3)"), (4, 3))
    with pytest.raises(ValueError, match="twin classes"):
        symmetry.reduce(blocks, (4, 3), [np.array([0, 0, 0, 1]), np.zeros(3, dtype=np.int64)],
                        min_reduction=1.0)
    with pytest.raises(ValueError, match="0…m−1"):
        symmetry.reduce(blocks, (4, 3), [np.array([0, 0, 2, 2]), np.zeros(3, dtype=np.int64)],
                        min_reduction=1.0)
    assert symmetry.reduce(blocks, (4, 3), [np.array([0, 0, 1, 1]), np.zeros(3, dtype=np.int64)],
                           min_reduction=1.0) is not None


# ------------------------------------------------------------------------------ plans
def _plan(tmp_path, privacy="rho=0.5"):
    from factorize.kinds.structured.build import build_structured_plan

    np.save(tmp_path / "age.npy", _grouping([0, 0, 0, 1, 1, 2, 2, 2], 8))
    np.save(tmp_path / "race.npy", np.vstack([_grouping([0, 0, 1, 1, 1, 2], 6), np.ones((1, 6))]))
    spec = (f"vstack(kron(identity:2,file:{tmp_path}/race.npy,file:{tmp_path}/age.npy),"
            f"kron(total:2,identity:6,total:8),kron(identity:2,total:6,identity:8),"
            f"kron(total:2,file:{tmp_path}/race.npy,total:8))")
    return spec, build_structured_plan(spec, privacy, domain=Domain(["sex", "race", "age"], [2, 6, 8]),
                                       strategy="union")


def test_plans_state_the_bound_and_verify_rederives_it(tmp_path):
    from factorize.kinds.structured.verify import verify_structured_plan

    spec, plan = _plan(tmp_path)
    c = plan.certificate
    assert c["symmetry"]["method"] == symmetry.METHOD and c["lower"] == c["symmetry"]["lower"]
    W, _ = _dense(parse_workload(spec), (2, 6, 8))
    dense = solve_gamma_f_dual(W.T @ W, W.shape[0], target_gap=1e-10)
    assert c["lower"] == pytest.approx(dense.upper_estimate, rel=1e-6)
    assert c["lower"] <= c["upper"]
    check = verify_structured_plan(plan)
    assert check.passed, check.failures


@pytest.mark.parametrize("forgery", ["weights", "classes", "claim"])
def test_forged_symmetry_certificates_are_refused(tmp_path, forgery):
    from factorize.kinds.structured.verify import verify_structured_plan
    from factorize.numerics import relative_gap

    _, plan = _plan(tmp_path)
    arrays = dict(plan.certificate_arrays)
    c = dict(plan.certificate)
    if forgery == "weights":  # weights piled on one orbit: a lower value, stated as before
        d = np.zeros_like(arrays["cert.sym.d"])
        d[0, 0] = 1.0
        arrays["cert.sym.d"] = d
    elif forgery == "classes":  # two values that are not twins put in one class
        arrays["cert.sym.labels.2"] = np.zeros_like(arrays["cert.sym.labels.2"])
    else:
        claim = c["lower"] * 1.05
        c.update(lower=claim, gap=relative_gap(c["upper"], claim), symmetry={**c["symmetry"], "lower": claim})
    plan = dataclasses.replace(plan, certificate_arrays=arrays, certificate=c)
    check = verify_structured_plan(plan)
    assert not check.passed
    assert any("claims" in f for f in check.failures), check.failures


def test_reduction_declines_large_sectors(monkeypatch):
    blocks = workload_blocks(parse_workload("kron(prefix:8,prefix:8)"), (8, 8))
    # no symmetry (prefix factors): the reduced dual would be the dense one, which a plan leaves
    # to the dense family; the math still holds when asked for
    assert symmetry.reduce(blocks, (8, 8)) is None
    assert symmetry.reduce(blocks, (8, 8), min_reduction=1.0).shape == (8, 8)
    monkeypatch.setattr(symmetry, "MAX_SECTOR", 63)
    assert symmetry.reduce(blocks, (8, 8), min_reduction=1.0) is None
    assert math.prod((8, 8)) == 64
