"""Post-processing of workloads of Kronecker blocks (``factorize.postprocess``): every block
read through its factors from the marginal table on its attributes (against the dense
workload), the projection against an independent solver (cvxpy's QP over the local polytope),
raking to consistency, and ``--postprocess integer`` end to end on a plan of CDFs, a cross-tab
requested twice and all 2-way marginals (one consistent estimate: the symmetric family)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from factorize.postprocess.errors import PostprocessError
from factorize.postprocess.nonneg import project_nonneg
from factorize.postprocess.raking import RAKE_TOL, rake_tables
from factorize.postprocess.tables import marginal, marginal_layout
from workloads.spec import parse_workload

#: marginals, a CDF by a second attribute, all ranges of one attribute by another (weighted),
#: and a random 5×4 factor (full column rank); sizes (4, 2, 3)
MIXED = ("vstack(marginals:4x2x3:2,kron(prefix:4,identity:2,total:3),"
         "scale(2.5,kron(total:4,allrange:2,identity:3)),kron(random:5x4:seed=1,total:2,total:3))")
SIZES = (4, 2, 3)


def _histogram(seed: int, rate: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).poisson(rate, size=math.prod(SIZES)).astype(np.float64)


def test_every_block_reads_its_marginal_through_its_factors():
    """y = W h (dense W): each table's target is h's exact marginal and the answers read back
    from the true marginals are W h."""
    W = parse_workload(MIXED)
    layout = marginal_layout(W, SIZES)
    assert layout.tables == ((0, 1), (0, 2), (1, 2), (0,))
    assert [layout.block_table[o] for o in range(6)] == [0, 1, 2, 0, 2, 3]
    h = _histogram(0)
    y = W.dense() @ h
    cube = h.reshape(SIZES)
    truth = [marginal(cube, (0, 1, 2), T) for T in layout.tables]
    targets, c = layout.targets(y)
    for t, m in zip(targets, truth, strict=True):
        assert np.abs(t - m).max() <= 1e-10 * max(1.0, float(np.abs(m).max()))
    assert np.abs(layout.answers(truth) - y).max() <= 1e-10 * float(np.abs(y).max())
    # weights: 1/v_o = w_o² n / ‖G_o⁺‖²_F summed over a table's blocks (marginal blocks: w_o²)
    pinv_sq = [float(np.sum(np.linalg.pinv(parse_workload(f).dense()) ** 2))
               for f in ("prefix:4", "allrange:2", "random:5x4:seed=1")]
    assert c.tolist() == pytest.approx([1.0 + 4.0 / pinv_sq[0], 1.0, 1.0 + 2.5 ** 2 * 2.0 / pinv_sq[1],
                                        4.0 / pinv_sq[2]], rel=1e-12)


def test_the_answers_least_squares_gradient_table_by_table():
    """``adjoint`` and ``gram`` are Bᵀy and BᵀB μ of the linear map B from the tables to the
    answers (``answers``), built densely here from unit tables."""
    layout = marginal_layout(parse_workload(MIXED), SIZES)
    shapes = [layout.shape(T) for T in layout.tables]
    ends = np.cumsum([math.prod(sh) for sh in shapes])

    def split(v):
        return [v[a:e].reshape(sh) for a, e, sh in zip([0, *ends[:-1]], ends, shapes, strict=True)]

    B = np.column_stack([layout.answers(split(e)) for e in np.eye(int(ends[-1]))])
    rng = np.random.default_rng(3)
    y, mu = rng.normal(size=layout.k), rng.normal(size=int(ends[-1]))
    assert np.allclose(np.concatenate([t.ravel() for t in layout.adjoint(y)]), B.T @ y, rtol=0, atol=1e-12)
    assert np.allclose(np.concatenate([t.ravel() for t in layout.gram(split(mu))]), B.T @ B @ mu, rtol=0,
                       atol=1e-10)
    assert not layout.diagonal and marginal_layout(parse_workload("marginals:4x2x3:2"), SIZES).diagonal


def test_estimates_of_one_table_from_separate_blocks_are_averaged_by_their_variances():
    W = parse_workload("vstack(kron(identity:3,identity:2),kron(prefix:3,identity:2))")
    layout = marginal_layout(W, (3, 2))
    y = np.concatenate([np.full(6, 1.0), (np.tril(np.ones((3, 3))) @ np.full((3, 2), 4.0)).ravel()])
    (b,), c = layout.targets(y)
    v_prefix = float(np.sum(np.linalg.pinv(np.tril(np.ones((3, 3)))) ** 2)) / 3  # 5/3
    assert c[0] == pytest.approx(1.0 + 1.0 / v_prefix)
    assert np.allclose(b, (1.0 + 4.0 / v_prefix) / c[0])


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_nonneg_is_the_answers_least_squares_over_the_local_polytope(seed):
    """The ADMM fit (raked) against cvxpy's QP: min Σ_o ‖w_o G_o μ_{S_o} − y_o‖² over
    non-negative tables of total n̂ agreeing on every shared attribute set."""
    cp = pytest.importorskip("cvxpy")
    W = parse_workload(MIXED)
    layout = marginal_layout(W, SIZES)
    rng = np.random.default_rng(100 + seed)
    y = W.dense() @ _histogram(seed, rate=0.5) + 3.0 * rng.normal(size=W.shape[0])
    fit = project_nonneg(layout, y, max_iter=20000, tol=1e-10)
    shapes = [layout.shape(T) for T in layout.tables]
    ends = np.cumsum([math.prod(sh) for sh in shapes])
    starts = [0, *ends[:-1]]
    B = np.column_stack([layout.answers([e[a:z].reshape(sh) for a, z, sh in zip(starts, ends, shapes, strict=True)])
                         for e in np.eye(int(ends[-1]))])
    mu = cp.Variable(int(ends[-1]))
    tables = [mu[a:z] for a, z in zip(starts, ends, strict=True)]
    cons = [mu >= 0] + [cp.sum(t) == fit.n_hat for t in tables]

    def marg(T, U):  # the marginal on U as a matrix on the flat table
        M = np.zeros((math.prod(SIZES[j] for j in U), math.prod(SIZES[j] for j in T)))
        for flat, cell in enumerate(itertools.product(*[range(SIZES[j]) for j in T])):
            M[np.ravel_multi_index(tuple(cell[T.index(j)] for j in U), tuple(SIZES[j] for j in U))
              if U else 0, flat] = 1.0
        return M

    for (s, S), (t, T) in itertools.combinations(enumerate(layout.tables), 2):
        U = tuple(j for j in S if j in T)
        cons.append(marg(S, U) @ tables[s] == marg(T, U) @ tables[t])
    cp.Problem(cp.Minimize(cp.sum_squares(B @ mu - y)), cons).solve(solver=cp.CLARABEL)
    got = np.concatenate([t.ravel() for t in fit.tables])
    assert np.abs(mu.value - got).max() <= 1e-5 * max(1.0, fit.n_hat)
    assert np.sum((B @ got - y) ** 2) <= np.sum((B @ mu.value - y) ** 2) * (1 + 1e-7) + 1e-7


def test_raking_makes_nearly_consistent_tables_consistent_non_negative_of_one_total():
    """Tables {a,b}, {b,c}, {a,c} (each level ≤ 2 parents) perturbed off consistency."""
    sizes = (3, 4, 5)
    cube = np.random.default_rng(7).gamma(1.0, size=sizes)
    cube[0, 0, :] = 0.0  # zero cells stay reachable
    attrs = ((0, 1), (1, 2), (0, 2))
    noisy = [np.maximum(marginal(cube, (0, 1, 2), T) * np.random.default_rng(8 + i).uniform(0.9, 1.1),
                        0.0) for i, T in enumerate(attrs)]
    total = float(cube.sum())
    r = rake_tables(attrs, noisy, np.ones(3), sizes, total)
    assert all(float(t.min()) >= 0.0 and abs(float(t.sum()) - total) <= 1e-12 * total for t in r.tables)
    assert r.disagreement <= RAKE_TOL * total
    for (S, s), (T, t) in itertools.combinations(zip(attrs, r.tables, strict=True), 2):
        U = tuple(j for j in S if j in T)
        assert np.abs(marginal(s, S, U) - marginal(t, T, U)).max() <= 2 * RAKE_TOL * total
    exact = [marginal(cube, (0, 1, 2), T) for T in attrs]
    again = rake_tables(attrs, exact, np.ones(3), sizes, total)
    assert max(float(np.abs(a - e).max()) for a, e in zip(again.tables, exact, strict=True)) <= 1e-9


def test_a_rank_deficient_factor_is_refused_naming_it():
    with pytest.raises(PostprocessError, match=r"block 1's factor on attribute 1 \(2×3\)"):
        marginal_layout(parse_workload("vstack(kron(identity:2,identity:3),kron(total:2,width:3:2))"), (2, 3))


def test_integer_end_to_end_on_a_plan_of_cdfs_and_a_table_asked_twice(tmp_path):
    """``factorize plan --strategy kron --postprocess integer`` (a family that answers from one
    least-squares estimate) and ``run``: every answer a non-negative integer, every table of
    one total, the CDF non-decreasing and the cumulative sum of the marginal it reads, the
    cross-tab requested twice with one value per cell."""
    from factorize.cli import main

    spec = ("vstack(marginals:6x2x3:2,kron(prefix:6,identity:2,total:3),"
            "kron(total:6,identity:2,identity:3))")
    assert main(["plan", "--workload", spec, "--domain", "a=6,b=2,c=3", "--privacy", "rho=0.002",
                 "--strategy", "kron", "--postprocess", "integer", "--out", str(tmp_path / "p.plan")]) == 0
    rng = np.random.default_rng(11)
    rows = np.column_stack([rng.integers(0, n, 150) for n in (6, 2, 3)])
    data = tmp_path / "d.csv"
    data.write_text("a,b,c\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    out = tmp_path / "a.json"
    assert main(["run", str(tmp_path / "p.plan"), "--data", str(data), "--out", str(out), "--seed", "3"]) == 0
    d = json.loads(out.read_text())
    meta = d["metadata"]["postprocess"]
    pp = np.array([a["estimate_postprocessed"] for a in d["answers"]])
    est = np.array([a["estimate"] for a in d["answers"]])
    assert (est < 0).any() and meta["iterations"] > 0  # the release needed the projection
    assert np.array_equal(pp, np.rint(pp)) and pp.min() >= 0 and meta["disagreement"] == 0
    layout = marginal_layout(parse_workload(spec), (6, 2, 3))

    def blocks(v):
        return [v[layout.offsets[o]:layout.offsets[o + 1]].reshape(layout.block_shape(o))
                for o in range(len(layout.block_table))]

    raw = blocks(est)
    assert np.abs(raw[2] - raw[4]).max() <= 1e-9 * float(np.abs(raw[2]).max())  # one estimate
    ab, ac, bc, cdf, bc_again = blocks(pp)
    assert {float(t.sum()) for t in (ab, ac, bc, bc_again)} == {float(meta["total"])}
    assert np.array_equal(bc, bc_again)
    assert np.all(np.diff(cdf, axis=0) >= 0) and np.array_equal(cdf, np.cumsum(ab, axis=0))
    assert np.array_equal(ab.sum(axis=0), bc.sum(axis=1)) and np.array_equal(ac.sum(axis=1), ab.sum(axis=1))


def _grouping(groups: list[int]) -> np.ndarray:
    """The grouping factor G (g × n): ``G[g, v] = 1`` when value v is in group ``groups[v]``."""
    G = np.zeros((max(groups) + 1, len(groups)))
    G[groups, np.arange(len(groups))] = 1.0
    return G


def test_a_grouping_factor_is_served_and_fitted_exactly_through_it():
    """Age groups by a second attribute (a rank-deficient factor whose rows sum to 𝟙), beside
    a 1-way table of the fine values and a window factor that tiles the values: the layout
    keeps one table per support, the total of a grouped block's estimate is the block's total
    (unbiased), and the fit's answers equal cvxpy's over the local polytope (the answers of the
    least-squares fit are unique though the fine table under a grouping is not)."""
    cp = pytest.importorskip("cvxpy")
    from workloads.explicit import DenseWorkload
    from workloads.structured import KronWorkload, VStackWorkload

    sizes = (4, 3)
    G = _grouping([0, 0, 1, 1])
    W = VStackWorkload([KronWorkload([DenseWorkload(G), parse_workload("identity:3")]),
                        KronWorkload([parse_workload("identity:4"), parse_workload("total:3")]),
                        KronWorkload([parse_workload("width:4:2"), parse_workload("total:3")])])
    layout = marginal_layout(W, sizes)
    assert layout.tables == ((0, 1), (0,))
    h = np.random.default_rng(5).poisson(3.0, size=12).astype(np.float64)
    targets, _ = layout.targets(W.dense() @ h)
    assert all(abs(float(t.sum()) - h.sum()) <= 1e-9 * h.sum() for t in targets)
    rng = np.random.default_rng(6)
    y = W.dense() @ h + 2.0 * rng.normal(size=W.shape[0])
    fit = project_nonneg(layout, y, max_iter=20000, tol=1e-10)
    n0, n1 = 12, 4
    mu0, mu1 = cp.Variable(n0), cp.Variable(n1)
    B0 = np.column_stack([layout.answers([e.reshape(4, 3), np.zeros(4)]) for e in np.eye(n0)])
    B1 = np.column_stack([layout.answers([np.zeros((4, 3)), e]) for e in np.eye(n1)])
    cons = [mu0 >= 0, mu1 >= 0, cp.sum(mu0) == fit.n_hat, cp.sum(mu1) == fit.n_hat,
            np.kron(np.eye(4), np.ones((1, 3))) @ mu0 == mu1]
    cp.Problem(cp.Minimize(cp.sum_squares(B0 @ mu0 + B1 @ mu1 - y)), cons).solve(solver=cp.CLARABEL)
    want = B0 @ mu0.value + B1 @ mu1.value
    got = layout.answers(fit.tables)
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, fit.n_hat)
    assert all(float(t.min()) >= 0.0 for t in fit.tables)
    assert np.abs(marginal(fit.tables[0], (0, 1), (0,)) - fit.tables[1]).max() <= 1e-6 * fit.n_hat


def test_a_factor_whose_rows_miss_the_all_ones_row_is_still_refused():
    with pytest.raises(PostprocessError, match="do not sum to the all-ones row"):
        marginal_layout(parse_workload("kron(width:5:2,identity:2)"), (5, 2))
    from workloads.explicit import DenseWorkload
    from workloads.structured import KronWorkload

    partial = _grouping([0, 0, 1, 1])[:1]  # one group only: values 2, 3 never counted
    with pytest.raises(PostprocessError, match="block 0's factor on attribute 0"):
        marginal_layout(KronWorkload([DenseWorkload(partial), parse_workload("identity:2")]), (4, 2))
