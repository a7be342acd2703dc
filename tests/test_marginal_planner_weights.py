"""Weighted marginal families in the planner, and the plan-builder helpers of
``MarginalSolution`` (diagonal shares, block variances, total variance).

Truth used: the generic planner (``factorize.planner.routes.solve(..., method="dual")``) on the
dense matrix, which knows nothing of the algebra; the dense plan ``R = W A⁺`` (its row
norms and Frobenius norm); the SVD-based certificate formulas of ``factorize.planner.certificate``
(the Lee–Shraibman–Špalek bound with p on the rows of the heaviest copies); and exact
invariances (scaling every weight by c scales γ by c; a lighter copy of a block leaves γ₂
unchanged).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from factorize.planner import certificate
from factorize.planner.marginal_algebra import MarginalFamily, mask_of, projector_dense
from factorize.planner.marginal_optimum import solve_marginals, verify_marginal_solution
from factorize.planner.routes import solve
from workloads import DenseWorkload, KronWorkload, VStackWorkload, identity, total

FAMILIES = [
    ((2, 3, 4), [(0, 2), (), (1,), (0, 2), (0, 1, 2), (1, 2), (0, 2)], [2.0, 0.5, 3.0, 1.0, 0.7, 1.3, 2.0]),
    ((3, 3), [(0,), (1,), (0, 1), (0,)], [0.25, 4.0, 1.0, 1.5]),
    ((2, 2, 3), [(0, 1), (1, 2), (0, 2), (0,), ()], [1.0, 3.0, 0.2, 5.0, 10.0]),
]


def _workload(sizes, subsets, weights):
    return VStackWorkload([
        KronWorkload(([DenseWorkload([[w]])] if w != 1.0 else [])
                     + [identity(n) if j in S else total(n) for j, n in enumerate(sizes)])
        for S, w in zip(subsets, weights, strict=True)])


def _family(sizes, subsets, weights=None):
    return MarginalFamily(sizes=tuple(sizes), subsets=tuple(tuple(S) for S in subsets),
                          rows=tuple(math.prod(sizes[j] for j in S) for S in subsets),
                          weights=None if weights is None else tuple(weights))


def _dense_plan(sol):
    fam = sol.family
    A = sum(math.sqrt(v) * projector_dense(fam.sizes, mask_of(T))
            for T, v in zip(sol.x.subsets, sol.x.values, strict=True))
    return A


def _heaviest_p(fam, sol):
    wmap = {mask_of(S): w for S, w in zip(sol.weight_subsets, sol.weights, strict=True)}
    wmax = {b.mask: b.max_weight for b in fam.distinct_blocks()}
    copies = {}
    for S, w in zip(fam.subsets, fam.weights, strict=True):
        if w == wmax[mask_of(S)]:
            copies[mask_of(S)] = copies.get(mask_of(S), 0) + 1
    return np.concatenate([
        np.full(r, wmap.get(mask_of(S), 0.0) / (r * copies[mask_of(S)]) if w == wmax[mask_of(S)] else 0.0)
        for S, r, w in zip(fam.subsets, fam.rows, fam.weights, strict=True)])


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
@pytest.mark.parametrize("sizes, subsets, weights", FAMILIES)
def test_weighted_plans_agree_with_the_dense_generic_planner(sizes, subsets, weights, norm):
    W = _workload(sizes, subsets, weights)
    Wd = W.dense()
    sol = solve_marginals(W, norm, gap_tol=1e-9)
    assert sol.family.weights == tuple(weights)
    ref = solve(DenseWorkload(Wd), norm, method="dual")
    assert sol.value == pytest.approx(ref.value, rel=1e-6)
    assert sol.lower <= ref.upper * (1 + 1e-12) and ref.lower <= sol.upper * (1 + 1e-12)
    # the plan as dense matrices: R·A = W, its norms are the certified upper bound, and the
    # SVD certificate with the witness reproduces the lower bound
    A = _dense_plan(sol)
    R = Wd @ np.linalg.pinv(A)
    assert np.max(np.abs(R @ A - Wd)) < 1e-9 * np.max(np.abs(Wd))
    assert np.sqrt(np.max(np.sum(A * A, axis=0))) == pytest.approx(1.0, rel=1e-12)
    N = Wd.shape[1]
    q = np.full(N, 1.0 / N)
    if norm == "gamma_f":
        value = np.linalg.norm(R) / math.sqrt(Wd.shape[0])
        lower = certificate.gamma_f_lower(Wd, q)
    else:
        value = np.sqrt(np.max(np.sum(R * R, axis=1)))
        lower = certificate.gamma_2_lower(Wd, _heaviest_p(sol.family, sol), q)
    assert value == pytest.approx(sol.upper, rel=1e-10)
    assert lower == pytest.approx(sol.lower, rel=1e-10)
    # the helpers: per-row variances of R, block by block, and ||R||_F²
    f = sol.block_variances()
    offsets = np.cumsum((0,) + sol.family.rows)
    rows2 = np.sum(R * R, axis=1)
    for b, (S, w) in enumerate(zip(sol.family.subsets, sol.family.weights, strict=True)):
        np.testing.assert_allclose(rows2[offsets[b]:offsets[b + 1]], f[(S, w)], rtol=1e-10)
    assert sol.total_variance() == pytest.approx(float(np.sum(R * R)), rel=1e-10)


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_scaling_every_weight_scales_the_norm(norm):
    sizes, subsets, weights = FAMILIES[0]
    base = solve_marginals(_family(sizes, subsets, weights), norm)
    scaled = solve_marginals(_family(sizes, subsets, [3.0 * w for w in weights]), norm)
    assert scaled.value == pytest.approx(3.0 * base.value, rel=1e-9)


def test_a_lighter_copy_leaves_gamma2_and_moves_gamma_f():
    sizes, subsets = (2, 3, 4), [(0, 2), (1,), (0, 1, 2)]
    plain = _family(sizes, subsets, [2.0, 1.0, 1.0])
    more = _family(sizes, subsets + [(0, 2)], [2.0, 1.0, 1.0, 0.5])
    g_plain, g_more = solve_marginals(plain, "gamma_2"), solve_marginals(more, "gamma_2")
    assert g_more.value == pytest.approx(g_plain.value, rel=1e-9)
    f_plain, f_more = solve_marginals(plain, "gamma_f"), solve_marginals(more, "gamma_f")
    assert abs(f_more.value - f_plain.value) > 1e-3 * f_plain.value


def test_unit_weights_reproduce_the_unweighted_family():
    sizes, subsets = (2, 3, 4), [(0, 2), (1,), (0, 1, 2), ()]
    for norm in ("gamma_f", "gamma_2"):
        a = solve_marginals(_family(sizes, subsets), norm)
        b = solve_marginals(_family(sizes, subsets, [1.0] * 4), norm)
        assert a.upper == b.upper and a.lower == b.lower


# ------------------------------------------------------------------------------ helpers
@pytest.mark.parametrize("sizes, subsets, weights", FAMILIES + [
    ([2 + (7 * j) % 9 for j in range(12)], list(itertools.combinations(range(12), 3)), None),
    ([3, 5, 2, 4, 7, 2, 9], [S for w in range(4) for S in itertools.combinations(range(7), w)], None),
])
def test_block_variances_at_the_optimum(sizes, subsets, weights):
    fam = _family(sizes, subsets, weights)
    g2 = solve_marginals(fam, "gamma_2")
    y = g2.diagonal_shares()
    assert math.fsum(y.values()) == pytest.approx(1.0, rel=1e-13)
    assert set(y) == set(g2.x.subsets) and all(v > 0 for v in y.values())
    f = g2.block_variances()
    assert set(f) == set(zip(fam.subsets, fam.weights, strict=True))
    assert max(f.values()) == pytest.approx(g2.upper ** 2, rel=1e-9)
    assert max(f.values()) <= g2.upper ** 2
    gf = solve_marginals(fam, "gamma_f")
    assert gf.total_variance() / fam.k == pytest.approx(gf.upper ** 2, rel=1e-9)
    assert gf.total_variance() / fam.k <= gf.upper ** 2
    # the γ₂ plan is no better in total variance, the γ_F plan no better in max variance
    assert g2.total_variance() >= gf.total_variance() * (1 - 1e-9)
    assert max(gf.block_variances().values()) >= max(f.values()) * (1 - 1e-9)


def test_tampered_weighted_witness_is_rejected():
    sizes, subsets, weights = FAMILIES[0]
    fam = _family(sizes, subsets, weights)
    sol = solve_marginals(fam, "gamma_2")
    assert verify_marginal_solution(fam, sol)[3]
    # the same plan judged against the unweighted family: a different matrix, and the
    # certificate no longer brackets it tightly (or fails)
    plain = _family(sizes, subsets)
    upper, lower, gap, ok, _ = verify_marginal_solution(plain, sol)
    assert not ok or gap > 1e-6


def test_block_weights_come_as_a_pair():
    """γ₂ states its dual weights with their subsets, γ_F neither; a solution stating only one
    of the two is refused (CertificateInvalidError) instead of being summarised."""
    import dataclasses

    from solvers.errors import CertificateInvalidError

    sizes, subsets, weights = FAMILIES[0]
    fam = _family(sizes, subsets, weights)
    assert solve_marginals(fam, "gamma_f").block_weights() is None
    sol = solve_marginals(fam, "gamma_2")
    assert sol.block_weights() == (sol.weight_subsets, sol.weights) and sol.weights
    assert sol.summary_dict()["block_weights"]["weights"] == list(sol.weights)
    for half in ({"weights": None}, {"weight_subsets": None}):
        with pytest.raises(CertificateInvalidError):
            dataclasses.replace(sol, **half).block_weights()


@pytest.mark.parametrize("bad", [("a",), (True,), ([0],), (2, 0), (0, 0), (7,), (0.5,)])
def test_malformed_subsets_fail_cleanly(bad):
    import dataclasses

    from factorize.planner.marginal_algebra import AlgebraCoefficients

    sizes, subsets, weights = FAMILIES[0]
    fam = _family(sizes, subsets, weights)
    sol = solve_marginals(fam, "gamma_2")
    x = AlgebraCoefficients.__new__(AlgebraCoefficients)  # bypass validation, as a forger would
    object.__setattr__(x, "sizes", sol.x.sizes)
    object.__setattr__(x, "subsets", sol.x.subsets + (bad,))
    object.__setattr__(x, "values", sol.x.values + (1.0,))
    *_, ok, failures = verify_marginal_solution(fam, dataclasses.replace(sol, x=x))
    assert not ok and failures
    forged = dataclasses.replace(sol, weight_subsets=sol.weight_subsets[:-1] + (bad,))
    *_, ok, failures = verify_marginal_solution(fam, forged)
    assert not ok and failures
