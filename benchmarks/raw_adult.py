"""A raw-valued copy of Adult: for ``python -m benchmarks --suite raw`` and the schema tests
(``tests/raw_adult.py`` re-exports it).

``adult_schema()`` is a domain schema (``docs/schema.md``) with the sizes of
``adult-domain.json``, using every kind of attribute: categorical text (workclass, …),
categorical integers (education-num), categorical booleans (income>50K), integer ranges (age,
hours-per-week), numeric bins closed on the left (fnlwgt, capital-gain, clamped) and on the
right (capital-loss, float edges), and a catch-all (native-country: 41 listed countries, the
42nd code takes everything else). ``decode(codes)`` turns the integer-coded records into raw
values that this schema maps back to the same codes: labels (with the leading space of the
UCI files on workclass), integers, bin midpoints, booleans, and for native-country's
catch-all code a value the schema does not list.

The labels are illustrative: the order of the categories in the pre-processed Adult file is
not documented, so code i of an attribute gets the i-th name of the UCI codebook here, which
need not be the person's true category. The tests only need a bijection (raw → code) that the
schema states publicly.

Imports only the standard library at the top (numpy and pyarrow when a function needs them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.harness import ADULT_DIR

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ADULT_DIR", "ADULT_CSV", "ADULT_DOMAIN", "WORKCLASS", "MARITAL", "OCCUPATION", "RELATIONSHIP",
           "RACE", "SEX", "COUNTRIES", "UNLISTED_COUNTRY", "adult_schema", "write_schema", "decode",
           "read_coded", "write_raw"]

ADULT_CSV = ADULT_DIR / "adult.csv"
ADULT_DOMAIN = ADULT_DIR / "adult-domain.json"

WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
             "Without-pay", "Never-worked", "?"]
MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
           "Married-spouse-absent", "Married-AF-spouse"]
OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
              "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
              "Priv-house-serv", "Protective-serv", "Armed-Forces", "?"]
RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
SEX = ["Female", "Male"]
COUNTRIES = ["United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
             "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
             "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
             "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
             "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
             "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"]
#: The raw value written for native-country's catch-all code (not listed in the schema).
UNLISTED_COUNTRY = "Atlantis"


def adult_schema() -> dict:
    """The schema document (a dict; ``json.dump`` it to use it as ``--domain``)."""
    return {
        "format": "factorize-domain-schema", "version": 1,
        "description": "Adult (UCI Census Income), illustrative labels for the pre-processed codes "
                       "of ../shared/data/adult (benchmarks/raw_adult.py)",
        "attributes": [
            {"name": "age", "kind": "integer", "min": 17, "max": 101},
            {"name": "workclass", "kind": "categorical", "values": WORKCLASS},
            {"name": "fnlwgt", "kind": "numeric", "edges": [15000 * i for i in range(101)], "closed": "left"},
            {"name": "education-num", "kind": "categorical", "values": list(range(1, 17))},
            {"name": "marital-status", "kind": "categorical", "values": MARITAL},
            {"name": "occupation", "kind": "categorical", "values": OCCUPATION},
            {"name": "relationship", "kind": "categorical", "values": RELATIONSHIP},
            {"name": "race", "kind": "categorical", "values": RACE},
            {"name": "sex", "kind": "categorical", "values": SEX},
            {"name": "capital-gain", "kind": "numeric", "edges": [1000 * i for i in range(101)],
             "closed": "left", "outside": "clamp"},
            {"name": "capital-loss", "kind": "numeric", "edges": [round(43.56 * i, 2) for i in range(101)],
             "closed": "right"},
            {"name": "hours-per-week", "kind": "integer", "min": 1, "max": 99},
            {"name": "native-country", "kind": "categorical", "values": COUNTRIES, "outside": "catch_all",
             "catch_all_label": "?"},
            {"name": "income>50K", "kind": "categorical", "values": [False, True]},
        ],
    }


def write_schema(path: Path) -> Path:
    path.write_text(json.dumps(adult_schema(), indent=1), encoding="utf-8")
    return path


def decode(codes: np.ndarray, names: list[str]) -> dict[str, object]:
    """Raw columns (name → numpy array or list) for integer-coded records ``codes`` (n × d,
    columns in the order of ``names``)."""
    import numpy as np

    by_name = {a["name"]: a for a in adult_schema()["attributes"]}
    out: dict[str, object] = {}
    for j, name in enumerate(names):
        a = by_name[name]
        c = codes[:, j]
        if a["kind"] == "integer":
            out[name] = (c + a["min"]).astype(np.int64)
        elif a["kind"] == "numeric":
            e = np.asarray(a["edges"], dtype=np.float64)
            out[name] = (e[c] + e[c + 1]) / 2
        elif isinstance(a["values"][0], bool):
            out[name] = np.asarray(a["values"], dtype=bool)[c]
        elif isinstance(a["values"][0], int):
            out[name] = np.asarray(a["values"], dtype=np.int64)[c]
        else:
            values = list(a["values"]) + ([UNLISTED_COUNTRY] if a.get("outside") == "catch_all" else [])
            labels = np.asarray([(" " + v if name == "workclass" else v) for v in values], dtype=object)
            out[name] = labels[c]
    return out


def read_coded() -> tuple[np.ndarray, list[str]]:
    """The integer-coded Adult records and their column names."""
    import numpy as np
    import pyarrow.csv as pacsv

    t = pacsv.read_csv(ADULT_CSV)
    return np.column_stack([t.column(n).to_numpy() for n in t.column_names]).astype(np.int64), t.column_names


def write_raw(path: Path, codes: np.ndarray, names: list[str]) -> Path:
    """The raw copy as CSV (``.csv``) or Parquet (string / int64 / double / bool columns)."""
    import pyarrow as pa

    cols = decode(codes, names)
    table = pa.table({n: pa.array(cols[n]) for n in names})
    if path.suffix == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    return path
