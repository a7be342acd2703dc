"""The Adult example of the README: the public schema ``docs/examples/adult_schema.json`` and
the raw copy ``benchmarks/raw_adult.py`` writes from the shared coded file.

The coded file's age code c is age 16 + c (code 0 is empty; UCI's ages are 17..90); the labels
of the schema and the raw copy must say so, and every other attribute must read as UCI writes
it. Tests that need ``../shared/data/adult`` skip, saying so, where it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.raw_adult import ADULT_CSV, ADULT_DOMAIN, SCHEMA_PATH, decode, read_coded, write_raw
from factorize.cli import main
from workloads.schema import load_schema, read_domain

REPO = Path(__file__).resolve().parents[1]
needs_adult = pytest.mark.skipif(not (ADULT_CSV.is_file() and ADULT_DOMAIN.is_file()),
                                 reason=f"Adult data not found at {ADULT_CSV.parent} (../shared/data/adult)")
#: The first record of UCI's adult.data, as UCI writes it (education "Bachelors" is level 13).
UCI_FIRST = {"age": 39, "workclass": "State-gov", "education-num": 13, "marital-status": "Never-married",
             "occupation": "Adm-clerical", "relationship": "Not-in-family", "race": "White", "sex": "Male",
             "hours-per-week": 40, "native-country": "United-States", "income>50K": "<=50K"}


def _type_class(kind: str) -> str:
    return {"integer": "integer", "numeric": "float", "categorical": "text"}[kind]


def test_age_code_1_is_17_and_code_0_is_empty_16():
    schema = load_schema(SCHEMA_PATH)
    assert schema.labels("age")[:3] == ["16", "17", "18"]
    assert schema.labels("age")[74] == "90"
    names = list(schema.names)
    codes = np.zeros((2, len(names)), dtype=np.int64)
    codes[:, names.index("age")] = [1, 74]
    assert decode(codes, names)["age"].tolist() == [17, 90]


def test_decoded_values_map_back_to_their_codes():
    """Every code of every attribute → ``decode``'s raw value → the schema's own mapping
    (``AttributeSchema.encode``, what ``run`` computes in SQL) → the same code."""
    schema = load_schema(SCHEMA_PATH)
    names = list(schema.names)
    width = max(schema.sizes)
    codes = np.column_stack([np.arange(width) % n for n in schema.sizes]).astype(np.int64)
    raw = decode(codes, names)
    for j, name in enumerate(names):
        attr = schema[name]
        tc = _type_class(attr.kind)
        got = [attr.encode(v, tc) for v in raw[name].tolist()]
        assert got == codes[:, j].tolist(), name


@needs_adult
def test_public_schema_matches_the_coded_domain():
    coded = json.loads(ADULT_DOMAIN.read_text(encoding="utf-8"))
    dom = read_domain(SCHEMA_PATH)  # the reader --domain uses (refuses a draft, checks the format)
    assert list(dom.attributes) == list(coded) and list(dom.sizes) == list(coded.values())
    assert dom.schema is not None and dom.schema == load_schema(SCHEMA_PATH)


@needs_adult
def test_labelled_ranges_over_the_real_file_are_ucis():
    """UCI's ages are 17..90, hours per week 1..99, education levels 1..16; the first record
    is adult.data's first line."""
    codes, names = read_coded()
    raw = decode(codes, names)
    assert (int(raw["age"].min()), int(raw["age"].max())) == (17, 90)
    assert (int(raw["hours-per-week"].min()), int(raw["hours-per-week"].max())) == (1, 99)
    assert (int(raw["education-num"].min()), int(raw["education-num"].max())) == (1, 16)
    labels = load_schema(SCHEMA_PATH).labels("age")
    present = np.flatnonzero(np.bincount(codes[:, names.index("age")]))
    assert (labels[present[0]], labels[present[-1]]) == ("17", "90")
    first = {n: raw[n][:1].tolist()[0] for n in UCI_FIRST}
    first["workclass"] = first["workclass"].strip()  # the UCI files' leading space
    assert first == UCI_FIRST


@needs_adult
def test_readme_example_releases_labelled_tables_from_the_public_schema(tmp_path, capsys):
    codes, names = read_coded()
    data = write_raw(tmp_path / "adult_raw.csv", codes, names)
    plan, out = tmp_path / "adult.plan", tmp_path / "answers.csv"
    assert main(["plan", "--workload", "marginals[sex,race,income>50K]:2", "--domain", str(SCHEMA_PATH),
                 "--privacy", "epsilon=1,delta=1e-6", "--out", str(plan)]) == 0
    assert main(["run", str(plan), "--data", str(data), "--ignore-extra-columns", "--out", str(out),
                 "--seed", "1"]) == 0
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    assert '"sex=Female, race=White"' in text and '"sex=Male, income>50K=>50K"' in text


def test_missing_data_names_the_variable_and_the_path(tmp_path):
    nowhere = tmp_path / "nowhere"
    env = {**os.environ, "FACTORIZE_ADULT_DIR": str(nowhere)}
    p = subprocess.run([sys.executable, "-c", "from benchmarks.raw_adult import read_coded; read_coded()"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "FileNotFoundError" in p.stderr and "FACTORIZE_ADULT_DIR" in p.stderr
    assert str(nowhere / "adult.csv") in p.stderr and "../shared/data/adult" in p.stderr
