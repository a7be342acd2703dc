"""Labeled answers: every answer names its query in the workload's terms.

Independent truth: each label is parsed back into the set of cells it describes (``a=v``,
``a in lo..hi``, ``total``) and that set's indicator must equal the query's row of the dense
workload — so a label can never name another query than the one it sits on.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from factorize.executor.labels import query_labels, value_labels, workload_tables
from workloads import Domain
from workloads.spec import parse_workload

DOMAIN = Domain(["age", "sex", "race"], [5, 2, 3])

SPECS = [
    "kron(prefix:5,identity:2,total:3)",
    "kron(allrange:5,total:2,identity:3)",
    "marginals:5x2x3:2",
    "marginals_upto:5x2x3:2",
    "vstack(kron(identity:5,total:2,total:3),kron(total:5,identity:2,identity:3))",
    "kron(vstack(identity:5,total:5),vstack(identity:2,total:2),vstack(identity:3,total:3))",
    "identity:30",
    "total:30",
    "kron(prefix:5,vstack(identity:2,total:2),allrange:3)",
]


_STRING = r'"(?:\\.|[^"\\])*"'


def _value(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


def _parts(label: str) -> list[str]:
    """Split a label at the commas outside JSON strings."""
    return [p.strip() for p in re.findall(rf'(?:{_STRING}|[^",])+', label)]


def _term(text: str, attrs: list[str], vals: list[list[str]]) -> tuple[int, int]:
    """``a=v`` → (attribute index, code)."""
    a, v = text.split("=", 1)
    j = attrs.index(a)
    return j, vals[j].index(_value(v))


def _cells_of(label: str, domain: Domain) -> np.ndarray:
    """The weights over the domain's cells of the query a label describes: the product over
    its parts of each part's weights on its attribute (an indicator for ``a=v`` and
    ``a in lo..hi``, ±1 per term for ``a=v minus a=w``)."""
    attrs = list(domain.attributes)
    vals = value_labels(domain)
    keep = np.ones(tuple(domain.sizes))
    if label == "total":
        return keep.reshape(-1)
    for part in _parts(label):
        if " in " in part and not part.startswith('"'):
            a, rng = part.split(" in ", 1)
            m = re.fullmatch(rf'({_STRING}|[^".]+)\.\.({_STRING}|[^".]+)', rng)
            lo, hi = _value(m.group(1)), _value(m.group(2))
            j = attrs.index(a)
            lo_i, hi_i = vals[j].index(lo), vals[j].index(hi)
            weight = np.zeros(domain.sizes[j])
            weight[lo_i:hi_i + 1] = 1.0
        else:
            tokens = re.findall(rf'(?:^|(?<= ))(minus |plus )?((?:{_STRING}|[^" ])+)', part)
            j = None
            weight = None
            for sign, term in tokens:
                jj, code = _term(term, attrs, vals)
                if weight is None:
                    j, weight = jj, np.zeros(domain.sizes[jj])
                assert jj == j, part
                weight[code] += -1.0 if sign == "minus " else 1.0
        shape = [1] * len(attrs)
        shape[j] = domain.sizes[j]
        keep = keep * weight.reshape(shape)
    return keep.reshape(-1)


@pytest.mark.parametrize("spec", SPECS)
def test_every_label_describes_its_row(spec):
    W = parse_workload(spec)
    labels = query_labels(W, DOMAIN).to_pylist()
    D = W.dense()
    assert len(labels) == D.shape[0]
    for i, lab in enumerate(labels):
        assert np.array_equal(_cells_of(lab, DOMAIN), D[i]), (i, lab)


def test_parity_queries_are_labelled_by_their_signed_parts():
    """A parity query is a Kronecker product of ±1 characters: each part reads ``a=0 minus
    a=1`` (value labels quoted when they hold `` minus ``), and the product of the parts'
    weights is the query's row."""
    d = 6
    W = parse_workload(f"parity:{d}:2")
    for dom in (Domain([f"a{i}" for i in range(d)], [2] * d), _binary_schema_domain(d)):
        labels = query_labels(W, dom).to_pylist()
        D = W.dense()
        assert len(labels) == D.shape[0] == 15
        for i, lab in enumerate(labels):
            assert np.array_equal(_cells_of(lab, dom), D[i]), (i, lab)
    assert labels[0] == 'a0=no minus a0="yes minus"' + ', a1=no minus a1="yes minus"'


def _binary_schema_domain(d: int) -> Domain:
    from workloads.schema import DomainSchema

    return DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": f"a{i}", "kind": "categorical", "values": ["no", "yes minus"]} for i in range(d)]}).domain()


def test_schema_value_labels_are_used():
    from workloads.schema import DomainSchema

    schema = DomainSchema.from_dict({
        "format": "factorize-domain-schema", "version": 1,
        "attributes": [
            {"name": "age", "kind": "numeric", "edges": [0, 20, 30, 40, 60, 100], "closed": "left"},
            {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
            {"name": "race", "kind": "categorical", "values": ["A", "B", "C"]}]})
    dom = schema.domain()
    W = parse_workload("kron(prefix:5,identity:2,total:3)")
    labels = query_labels(W, dom).to_pylist()
    assert labels[0] == 'age="[0, 20)", sex=Female'
    assert labels[3] == 'age in "[0, 20)".."[20, 30)", sex=Male'
    for i, lab in enumerate(labels):
        assert np.array_equal(_cells_of(lab, dom), W.dense()[i] == 1.0)


def test_marginal_tables_are_tidy_and_in_row_order():
    W = parse_workload("marginals_upto:5x2x3:2")
    tables = workload_tables(W, DOMAIN)
    assert [t.start for t in tables] == [0] + [t.stop for t in tables][:-1]
    assert tables[-1].stop == W.shape[0]
    labels = query_labels(W, DOMAIN).to_pylist()
    for t in tables:
        cols = t.cells()
        assert list(cols) == ([] if t.name == "total" else t.name.split(","))
        for r in range(t.start, t.stop):
            want = ", ".join(f"{a}={cols[a][r - t.start].as_py()}" for a in cols) or "total"
            assert labels[r] == want
    (cdf,) = workload_tables(parse_workload("kron(prefix:5,identity:2,total:3)"), DOMAIN)
    assert cdf.name == "cdf(age) by sex"


def test_run_writes_labels_in_every_format_and_tidy_tables(tmp_path, capsys):
    from factorize.cli.plan import main
    from factorize.executor.output import read_answers

    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, n, 300) for n in DOMAIN.sizes])
    data = tmp_path / "d.csv"
    data.write_text("age,sex,race\n" + "\n".join(",".join(map(str, r)) for r in codes) + "\n")
    dom = "age=5,sex=2,race=3"
    for spec, name in (("marginals:5x2x3:2", "m"), ("kron(prefix:5,identity:2,total:3)", "k")):
        plan = tmp_path / f"{name}.plan"
        assert main(["plan", "--workload", spec, "--domain", dom, "--privacy", "rho=0.5",
                     "--out", str(plan)]) == 0
        W = parse_workload(spec)
        want = query_labels(W, DOMAIN).to_pylist()
        for suffix in ("csv", "json", "parquet"):
            out = tmp_path / f"{name}.{suffix}"
            assert main(["run", str(plan), "--data", str(data), "--out", str(out), "--seed", "3"]) == 0
            cols, _ = read_answers(out)
            assert list(cols["label"]) == want, (spec, suffix)
    tabs = tmp_path / "tabs"
    tabs.mkdir()
    out = tmp_path / "m2.csv"
    assert main(["run", str(tmp_path / "m.plan"), "--data", str(data), "--out", str(out), "--seed", "3",
                 "--tables", str(tabs)]) == 0
    files = sorted(p.name for p in tabs.iterdir())
    assert files == ["age__race.csv", "age__sex.csv", "sex__race.csv"]
    cols, _ = read_answers(out)
    text = (tabs / "age__sex.csv").read_text().splitlines()
    header = next(line for line in text if not line.startswith("#"))
    assert header == "age,sex,estimate,std_error,ci_low,ci_high"
    body = [line for line in text if not line.startswith("#")][1:]
    assert len(body) == 10
    first = [i for i, m in enumerate(cols["table"]) if m == "age,sex"]
    assert [float(line.split(",")[2]) for line in body] == [float(cols["estimate"][i]) for i in first]
    # --tables for a workload that is not made of marginals: its one table, a CDF by sex
    assert main(["run", str(tmp_path / "k.plan"), "--data", str(data), "--out", str(tmp_path / "z.csv"),
                 "--tables", str(tabs), "--seed", "1"]) == 0
    body = [line for line in (tabs / "cdf_age__by_sex.csv").read_text().splitlines() if not line.startswith("#")]
    assert body[0] == "age,sex,estimate,std_error,ci_low,ci_high"
    assert [line.split(",")[:2] for line in body[1:4]] == [['"age ≤ 0"', '"0"'], ['"age ≤ 0"', '"1"'],
                                                           ['"age ≤ 1"', '"0"']]
    assert math.prod(DOMAIN.sizes) == 30
