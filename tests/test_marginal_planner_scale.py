"""The marginal planner at scale: the vectorised incidence, the sparse + low-rank Newton
step of the γ₂ dual, and certified plans for tens of thousands of blocks.

Truth used: the plain Python enumeration of submasks (the incidence); a dense
``np.linalg.solve`` of the Newton matrix (the structured solve); closed forms for
families symmetric under permuting the attributes (all k-way marginals over d attributes
of one size n: every row has the same norm, so ``γ₂ = γ_F = ||W||_tr / √(N k)`` with
``λ_T = C(d−|T|, k−|T|) n^{d−k}``); and γ_F ≤ γ₂.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

import factorize.planner.marginal_algebra as ma
import factorize.planner.marginal_optimum as mp
from factorize.planner.marginal_algebra import MarginalFamily, closure, mask_of, submasks, subset_dim
from factorize.planner.marginal_optimum import solve_marginals
from workloads import marginals

ADULT = (85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2)


def _family(sizes, subsets, weights=None) -> MarginalFamily:
    sizes = tuple(sizes)
    subsets = tuple(tuple(S) for S in subsets)
    return MarginalFamily(sizes=sizes, subsets=subsets,
                          rows=tuple(math.prod(sizes[j] for j in S) for S in subsets),
                          weights=None if weights is None else tuple(weights))


def _all_way(sizes, ways) -> MarginalFamily:
    d = len(sizes)
    return _family(sizes, [S for w in ways for S in itertools.combinations(range(d), w)])


def _symmetric_gamma(d: int, way: int, n: int) -> float:
    """``||W||_tr / √(N k)`` for all ``way``-way marginals over d attributes of size n."""
    tr = sum(math.comb(d, t) * (n - 1) ** t * math.sqrt(math.comb(d - t, way - t) * n ** (d - way))
             for t in range(way + 1))
    return tr / math.sqrt(n ** d * math.comb(d, way) * n ** way)


# ------------------------------------------------------------------------------ incidence
def _python_incidence(fam: MarginalFamily):
    # attributes of size 1 carry no P_T of positive rank: the subsets T ⊆ S over the others
    nontrivial = mask_of(j for j, n in enumerate(fam.sizes) if n > 1)
    pairs, seen = set(), set()
    for b in fam.distinct_blocks():
        for t in submasks(b.mask & nontrivial):
            pairs.add((b.mask, t))
            seen.add(t)
    return sorted(seen, key=lambda t: (t.bit_count(), t)), pairs


@pytest.mark.parametrize("seed", range(6))
def test_incidence_matches_python_enumeration(seed):
    rng = random.Random(seed)
    d = rng.choice([3, 7, 40, 70])  # 70: masks beyond int64
    sizes = [rng.choice([1, 2, 3, 5]) for _ in range(d)]
    subsets = [tuple(sorted(rng.sample(range(d), rng.randint(0, min(d, 5))))) for _ in range(40)]
    subsets += subsets[:5]  # repeats
    fam = _family(sizes, subsets)
    masks, pairs = _python_incidence(fam)
    inc = fam.incidence
    assert list(inc.masks) == masks == closure(fam)
    got = {(inc.blocks[s].mask, inc.masks[t]) for t, s in zip(inc.pair_t.tolist(), inc.pair_s.tolist(), strict=True)}
    assert got == pairs and inc.nnz == len(pairs)
    assert [mask_of(T) for T in inc.subsets] == masks
    dims = ma.attribute_product(np.array(sizes) - 1.0, inc.attrs)
    assert dims.tolist() == [float(subset_dim(fam.sizes, t)) for t in masks]
    assert [b.mask for b in inc.blocks] == [m for m, _ in fam.unique()]


def test_unique_rows_wide_keys_fall_back_to_row_sort():
    R = np.array([[9, 4], [3, 1], [9, 4], [9, 2]], dtype=np.int64)
    for bits in (4, 40):  # 2·40 > 62 bits: np.unique over rows
        uniq, inv = ma._unique_rows(R, bits)
        assert uniq.tolist() == [[3, 1], [9, 2], [9, 4]]
        assert inv.tolist() == [2, 0, 2, 1]


def test_algebra_term_limit_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(ma, "MAX_ALGEBRA_TERMS", 100)
    with pytest.raises(ValueError, match="MAX_ALGEBRA_TERMS"):
        closure(_all_way([2] * 10, [3]))


# ------------------------------------------------------------------------------ Newton step
def _dense_newton(Q, w, h, mu):
    G = np.sqrt(h)[:, None] * Q * w[None, :]
    return G.T @ G + mu * np.eye(Q.shape[1])


@pytest.mark.parametrize("case", ["flat", "nested", "upto"])
def test_newton_system_matches_dense_solve(case):
    """The Schur-complement solve equals a dense solve of the B×B Newton matrix, also when
    nested blocks (no dominant private row) go to the R set."""
    rng = np.random.default_rng(5)
    if case == "flat":
        fam = _all_way([2, 3, 4, 2, 5, 3], [3])
    elif case == "nested":
        fam = _family((5, 10, 10, 100, 2), [(2, 4), (0, 3), (0, 1, 3), (0, 3, 4), (3,), (0,), (2, 3, 4),
                                            (2, 3), (0, 2, 3)])
    else:
        fam = _all_way([3, 2, 4, 3, 2], [0, 1, 2, 3])
    _, Q = mp._gamma2_matrix(fam)
    m, B = Q.shape
    Qd = Q.toarray()
    system = mp._NewtonSystem(Q)
    for scale in (1.0, 1e-6):
        w = rng.uniform(0.1, 1.0, B)
        w[rng.random(B) < 0.3] *= scale  # some nearly inactive blocks
        w /= w.sum()
        L = Qd @ w
        h = 0.25 / (L * np.sqrt(L))
        for mu in (1e-2, 1e-9):
            rhs = rng.normal(size=(B, 2))
            z = system.solve(w, h, mu, rhs)
            M = _dense_newton(Qd, w, h, mu)
            ref = np.linalg.solve(M, rhs)
            np.testing.assert_allclose(M @ z, rhs, rtol=0, atol=1e-8 * np.abs(rhs).max())
            np.testing.assert_allclose(z, ref, rtol=1e-6, atol=1e-9 * np.abs(ref).max())
    if case != "flat":
        assert system.max_r > 0  # the nested-block path was exercised


def test_gamma2_core_memory_limit_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(mp, "MAX_GAMMA2_CORE_BYTES", 1000)
    with pytest.raises(ValueError, match="MAX_GAMMA2_CORE_BYTES"):
        solve_marginals(_all_way([2, 3, 4, 5, 2, 3], [3]), "gamma_2")
    assert not hasattr(mp, "MAX_GAMMA2_BLOCKS")


# ------------------------------------------------------------------------------ big families
THIRTY = {"mixed": [2 + (7 * j) % 9 for j in range(30)], "binary": [2] * 30, "ten": [10] * 30}


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
@pytest.mark.parametrize("variant", list(THIRTY))
def test_three_way_over_thirty_attributes(variant, norm):
    """Certified at 4,060 blocks (the time is measured in reports/bench_marginals.md)."""
    sizes = THIRTY[variant]
    fam = _all_way(sizes, [3])
    assert len(fam.subsets) == 4060
    sol = solve_marginals(fam, norm)  # solve + verification
    assert sol.verified and sol.gap <= 1e-6
    if variant != "mixed":
        truth = _symmetric_gamma(30, 3, sizes[0])
        assert sol.lower <= truth * (1 + 1e-12) and truth <= sol.upper * (1 + 1e-12)
    else:
        assert solve_marginals(fam, "gamma_f").lower <= sol.upper


def test_three_way_over_thirty_attributes_from_the_workload():
    """The workload route (detection from marginal_structure, fingerprint)."""
    W = marginals(THIRTY["mixed"], 3)
    sol = solve_marginals(W, "gamma_2")
    assert sol.verified and sol.gap <= 1e-6 and sol.summary_dict()["subsets"] == 4060


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_two_way_over_a_hundred_binary_attributes(norm):
    fam = _all_way([2] * 100, [2])
    sol = solve_marginals(fam, norm)
    assert sol.verified and sol.gap <= 1e-6
    truth = _symmetric_gamma(100, 2, 2)
    assert sol.lower <= truth * (1 + 1e-12) and truth <= sol.upper * (1 + 1e-12)
    assert sol.summary_dict()["shape"] == [4950 * 4, 2 ** 100]


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_adult_up_to_three_way(norm):
    fam = _all_way(ADULT, [0, 1, 2, 3])
    sol = solve_marginals(fam, norm)
    assert sol.verified and sol.gap <= 1e-9
    if norm == "gamma_2":
        assert sol.value >= solve_marginals(fam, "gamma_f").lower
        assert sol.details["max_nested_columns"] > 0  # the nested blocks are active


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_three_way_over_fifty_attributes(norm):
    fam = _all_way([2 + (7 * j) % 9 for j in range(50)], [3])
    assert len(fam.subsets) == 19600
    sol = solve_marginals(fam, norm)
    assert sol.verified and sol.gap <= 1e-6
