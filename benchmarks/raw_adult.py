"""A raw-valued copy of Adult: for the README's example, ``python -m benchmarks --suite raw``
and the schema tests (``tests/raw_adult.py`` re-exports it).

The coded records are the shared ``adult.csv`` (``ADULT_DIR``: ``../shared/data/adult`` beside
the checkout, or the folder ``FACTORIZE_ADULT_DIR`` names). Their public schema is
``docs/examples/adult_schema.json`` (``SCHEMA_PATH``, format ``docs/schema.md``), written from
UCI's codebook (``adult.names``) with the sizes of ``adult-domain.json``: the categories in the
codebook's order with UCI's ``?`` (unknown) last, where an attribute has one (workclass and
occupation list it; native-country's catch-all code holds it); integer ranges for age (code c
is age 16 + c, so UCI's 17-year-olds are code 1 and code 0 is empty), education-num and
hours-per-week; equal-width bins for fnlwgt, capital-gain and capital-loss, whose edges the
extract does not document (so a raw value near an edge may have another code in the extract).

``decode(codes)`` turns the integer-coded records into raw values that this schema maps back
to the same codes: the labels as UCI writes them (with the leading space of the UCI files on
workclass, which the schema trims), integers, bin midpoints, and ``?`` for native-country's
catch-all code.

Imports only the standard library at the top (numpy and pyarrow when a function needs them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.harness import ADULT_DIR, REPO_ROOT

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ADULT_DIR", "ADULT_CSV", "ADULT_DOMAIN", "SCHEMA_PATH", "WORKCLASS", "MARITAL", "OCCUPATION",
           "RELATIONSHIP", "RACE", "SEX", "COUNTRIES", "UNLISTED_COUNTRY", "adult_schema", "write_schema",
           "decode", "read_coded", "write_raw"]

ADULT_CSV = ADULT_DIR / "adult.csv"
ADULT_DOMAIN = ADULT_DIR / "adult-domain.json"
#: The public schema of the coded file (shipped with the repository; the data is not).
SCHEMA_PATH = REPO_ROOT / "docs" / "examples" / "adult_schema.json"


def adult_schema() -> dict[str, Any]:
    """The schema document of ``SCHEMA_PATH`` (a dict)."""
    doc: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return doc


def _values(name: str) -> list[str]:
    """The values of categorical attribute ``name`` in the public schema, in code order."""
    return next(a["values"] for a in adult_schema()["attributes"] if a["name"] == name)


WORKCLASS = _values("workclass")
MARITAL = _values("marital-status")
OCCUPATION = _values("occupation")
RELATIONSHIP = _values("relationship")
RACE = _values("race")
SEX = _values("sex")
COUNTRIES = _values("native-country")
#: The raw value written for native-country's catch-all code: UCI's unknown, which the schema
#: does not list as a country.
UNLISTED_COUNTRY = "?"


def write_schema(path: Path) -> Path:
    """A copy of the public schema at ``path`` (for a scratch folder next to the raw copy)."""
    path.write_text(SCHEMA_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def decode(codes: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """Raw columns (name → numpy array) for integer-coded records ``codes`` (n × d, columns in
    the order of ``names``): integer attribute code c is ``min + c``, numeric code c the
    midpoint ``(e_c + e_{c+1}) / 2`` of its bin, categorical code c its c-th value (the
    catch-all code ``?``)."""
    import numpy as np

    by_name = {a["name"]: a for a in adult_schema()["attributes"]}
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(names):
        a = by_name[name]
        c = codes[:, j]
        if a["kind"] == "integer":
            out[name] = (c + a["min"]).astype(np.int64)
        elif a["kind"] == "numeric":
            e = np.asarray(a["edges"], dtype=np.float64)
            out[name] = (e[c] + e[c + 1]) / 2
        else:
            values = list(a["values"]) + ([UNLISTED_COUNTRY] if a.get("outside") == "catch_all" else [])
            labels = np.asarray([(" " + v if name == "workclass" else v) for v in values], dtype=object)
            out[name] = labels[c]
    return out


def read_coded() -> tuple[np.ndarray, list[str]]:
    """The integer-coded Adult records and their column names; ``FileNotFoundError`` naming
    the folder looked in and ``FACTORIZE_ADULT_DIR`` when the data is not there."""
    import numpy as np
    import pyarrow.csv as pacsv

    if not ADULT_CSV.is_file():
        raise FileNotFoundError(
            f"the Adult data is not at {ADULT_CSV}: put the shared data set in ../shared/data/adult "
            f"beside the checkout ({REPO_ROOT.parent / 'shared' / 'data' / 'adult'}), or set "
            "FACTORIZE_ADULT_DIR to the folder that holds adult.csv and adult-domain.json")
    t = pacsv.read_csv(ADULT_CSV)
    return np.column_stack([t.column(n).to_numpy() for n in t.column_names]).astype(np.int64), t.column_names


def write_raw(path: Path, codes: np.ndarray, names: list[str]) -> Path:
    """The raw copy as CSV (``.csv``) or Parquet (string / int64 / double columns)."""
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
