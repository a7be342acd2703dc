"""Big releases at the cost of the data pass: the memory-bounded paths give exactly what the
all-at-once paths gave.

Independent truth: the all-at-once query labels (``labels.query_labels``, itself checked
against W's dense rows in ``tests/test_labels.py``); the dense reconstruction ``R`` and the
fully cached product; the interval formula ``estimate ± (c·std_error + (γ/2)‖r_i‖₁ + β·n⁺)``
evaluated directly from the release's own inputs — all compared bit for bit (``==``), not to a
tolerance, since the new paths must release the same numbers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from factorize.executor.labels import MarginalLabels, TableLabels, query_labels, workload_tables
from factorize.structured import reconstruction as reconstruction_module
from workloads.domain import Domain
from workloads.spec import parse_workload

FAMILIES = [
    ("marginals_upto:5x2x3x1x4:3", [5, 2, 3, 1, 4]),  # a size-1 attribute, the empty marginal
    ("marginals:3x4x2x5:2", [3, 4, 2, 5]),
    ("marginals_upto:2x3:0", [2, 3]),  # the total alone
    ("marginals_upto:1x1:2", [1, 1]),  # every marginal is a total
]


@pytest.mark.parametrize(("spec", "sizes"), FAMILIES)
def test_marginal_labels_are_the_query_labels_slice_by_slice(spec, sizes):
    W = parse_workload(spec)
    dom = Domain([f"a{i}" for i in range(len(sizes))], sizes)
    want = query_labels(W, dom).to_pylist()
    lab = MarginalLabels.of(W, dom)
    assert lab is not None and len(lab) == len(want) == W.shape[0]
    assert lab.to_pylist() == want
    rng = np.random.default_rng(0)
    for _ in range(300):  # slices across marginal boundaries, empty and clipped ones
        lo = int(rng.integers(0, len(want) + 2))
        n = int(rng.integers(0, len(want) + 3))
        got = lab.slice(lo, n)
        assert got.type == "string" and got.to_pylist() == want[lo:lo + n]


def test_marginal_labels_only_for_a_marginal_family_over_the_domain():
    dom = Domain(["a", "b", "c"], [5, 2, 3])
    assert MarginalLabels.of(parse_workload("kron(prefix:5,identity:2,total:3)"), dom) is None
    assert MarginalLabels.of(parse_workload("marginals:5x2:1"), dom) is None  # other sizes


def test_answers_file_labels_over_several_batches(tmp_path):
    """75,551 answers: two batches of the writer (``TableLabels.batches``), the labels and
    tables read back equal to the all-at-once ones, in every format."""
    from factorize.executor.output import read_answers, write_answers

    W = parse_workload("marginals_upto:300x250:2")
    dom = Domain(["a", "b"], [300, 250])
    k = W.shape[0]
    tables = workload_tables(W, dom)
    layout = TableLabels(tables, k)
    assert len(list(layout.batches())) == 2
    est = np.random.default_rng(1).normal(size=k)
    columns = {"query": np.arange(k), "table": layout, "label": MarginalLabels.of(W, dom),
               "estimate": est}
    want = query_labels(W, dom).to_pylist()
    names = [t.name for t in tables for _ in range(t.rows)]
    for suffix in ("parquet", "csv"):
        out = tmp_path / f"a.{suffix}"
        write_answers(out, columns, {"test": True})
        cols, meta = read_answers(out)
        assert meta == {"test": True}
        assert list(cols["label"]) == want and list(cols["table"]) == names
        assert np.array_equal(cols["estimate"], est)


def _residual_plan():
    from factorize.structured import residual
    from factorize.structured.workload_blocks import AxisFactor, WorkloadBlock

    sizes = (3, 4, 2, 5)
    subsets = [(0, 1, 2), (1, 2, 3), (0, 3), (2,)]
    wb = [WorkloadBlock(1.0, tuple(AxisFactor("identity" if j in S else "total", n)
                                   for j, n in enumerate(sizes))) for S in subsets]
    closure = sorted({T for S in subsets for r in range(len(S) + 1)
                      for T in itertools.combinations(S, r)}, key=lambda T: (len(T), T))
    x = {T: 1.0 + 0.1 * i for i, T in enumerate(closure)}
    strat, recon, _ = residual.build(sizes, closure, x, wb)
    return strat, recon


def test_reconstruction_with_a_bounded_cache_is_the_cached_product(monkeypatch):
    """Small terms beyond the cache's budget are formed and dropped: the same matrices, so
    the same bits as the fully cached product, on the first call and on later ones."""
    strat, recon = _residual_plan()
    y = np.random.default_rng(3).normal(size=strat.m)
    full = recon.apply(y)
    R = recon.dense()
    assert np.abs(full - R @ y).max() <= 1e-12 * np.abs(R @ y).max()
    for budget in (0, 40):
        monkeypatch.setattr(reconstruction_module, "SMALL_CACHE_ENTRIES", budget)
        _, fresh = _residual_plan()
        first, again = fresh.apply(y), fresh.apply(y)
        assert np.array_equal(first, full) and np.array_equal(again, full)
        kept = sum(M.size for M in fresh._small.values())
        assert kept <= budget


def test_row_norms_term_by_term_equal_the_dense_ones(monkeypatch):
    _, recon = _residual_plan()
    R = recon.dense()
    sq = recon.row_sq_norms()
    assert np.allclose(sq, (R * R).sum(axis=1), rtol=1e-13, atol=0)
    assert np.all(recon.row_l1_norms() >= np.abs(R).sum(axis=1) * (1 - 1e-14))
    # ‖R‖_F² correctly rounded, whatever the chunks it is streamed in
    want = math.fsum(sq.tolist())
    assert recon.row_sq_norm_sum() == want
    assert math.isclose(want, float((R * R).sum()), rel_tol=1e-13)
    for chunk in (1, 7, sq.size + 1):
        monkeypatch.setattr(reconstruction_module, "FSUM_CHUNK", chunk)
        _, fresh = _residual_plan()
        assert fresh.row_sq_norm_sum() == want


def test_release_intervals_are_the_formula_bit_for_bit(tmp_path):
    """A structured plan's release (test mode): the intervals, made per batch of rows, equal
    ``est ∓ ((c·se + (γ/2)‖r_i‖₁) + β·n⁺)`` evaluated directly over whole columns, and
    ``se = sd·‖r_i‖``, bit for bit, whatever the batches."""
    from factorize.cli.plan import main
    from factorize.executor.release import make_rng
    from factorize.kinds.structured.kind import StructuredKind
    from factorize.plan.files import read_plan_bytes
    from factorize.privacy import sampled_variance

    sizes = [4, 3, 5]
    rng = np.random.default_rng(5)
    data = tmp_path / "d.csv"
    data.write_text("a,b,c\n" + "\n".join(",".join(str(int(rng.integers(0, n))) for n in sizes)
                                          for _ in range(500)) + "\n")
    plan_path = tmp_path / "p.plan"
    assert main(["plan", "--workload", "marginals_upto:4x3x5:2", "--domain", "a=4,b=3,c=5",
                 "--privacy", "rho=0.5", "--out", str(plan_path)]) == 0
    kind = StructuredKind()
    plan = kind.load(read_plan_bytes(str(plan_path)))
    check = kind.verify(plan)
    assert check.passed
    measurement = kind.measure(plan, check, str(data), engine="duckdb", allow_extra_columns=False)
    rel = kind.release(plan, check, measurement, make_rng(11), allow_float_noise=False,
                       metadata={}, deadline=math.inf)
    recon, spec, ci = plan.reconstruction, plan.noise, rel.metadata["ci"]
    sd = math.sqrt(sampled_variance(spec))
    se = sd * np.sqrt(recon.row_sq_norms())
    half = ci["multiplier"] * se + 0.5 * spec.grid * recon.row_l1_norms() + ci["bias_per_record"] * ci["n_upper"]
    assert np.array_equal(rel.std_error, se)
    assert np.array_equal(rel.ci_low, rel.estimate - half)
    assert np.array_equal(rel.ci_high, rel.estimate + half)
    # the columns are made per batch of rows (as the writers ask for them): the same bits as
    # the whole columns, for batches that cut across tables, and a batch past the end is empty
    for name, whole in (("std_error", se), ("ci_low", rel.estimate - half),
                        ("ci_high", rel.estimate + half)):
        column = rel.columns()[name]
        assert len(column) == whole.size
        parts = [column.slice(lo, 7) for lo in range(0, whole.size, 7)]
        assert np.array_equal(np.concatenate(parts), whole)
        assert np.array_equal(column[5:19], whole[5:19])
        assert column.slice(whole.size, 7).size == 0
        # as an array it is the whole column: indexing, arithmetic and comparisons
        assert column[3] == whole[3] and np.array_equal(column[[0, 2, 4]], whole[[0, 2, 4]])
        assert np.array_equal(2.0 * column, 2.0 * whole) and np.all((column - whole) == 0.0)
