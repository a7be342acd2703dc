"""The sensitivity of a union of Kronecker blocks, exact from the structure.

Truth is brute force over the densified strategy: exact rational arithmetic (integers per
block times ``Fraction(scale)``) when every measured factor has integer entries, float64
otherwise (then within ``FLOAT_TOL``, the brute force's own rounding). The certified value
must be ≥ the brute force always, and ≤ brute force × (1 + 1e-12) when it says ``exact``.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import factorize.structured.sensitivity as ssens
from factorize.structured.blocks import KronBlock
from factorize.structured.product_max import product_max
from factorize.structured.strategy import StructuredStrategy

FLOAT_TOL = 1e-13   # relative, float64 brute force of sums of ≤ 2000 products
EXACT_TOL = 1e-12   # the certified value's rounding allowance when exact
REPLACE_N = 300     # the replace brute force is O(N²·m): domains up to this size


# ---------------------------------------------------------------------------------------
# random unions


def _factor(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "identity":
        return np.eye(n)
    if kind == "total":
        return np.ones((1, n))
    if kind == "prefix":
        return np.tril(np.ones((n, n)))
    if kind == "allrange":
        return np.array([[1.0 if i <= v <= j else 0.0 for v in range(n)]
                         for i in range(n) for j in range(i, n)])
    if kind == "grouping":  # random 0/1 grouping: each value in one group (some groups empty)
        g = int(rng.integers(1, n + 1))
        G = np.zeros((g, n))
        G[rng.integers(0, g, n), np.arange(n)] = 1.0
        return G
    if kind == "int_dense":  # small signed integer matrix
        return rng.integers(-3, 4, size=(int(rng.integers(1, n + 2)), n)).astype(np.float64)
    if kind == "real_dense":
        return rng.normal(size=(int(rng.integers(1, n + 2)), n))
    raise AssertionError(kind)


KINDS = ("identity", "total", "prefix", "allrange", "grouping", "int_dense", "real_dense")


def _random_union(seed: int, replace: bool) -> StructuredStrategy:
    """1–6 blocks over 2–4 attributes, N ≤ 2000 (≤ ``REPLACE_N`` for the replace brute force),
    each block on a random support with random factors and a random (signed) weight; redrawn
    until the densified strategy is small enough for the brute force."""
    rng = np.random.default_rng(seed)
    while True:
        strat = _draw(rng, REPLACE_N if replace else 2000)
        work = strat.m * strat.N * (strat.N if replace else 1)
        if work <= (3e7 if replace else 3e6):
            return strat


def _draw(rng: np.random.Generator, max_n: int) -> StructuredStrategy:
    while True:
        d = int(rng.integers(2, 5))
        sizes = [int(rng.integers(1, 9)) for _ in range(d)]
        if math.prod(sizes) <= max_n:
            break
    arrays: dict[str, np.ndarray] = {}
    blocks = []
    for b in range(int(rng.integers(1, 7))):
        support = tuple(j for j in range(d) if rng.random() < 0.6)
        names = []
        for j in support:
            kind = KINDS[int(rng.integers(0, len(KINDS)))]
            if kind == "real_dense" and rng.random() < 0.5:
                kind = "identity"  # keep most cases on the exact-rational brute force
            name = f"A.{b}.{j}"
            arrays[name] = _factor(kind, sizes[j], rng)
            names.append(name)
        scale = float(rng.uniform(0.05, 3.0)) * (1.0 if rng.random() < 0.8 else -1.0)
        blocks.append(KronBlock(scale, support, tuple(names)))
    return StructuredStrategy(sizes, blocks, arrays, "union")


def _block_dense(strategy: StructuredStrategy, blk: KronBlock) -> np.ndarray:
    """The block's rows without its scale (integer entries stay integers)."""
    M = np.ones((1, 1))
    names = dict(zip(blk.support, blk.names, strict=True))
    for j, n in enumerate(strategy.sizes):
        M = np.kron(M, strategy.arrays[names[j]] if j in names else np.ones((1, n)))
    return M


def _integral(strategy: StructuredStrategy) -> bool:
    return all(np.array_equal(a, np.round(a)) and np.max(np.abs(a)) < 2 ** 20
               for a in strategy.arrays.values())


def brute_force(strategy: StructuredStrategy, norm: str, relation: str) -> tuple[float, bool]:
    """``(max, exact)``: the largest column norm (add/remove) or column-difference norm
    (replace) of the densified strategy; for L2 the square root of the exact rational
    maximum of squared norms (rounded to nearest). ``exact``: rational arithmetic was used."""
    exact = _integral(strategy)
    p = 1 if norm == "l1" else 2
    per_block = []  # per block: an N (add/remove) or N×N (replace) array of Σ|·|^p, unscaled
    for blk in strategy.blocks:
        D = _block_dense(strategy, blk)
        if exact:
            D = D.astype(np.int64)
        if relation == "add_remove":
            per_block.append(np.sum(np.abs(D) ** p, axis=0))
        else:
            N = D.shape[1]
            per_block.append(np.stack([np.sum(np.abs(D[:, [x]] - D) ** p, axis=0) for x in range(N)]))
    scales = [abs(b.scale) ** p for b in strategy.blocks]
    total = sum(s * t.astype(np.float64) for s, t in zip(scales, per_block, strict=True))
    if relation == "replace":
        np.fill_diagonal(total, -1.0)
    top = float(np.max(total))
    if not exact:
        return (top if p == 1 else math.sqrt(top)), False
    # the exact maximum is among the cells within float error of the float maximum
    fr = [Fraction(abs(b.scale)) ** p for b in strategy.blocks]
    best = Fraction(0)
    for idx in zip(*np.nonzero(total >= top * (1.0 - 1e-9)), strict=True):
        best = max(best, sum((f * int(t[idx]) for f, t in zip(fr, per_block, strict=True)), Fraction(0)))
    if p == 1:
        return float(best), True
    value = math.sqrt(float(best))  # rounded to nearest, then checked against the exact square
    while Fraction(value) ** 2 < best:
        value = math.nextafter(value, math.inf)
    return value, True


CASES = list(range(120))


@pytest.mark.parametrize("seed", CASES)
def test_certified_sensitivity_against_brute_force(seed):
    strat = _random_union(seed, seed % 3 == 0).measured()
    relations = ["add_remove", "replace"] if seed % 3 == 0 else ["add_remove"]
    for relation in relations:
        for norm in ("l1", "l2"):
            got = ssens.strategy_sensitivity(strat, norm, relation)
            truth, rational = brute_force(strat, norm, relation)
            lo = truth if rational else truth * (1.0 - FLOAT_TOL)
            assert got.value >= lo, (relation, norm, got, truth)
            if got.exact:
                assert got.value <= truth * (1.0 + EXACT_TOL) + 1e-300, (relation, norm, got, truth)
            if relation == "add_remove":  # the exact search always completes on these
                assert got.exact, (norm, got)


@pytest.mark.parametrize("seed", range(0, 120, 3))
def test_structured_replace_l2_route_against_brute_force(seed, monkeypatch):
    """Replace L2 from the product maximum (the dense N×N route switched off)."""
    strat = _random_union(seed, True).measured()
    monkeypatch.setattr(ssens, "EXACT_REPLACE_CELLS", 0)
    got = ssens.strategy_sensitivity(strat, "l2", "replace")
    truth, rational = brute_force(strat, "l2", "replace")
    assert got.value >= (truth if rational else truth * (1.0 - FLOAT_TOL))
    if got.exact:
        assert got.value <= truth * (1.0 + EXACT_TOL)


def test_cases_cover_the_relations_and_both_routes(monkeypatch):
    """The random cases exercise replace both exact (a separating partner) and not."""
    monkeypatch.setattr(ssens, "EXACT_REPLACE_CELLS", 0)
    seen = set()
    for seed in CASES:
        if seed % 3:
            continue
        strat = _random_union(seed, True).measured()
        for norm in ("l1", "l2"):
            seen.add((norm, ssens.strategy_sensitivity(strat, norm, "replace").exact))
    assert {("l1", True), ("l1", False), ("l2", True), ("l2", False)} <= seen


def test_fallback_bound_is_sound_when_the_budget_runs_out(monkeypatch):
    """Work budgets of 0, 8 and 64 multiplications: the search stops early and states the
    open bound (not exact), which must still be ≥ the brute force; a result it still calls
    exact (every attribute with one column-norm tuple: nothing to search) must be tight."""
    monkeypatch.setattr(ssens, "EXACT_ADD_REMOVE_CELLS", 0)
    monkeypatch.setattr(ssens, "EXACT_REPLACE_CELLS", 0)
    fallbacks = 0
    for seed in range(0, 120, 7):
        strat = _random_union(seed, True).measured()
        for budget in (0, 8, 64):
            monkeypatch.setattr(ssens, "PRODUCT_MAX_BUDGET", budget)
            for relation in ("add_remove", "replace"):
                for norm in ("l1", "l2"):
                    got = ssens.strategy_sensitivity(strat, norm, relation)
                    truth, rational = brute_force(strat, norm, relation)
                    assert got.value >= (truth if rational else truth * (1.0 - FLOAT_TOL))
                    if got.exact:
                        assert got.value <= truth * (1.0 + EXACT_TOL) + 1e-300
                    else:
                        fallbacks += 1
    assert fallbacks >= 40


@pytest.mark.parametrize("heuristic", [True, False])
def test_product_max_exact_against_rational_enumeration(heuristic, monkeypatch):
    """The search itself, on tables with many ties and dominated tuples, in exact arithmetic;
    with a small budget it falls back to an open bound that is still ≥ the maximum. Without
    the coordinate-ascent incumbent (it finds the optimum on such small tables, leaving the
    branch and bound nothing to do) the incumbent is the first tuple of every attribute, so
    the bounds and the pruning alone decide."""
    import factorize.structured.product_max as pm

    if not heuristic:
        monkeypatch.setattr(pm, "_starts", lambda w, tuples: [[0] * len(tuples)])
        monkeypatch.setattr(pm, "_ascend", lambda w, tuples, choice: choice)
    rng = np.random.default_rng(7)
    for _ in range(200):
        d, B = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        sizes = rng.integers(1, 7, size=d)
        tables = [rng.integers(0, 4, size=(int(n), B)).astype(np.float64) * float(rng.uniform(0.1, 2))
                  for n in sizes]
        w = rng.uniform(0.0, 2.0, size=B)
        best = max(sum((Fraction(w[b]) * math.prod(Fraction(tables[j][x[j], b]) for j in range(d))
                        for b in range(B)), Fraction(0))
                   for x in itertools.product(*[range(int(n)) for n in sizes]))
        got = product_max(w, tables)
        assert got.exact and Fraction(got.value) >= best
        assert got.value <= float(best) * (1 + EXACT_TOL) + 1e-300
        at = sum((Fraction(w[b]) * math.prod(Fraction(tables[j][got.argmax[j], b]) for j in range(d))
                  for b in range(B)), Fraction(0))
        assert at == best  # the reported cell attains the maximum
        for budget in (0, 5, 40):
            fb = product_max(w, tables, budget=budget)
            assert Fraction(fb.value) >= best


def test_product_max_refuses_bad_input():
    with pytest.raises(ValueError):
        product_max([1.0, -1.0], [np.ones((2, 2))])
    with pytest.raises(ValueError):
        product_max([1.0], [np.full((2, 1), np.nan)])
    with pytest.raises(ValueError):
        product_max([1.0, 1.0], [np.ones((2, 3))])


# ---------------------------------------------------------------------------------------
# the census-like union planned by `factorize plan` under Laplace


def _grouping(n: int, groups: list[list[int]]) -> np.ndarray:
    G = np.zeros((len(groups), n))
    for g, codes in enumerate(groups):
        G[g, codes] = 1.0
    return G


def _census_spec(tmp) -> str:
    """HDMM's census workload 2 (SF1 persons over sex 2 × hispanic 2 × race 64 × age 115,
    with an identity-and-total attribute of 51 values: N = 1,501,440), its 33 blocks."""
    race1 = np.zeros((7, 64))
    for i in range(6):
        race1[i, 2 ** i] = 1.0
    race1[6] = 1.0 - race1[:6].sum(axis=0)
    race2 = np.zeros((70, 64))
    for i in range(1, 64):
        race2[i - 1, i] = 1.0
        race2[62 + bin(i).count("1"), i] = 1.0
    race2[69] = race2[64:69].sum(axis=0)
    cuts = [0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85, 115]
    mats = {"race1": race1, "race2": race2, "white": _grouping(64, [[1]]),
            "isH": _grouping(2, [[0]]), "notH": _grouping(2, [[1]]),
            "adult": _grouping(115, [list(range(18, 115))]),
            "age1": _grouping(115, [list(range(a, b)) for a, b in zip(cuts, cuts[1:], strict=False)]),
            "age3": _grouping(115, [[a] for a in range(100)] + [list(range(100, 105)),
                                                               list(range(105, 110)),
                                                               list(range(110, 115))])}
    F = {}
    for k, M in mats.items():
        np.save(tmp / f"{k}.npy", M)
        F[k] = f"file:{tmp / f'{k}.npy'}"
    T, I = (lambda n: f"total:{n}"), (lambda n: f"identity:{n}")
    IT = lambda n: f"vstack(identity:{n},total:{n})"  # noqa: E731
    P1 = [T(2), T(2), T(64), T(115)]
    P4a = [T(2), I(2), T(64), T(115)]
    P10b = [T(2), T(2), T(64), F["adult"]]
    P12b = [IT(2), T(2), T(64), T(115)]
    P12_b = [IT(2), T(2), F["race1"], T(115)]
    P12_d = [IT(2), F["isH"], T(64), T(115)]
    blocks = [P1, [T(2), T(2), F["race1"], T(115)], P1, P4a, P1, [T(2), I(2), F["race1"], T(115)],
              [T(2), IT(2), T(64), T(115)], [T(2), T(2), F["race2"], T(115)], P1, P4a,
              [T(2), F["notH"], F["race2"], T(115)], P1, [T(2), T(2), F["race2"], F["adult"]], P10b,
              [T(2), I(2), T(64), F["adult"]], [T(2), F["notH"], F["race2"], F["adult"]], P10b,
              [I(2), T(2), T(64), F["age1"]], P12b, [I(2), T(2), F["race1"], F["age1"]], P12_b,
              [I(2), F["isH"], T(64), F["age1"]], P12_d, [I(2), F["notH"], F["white"], F["age1"]],
              [IT(2), F["notH"], F["white"], T(115)], [I(2), T(2), T(64), F["age3"]], P12b,
              [I(2), T(2), F["race1"], F["age3"]], P12_b, [I(2), F["isH"], T(64), F["age3"]], P12_d,
              [I(2), F["notH"], F["race1"], F["age3"]], [IT(2), F["notH"], F["race1"], T(115)]]
    return "vstack(" + ",".join("kron(" + ",".join(b + [IT(51)]) + ")" for b in blocks) + ")"


def _largest_column_l1(strategy: StructuredStrategy) -> float:
    """Independent truth: every cell's column L1 norm, Σ_b |s_b| ⊗_j ‖F_{b,j}[:, x_j]‖₁ over
    all N cells (float64, relative error ≲ 1e-15), and its maximum."""
    total = np.zeros(strategy.N)
    for blk in strategy.blocks:
        names = dict(zip(blk.support, blk.names, strict=True))
        v = np.full(1, abs(blk.scale))
        for j, n in enumerate(strategy.sizes):
            c = np.abs(strategy.arrays[names[j]]).sum(axis=0) if j in names else np.ones(n)
            v = np.kron(v, c)
        total += v
    return float(total.max())


def test_census_union_laplace_plan_is_calibrated_to_its_exact_sensitivity(tmp_path):
    from factorize.cli import main
    from factorize.kinds import load_plan

    spec = _census_spec(tmp_path)
    out = tmp_path / "census.plan"
    assert main(["plan", "--workload", spec, "--privacy", "epsilon=1", "--strategy", "union", "--out", str(out)]) == 0
    plan = load_plan(out)
    assert plan.noise.family == "laplace" and plan.strategy.N == 1_501_440
    # beyond the old exact route's reach (blocks × cells > 2^25): the structure decides
    assert plan.strategy.N * len(plan.strategy.blocks) > ssens.EXACT_ADD_REMOVE_WORK
    truth = _largest_column_l1(plan.strategy.measured())
    assert plan.noise.base_sensitivity >= truth * (1.0 - FLOAT_TOL)
    assert plan.noise.base_sensitivity <= truth * (1.0 + EXACT_TOL)
    assert plan.provenance["sensitivity_exact"] is True
    assert json.loads(json.dumps(plan.provenance["sensitivity_exact"])) is True
    # the sum of per-block maxima (what the plan was calibrated to before) is 1.32× more
    stats = {n: ssens._stats(a, False) for n, a in plan.strategy.measured().arrays.items()}
    loose = ssens._bound(plan.strategy.measured(), stats, "l1", False)
    assert loose > 1.3 * truth


def test_pure_dp_union_evaluation_uses_the_exact_sensitivity():
    """``pure_dp.evaluate_union`` (the OPT_+ candidate's stated error): the L1 sensitivity is
    the densified union's largest column L1 norm, not the sum of per-block maxima."""
    from factorize.pure_dp.evaluate import evaluate_union
    from factorize.pure_dp.structure import product_structure

    spec = "vstack(kron(identity:8,total:4,prefix:6),kron(total:8,identity:4,identity:6),kron(prefix:8,identity:4,total:6))"
    P = product_structure(spec)
    tri = [np.tril(np.ones((8, 8))), np.triu(np.ones((8, 8))), np.eye(8)]  # prefix, suffix
    terms = [(tri[b], np.tril(np.ones((4, 4))) if b == 2 else np.eye(4), np.eye(6)) for b in range(3)]
    weights = [0.5, 0.75, 1.25]
    err = evaluate_union(P, weights, terms)
    A = np.vstack([a * _kron_all(t) for a, t in zip(weights, terms, strict=True)])
    truth = float(np.abs(A).sum(axis=0).max())
    assert err.add_remove.exact
    assert truth * (1 - FLOAT_TOL) <= err.add_remove.value <= truth * (1 + EXACT_TOL)
    loose = sum(a * float(np.abs(_kron_all(t)).sum(axis=0).max()) for a, t in zip(weights, terms, strict=True))
    assert loose > 1.2 * truth  # what it stated before


def _kron_all(factors) -> np.ndarray:
    M = np.ones((1, 1))
    for F in factors:
        M = np.kron(M, F)
    return M
