"""Per-table precision (``executor.precision``): each named table's standard errors equal the
plan's per-query deviations over its rows (recomputed from R and the noise), ``inspect`` and
``plan`` print them, and the hint speaks when the smallest table is the least precise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.cli import main
from factorize.executor.precision import TablePrecision, precision_hint, table_precision
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.structured.build import build_structured_plan
from workloads import Domain
from workloads.spec import parse_workload

DOM = Domain(["a", "b", "c"], [6, 2, 5])
SPEC = ("vstack(marginals:6x2x5:2,table(\"b total by c\",kron(total:6,identity:2,identity:5)),"
        "kron(prefix:6,identity:2,total:5))")


def test_dense_tables_are_the_per_query_deviations_of_their_rows():
    plan = build_plan(SPEC, "rho=0.5", domain=DOM)
    W = parse_workload(SPEC)
    tables = table_precision(plan, W)
    assert [t.name for t in tables] == ["a,b", "a,c", "b,c", "b total by c", "cdf(a) by b"]
    R = plan.factorization.R_factors[0] if len(plan.factorization.R_factors) == 1 else None
    assert R is not None
    std = math.sqrt(plan.noise.variance_bound) * np.linalg.norm(R, axis=1)
    start = 0
    for t in tables:
        s = std[start:start + t.cells]
        assert t.std_min == pytest.approx(s.min(), rel=1e-12)
        assert t.std_max == pytest.approx(s.max(), rel=1e-12)
        assert t.std_rms == pytest.approx(math.sqrt(float(np.mean(s * s))), rel=1e-12)
        start += t.cells
    assert start == W.shape[0]


def test_structured_tables_cover_every_row():
    plan = build_structured_plan(SPEC, "rho=0.5", domain=DOM, strategy="union")
    tables = table_precision(plan, parse_workload(SPEC))
    assert sum(t.cells for t in tables) == parse_workload(SPEC).shape[0]
    std = np.sqrt(float(plan.expected_error["noise_variance"]) * plan.reconstruction.row_sq_norms())
    assert max(t.std_max for t in tables) == pytest.approx(float(std.max()), rel=1e-12)


def test_the_hint():
    big, small = TablePrecision("a,b", 100, 1.0, 1.2, 1.1), TablePrecision("b,c", 4, 3.0, 3.0, 3.0)
    assert "'b,c'" in precision_hint([big, small]) and "gamma_2" in precision_hint([big, small])
    assert precision_hint([big, TablePrecision("b,c", 4, 1.0, 1.0, 1.2)]) is None
    assert precision_hint([small]) is None


def test_inspect_prints_the_tables(tmp_path, capsys):
    out = tmp_path / "p.plan"
    assert main(["plan", "--workload", SPEC, "--domain", "a=6,b=2,c=5", "--privacy", "rho=0.5",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tables      5; standard error per table" in text
    assert "b total by c" in text and "cdf(a) by b" in text
