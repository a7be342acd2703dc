"""``factorize local client --record``: raw values through the plan's domain schema, exactly as
``factorize run`` reads a raw column; integer codes where the plan's domain gives sizes only."""

from __future__ import annotations

import json

import pytest

from benchmarks.raw_adult import SCHEMA_PATH
from factorize.cli import main
from factorize.engines import distinct_records_duckdb
from factorize.engines.errors import DataError
from factorize.kinds.local.protocol import record_codes
from workloads.schema import read_domain

ADULT = read_domain(SCHEMA_PATH)
#: Raw records as a CSV file would hold them: UCI's first record, a catch-all country, values
#: with the spaces the UCI files put around them, an age and hours at the ends of their ranges.
RECORDS = [
    ["39", "State-gov", "77516", "13", "Never-married", "Adm-clerical", "Not-in-family", "White", "Male",
     "2174", "0", "40", "United-States", "<=50K"],
    ["17", " ?", "12285", "1", "Widowed", "?", "Wife", "Black", "Female", "99999", "4356", "1", "Atlantis",
     " >50K"],
    ["90", "Never-worked", "1490400.5", "16", "Divorced", "Armed-Forces", "Unmarried", "Other", "Male", "0",
     "49.99", "99", " ?", "<=50K"],
]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("local_raw")
    raw, coded = d / "raw.lplan", d / "coded.lplan"
    assert main(["local", "plan", "--workload", "marginals[sex,race,income>50K]:2", "--privacy", "epsilon=1",
                 "--n", "100000", "--domain", str(SCHEMA_PATH), "--out", str(raw)]) == 0
    assert main(["local", "plan", "--workload", "marginals:2x5:2", "--privacy", "epsilon=1", "--n", "100000",
                 "--domain", "sex=2,race=5", "--out", str(coded)]) == 0
    return raw, coded


def _client(plan, record: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["local", "client", str(plan), "--record", record])
    out, err = capsys.readouterr()
    return rc, out, err


def test_record_codes_equal_the_engine_codes_of_the_same_raw_values(tmp_path):
    """The client's codes are those ``run``'s engine (DuckDB) gives the same text in a CSV."""
    import csv

    path = tmp_path / "records.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(ADULT.attributes)
        w.writerows(RECORDS)
    codes, counts = distinct_records_duckdb(path, ADULT)
    engine = sorted(tuple(int(c) for c in row) for row in codes)
    client = sorted(tuple(record_codes(ADULT, dict(zip(ADULT.attributes, r, strict=True))).values())
                    for r in RECORDS)
    assert counts.tolist() == [1, 1, 1] and client == engine
    first = record_codes(ADULT, dict(zip(ADULT.attributes, RECORDS[0], strict=True)))
    assert (first["age"], first["sex"], first["native-country"], first["income>50K"]) == (23, 1, 0, 0)


def test_client_reads_raw_values_through_the_plans_schema(plans, capsys):
    raw, _ = plans
    rc, out, err = _client(raw, "sex=Female,race=White,income>50K=<=50K", capsys)
    assert rc == 0, err
    assert len(json.loads(out)["message"]) > 0
    rc, out, err = _client(raw, "sex= Male ,race=Black,income>50K=>50K", capsys)
    assert rc == 0, err


def test_client_refuses_an_unknown_label_naming_the_attribute_and_values(plans, capsys):
    raw, _ = plans
    for record in ("sex=female,race=White,income>50K=<=50K", "sex=1,race=0,income>50K=0"):
        rc, out, err = _client(raw, record, capsys)
        assert rc == 2 and out == ""
        assert "record attribute 'sex'" in err and "(Female, Male)" in err and "invalid literal" not in err
    rc, _, err = _client(raw, "sex=Female,race=White,income>50K=", capsys)
    assert rc == 2 and "'income>50K': the value is missing" in err
    rc, _, err = _client(raw, "sex=Female,race=White", capsys)
    assert rc == 2 and "exactly the attributes" in err


def test_client_takes_codes_where_the_plan_has_no_schema(plans, capsys):
    _, coded = plans
    rc, out, err = _client(coded, "sex=1,race=4", capsys)
    assert rc == 0, err
    assert len(json.loads(out)["message"]) > 0
    for record in ("sex=Female,race=4", "sex=2,race=4", "sex=-1,race=4"):
        rc, out, err = _client(coded, record, capsys)
        assert rc == 2 and out == "" and "invalid literal" not in err
        assert "'sex': the plan's domain gives sizes only, so its value must be a code 0..1" in err
    rc, _, err = _client(coded, "sex=1,sex=0,race=4", capsys)
    assert rc == 2 and "'sex' is given twice" in err


def test_record_codes_refuse_values_outside_the_schema_without_quoting_them():
    rec = dict(zip(ADULT.attributes, RECORDS[0], strict=True))
    for name, value, rule in (("age", "101", "outside the schema's range 16..100"),
                              ("age", "39.5", "not an integer"),
                              ("capital-loss", "6000.5", "outside the schema's bins [0, 5000)"),
                              ("workclass", "Freelance", "not among the schema's 9 values")):
        with pytest.raises(DataError, match=f"record attribute '{name}'") as exc:
            record_codes(ADULT, {**rec, name: value})
        assert rule in str(exc.value) and value not in str(exc.value)
