"""Named tables: every part of a workload's ``vstack`` is a table with a name, and ``factorize
run --tables`` writes each one, for every plan kind, as a tidy CSV in label form.

Independent truth: the expected tables — their names, files and cells in label form — are
written out here by hand from the spec and the schema (never from ``executor.labels``); every
table file must hold exactly those cells in row-major order and the very numbers of the
answers file's rows of that table; and each estimate must be the count of the records its cell
describes (``age ≤ 19``: the records with age at most 19), up to the noise — so a label can
never name another query than the one it sits on.
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from factorize.cli.plan import main
from factorize.executor.labels import workload_tables
from factorize.executor.output import read_answers
from tests.raw_adult import ADULT_CSV, ADULT_DOMAIN
from workloads import Domain
from workloads.errors import WorkloadSpecError
from workloads.spec import parse_workload

SCHEMA = {"format": "factorize-domain-schema", "version": 1, "attributes": [
    {"name": "age", "kind": "integer", "min": 17, "max": 26},
    {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
    {"name": "edu", "kind": "categorical", "values": ["HS", "BA", "=MA"]}]}
LABELS = {"age": [str(a) for a in range(17, 27)], "sex": ["Female", "Male"], "edu": ["HS", "BA", "=MA"]}

#: 2-way marginals, a CDF of age by sex and a named cross-tab; the residual family serves
#: marginals only, so its plan takes the marginals and the named part.
MIXED = ("vstack(marginals[age,sex,edu]:2,kron(prefix[age],identity[sex],total[edu]),"
         'table("edu by sex",kron(total[age],identity[sex],identity[edu])))')
MARGINAL = 'vstack(marginals[age,sex,edu]:2,table("edu by sex",kron(total[age],identity[sex],identity[edu])))'
NUMBERS = ["estimate", "std_error", "ci_low", "ci_high"]
#: What a spreadsheet-safe CSV shows for a text cell (``executor.output``).
TRIGGERS = "=+-@\t\r'"


def _expected(attrs: list[str], labels: dict[str, list[str]], cdf: bool) -> dict[str, tuple[str, list[str], list[tuple[str, ...]]]]:
    """Per table name: its file, its attribute columns and its cells in row-major order —
    written out from the spec, by hand."""
    a, s, e = attrs
    out = {f"{x},{y}": (f"{x}__{y}.csv", [x, y], list(itertools.product(labels[x], labels[y])))
           for x, y in ((a, s), (a, e), (s, e))}
    if cdf:
        out[f"cdf({a}) by {s}"] = (f"cdf_{a}__by_{s}.csv", [a, s],
                                   [(f"{a} ≤ {v}", w) for v in labels[a] for w in labels[s]])
    out[f"{e} by {s}"] = (f"{e}_by_{s}.csv", [s, e], list(itertools.product(labels[s], labels[e])))
    return out


def _shown(value: str) -> str:
    return "'" + value if value[:1] and value[0] in TRIGGERS else value


def _table_file(path: Path) -> tuple[dict, list[str], list[list[str]]]:
    """A --tables file: its ``#`` metadata, header and rows as written."""
    lines = path.read_text(encoding="utf-8").splitlines()
    meta = {ln[2:].partition(": ")[0]: json.loads(ln[2:].partition(": ")[2]) for ln in lines if ln.startswith("# ")}
    rows = list(csv.reader([ln for ln in lines if not ln.startswith("# ")]))
    return meta, rows[0], rows[1:]


def _truth(records: dict[str, np.ndarray], attrs: list[str], cell: tuple[str, ...]) -> int:
    """The number of records the cell describes (``v``: equal; ``a ≤ v``: at most v)."""
    keep = np.ones(len(next(iter(records.values()))), dtype=bool)
    for a, v in zip(attrs, cell, strict=True):
        if v.startswith(f"{a} ≤ "):
            keep &= records[a].astype(np.int64) <= int(v[len(f"{a} ≤ "):])
        else:
            keep &= records[a] == v
    return int(keep.sum())


def _check_release(answers: Path, tables: Path, expected: dict, records: dict[str, np.ndarray]) -> None:
    cols, _ = read_answers(answers)
    names = list(dict.fromkeys(cols["table"]))
    assert names == list(expected), names
    assert sorted(p.name for p in tables.iterdir()) == sorted(f for f, _, _ in expected.values())
    all_attrs = [a for a in cols if a not in ("query", "table", "label", *NUMBERS)]
    for name, (file, attrs, cells) in expected.items():
        rows = np.flatnonzero(cols["table"] == name)
        assert rows.tolist() == list(range(rows[0], rows[0] + len(cells)))  # one run, in W's order
        meta, header, body = _table_file(tables / file)
        assert meta["table"] == name
        assert header == [*attrs, *NUMBERS]
        assert [tuple(r[:len(attrs)]) for r in body] == [tuple(_shown(v) for v in c) for c in cells]
        for j, c in enumerate(NUMBERS):  # the very numbers of the answers file
            assert [float(r[len(attrs) + j]) for r in body] == cols[c][rows].tolist(), (name, c)
        for a in all_attrs:  # the answers file's cell columns: the table's, empty elsewhere
            want = [c[attrs.index(a)] if a in attrs else "" for c in cells]
            assert cols[a][rows].tolist() == want, (name, a)
        truth = np.array([_truth(records, attrs, c) for c in cells])
        est, se = cols["estimate"][rows], cols["std_error"][rows]
        assert np.all(np.abs(est - truth) <= 6 * se + 1), (name, np.abs(est - truth).max())


@pytest.fixture(scope="module")
def raw_world(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    (d / "s.json").write_text(json.dumps(SCHEMA))
    rng = np.random.default_rng(5)
    recs = {"age": rng.integers(17, 27, 600).astype(str), "sex": rng.choice(LABELS["sex"], 600),
            "edu": rng.choice(LABELS["edu"], 600)}
    with open(d / "d.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(list(recs))
        w.writerows(zip(*recs.values(), strict=True))
    return d, recs


@pytest.mark.parametrize("strategy", ["dense", "union", "residual"])
def test_every_table_written_in_label_form_raw_schema(raw_world, strategy):
    d, recs = raw_world
    spec = MARGINAL if strategy == "residual" else MIXED
    plan, tabs = d / f"{strategy}.plan", d / f"tabs_{strategy}"
    assert main(["plan", "--workload", spec, "--domain", str(d / "s.json"), "--privacy", "rho=0.5",
                 "--strategy", strategy, "--out", str(plan)]) == 0
    tabs.mkdir()
    assert main(["run", str(plan), "--data", str(d / "d.csv"), "--out", str(d / f"{strategy}.csv"),
                 "--tables", str(tabs), "--seed", "3"]) == 0
    expected = _expected(["age", "sex", "edu"], LABELS, cdf=strategy != "residual")
    _check_release(d / f"{strategy}.csv", tabs, expected, recs)
    # the other formats carry the same columns and values
    base, _ = read_answers(d / f"{strategy}.csv")
    for fmt in ("json", "parquet"):
        out = d / f"{strategy}.{fmt}"
        assert main(["run", str(plan), "--data", str(d / "d.csv"), "--out", str(out), "--seed", "3"]) == 0
        other, _ = read_answers(out)
        assert list(other) == list(base)
        for c in base:
            assert np.array_equal(other[c], base[c]), (fmt, c)


@pytest.mark.skipif(not (ADULT_CSV.is_file() and ADULT_DOMAIN.is_file()), reason="Adult data not found")
@pytest.mark.parametrize("strategy", ["dense", "union", "residual"])
def test_every_table_written_in_label_form_adult(tmp_path, strategy):
    """Adult, read where it lies (never copied); its domain has sizes only, so the labels are
    the codes."""
    spec = (MARGINAL if strategy == "residual" else MIXED).replace("edu", "race")
    plan = tmp_path / "a.plan"
    assert main(["plan", "--workload", spec, "--domain", str(ADULT_DOMAIN), "--privacy", "rho=0.5",
                 "--strategy", strategy, "--out", str(plan)]) == 0
    (tmp_path / "tabs").mkdir()
    assert main(["run", str(plan), "--data", str(ADULT_CSV), "--ignore-extra-columns", "--out",
                 str(tmp_path / "a.csv"), "--tables", str(tmp_path / "tabs"), "--seed", "4"]) == 0
    sizes = json.loads(ADULT_DOMAIN.read_text())
    labels = {a: [str(c) for c in range(sizes[a])] for a in ("age", "sex", "race")}
    with open(ADULT_CSV, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [[r[header.index(a)] for a in ("age", "sex", "race")] for r in reader]
    records = {a: np.array([r[j] for r in rows]) for j, a in enumerate(("age", "sex", "race"))}
    expected = _expected(["age", "sex", "race"], labels, cdf=strategy != "residual")
    _check_release(tmp_path / "a.csv", tmp_path / "tabs", expected, records)


# ---------------------------------------------------------------------------------------
# the spec's names


def test_table_names_are_carried_by_the_spec_not_the_fingerprint():
    named = parse_workload('vstack(marginals:2x3:1,table("b by a",kron(identity:2,identity:3)))')
    plain = parse_workload("vstack(marginals:2x3:1,kron(identity:2,identity:3))")
    assert named.spec == 'vstack(marginals:2x3:1,table("b by a",kron(identity:2,identity:3)))'
    assert named.fingerprint() == plain.fingerprint() and named.names == (None, "b by a")
    assert parse_workload(named.spec).spec == named.spec  # normalized: a fixed point
    # bare names, quotes, a whole spec that is one table, a name under scale (hoisted)
    assert parse_workload("table( my name ,prefix:4)").spec == 'table("my name",prefix:4)'
    assert parse_workload('table("a""b",prefix:4)').names == ('a"b',)
    assert parse_workload("table(t,prefix:4)").fingerprint() == parse_workload("prefix:4").fingerprint()
    scaled = parse_workload("vstack(scale(2,table(w,prefix:4)),prefix:4)")
    assert scaled.spec == 'vstack(table("w",scale(2,prefix:4)),prefix:4)' and scaled.names == ("w", None)
    outer = parse_workload("scale(2,vstack(table(w,prefix:4),prefix:4))")
    assert outer.names == ("w", None)
    assert outer.fingerprint() == parse_workload("scale(2,vstack(prefix:4,prefix:4))").fingerprint()
    # a spec without table(...) normalizes as it always did
    assert parse_workload("vstack( prefix:4 , scale(2.50,prefix:4))").spec == "vstack(prefix:4,scale(2.5,prefix:4))"


@pytest.mark.parametrize(("spec", "needle"), [
    ("kron(table(a,prefix:2),identity:2)", "inside kron"),
    ("kron(vstack(table(a,prefix:2),prefix:2),identity:2)", "inside kron"),
    ("table(a,marginals:2x3:1)", "is 2 tables"),
    ("table(a,vstack(prefix:2,prefix:2))", "is 2 tables"),
    ("vstack(table(a,prefix:2),table(a,prefix:2))", "given twice"),
    ("table(a,table(b,prefix:2))", "one name"),
    ("table(,prefix:2)", "expected a table name"),
    ('table("a\nb",prefix:2)', "control characters"),
    ('table("unterminated,prefix:2)', "unterminated"),
    (f"table({'x' * 201},prefix:2)", "at most 200"),
])
def test_table_names_refused(spec, needle):
    with pytest.raises(WorkloadSpecError, match=needle):
        parse_workload(spec)


def test_default_names_and_cells():
    dom = Domain(["age", "sex", "race"], [5, 2, 3])
    cases = {
        "kron(prefix:5,identity:2,total:3)": ["cdf(age) by sex"],
        "kron(identity:5,allrange:2,identity:3)": ["range(sex) by age,race"],
        "marginals_upto:5x2x3:1": ["total", "age", "sex", "race"],
        "vstack(prefix:30,prefix:30)": ["prefix(age,sex,race)", "prefix(age,sex,race) (2)"],
        "kron(vstack(identity:5,total:5),identity:2,total:3)": ["age,sex"],
        "kron(width:5:2,vstack(prefix:2,total:2),total:3)": ["range(age) by (cdf(sex) + total)"],
    }
    for spec, names in cases.items():
        assert [t.name for t in workload_tables(parse_workload(spec), dom)] == names, spec
    (t,) = workload_tables(parse_workload("kron(vstack(identity:5,total:5),identity:2,total:3)"), dom)
    cells = {k: v.to_pylist() for k, v in t.cells().items()}
    assert cells["age"] == [str(a) for a in range(5) for _ in range(2)] + ["total"] * 2
    assert cells["sex"] == ["0", "1"] * 6
    (t,) = workload_tables(parse_workload("kron(total:5,allrange:2,total:3)"), dom)
    assert t.cells()["sex"].to_pylist() == ["sex in [0, 0]", "sex in [0, 1]", "sex in [1, 1]"]
    (a, b) = workload_tables(parse_workload("parity:2:1"), Domain(["a0", "a1"], [2, 2]))
    assert (a.name, b.name) == ("contrast(a0)", "contrast(a1)")
    assert a.cells()["a0"].to_pylist() == ["a0=0 minus a0=1"]
    # an attribute named like an answers column gets " (attribute)"
    (t,) = workload_tables(parse_workload("identity:2"), Domain(["estimate"], [2]))
    assert t.name == "estimate" and list(t.cells()) == ["estimate (attribute)"]
