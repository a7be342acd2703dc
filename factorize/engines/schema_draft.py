"""``factorize schema draft``: a domain schema drafted FROM a data file -- a convenience whose
output is NOT public.

A domain schema must be public (``docs/schema.md``): chosen from a codebook, a standard or
the question's possible answers, never from the private records. Writing one by hand for a
wide table is tedious, so :func:`draft_schema_dict` reads a data file (CSV, Parquet or a
DuckDB table, inside DuckDB) and proposes one attribute per column: the distinct values of a
column with few of them (categorical, or an integer range for integers), equal-width bins
between the column's minimum and maximum otherwise. Every one of those values and edges
came from the records and is **not protected by differential privacy**. So the draft says
so three times: in its ``drafted_from_data`` field (which makes :class:`DomainSchema`
refuse the file as ``--domain`` until a person deletes it), in its description, and in the
lines :func:`draft_schema_command` prints. Nothing here is used by ``plan`` or ``run``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from workloads.schema import INTEGER_TEXT, NUMBER_TEXT, SCHEMA_FORMAT, SCHEMA_VERSION, DomainSchema

from .errors import DataError
from .schema_sql import trim_sql

__all__ = ["DRAFT_WARNING", "draft_schema_command", "draft_schema_dict"]

DRAFT_WARNING = (
    "NOT PUBLIC: every value, range and bin edge in this schema was read from the data file "
    "named in 'file' and is NOT protected by differential privacy (a value seen only in the data "
    "reveals that a record with it is there). Review every attribute, replace anything known only "
    "from the data with public knowledge (a codebook, a standard, round bin edges), then delete "
    "this 'drafted_from_data' field: until then factorize refuses the file as --domain."
)
#: Most distinct values a column may have to be drafted as categorical (or an integer range).
DEFAULT_MAX_CATEGORIES = 64
#: Bins of a numeric column drafted as such.
DEFAULT_BINS = 20


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _nice_edges(lo: float, hi: float, bins: int) -> list[int | float]:
    """``bins`` equal-width bins covering ``[lo, hi]`` (integers when the step is integral)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        hi = lo + 1.0
    step = (hi - lo) / bins
    if float(lo).is_integer() and step >= 1:
        s = math.ceil(step)
        start = int(math.floor(lo))
        return [start + s * i for i in range(bins + 1)]
    return [lo + step * i for i in range(bins)] + [hi + abs(step) * 1e-9 + 1e-12]


def draft_schema_dict(data: str | os.PathLike[str], *, columns: list[str] | None = None,
                      max_categories: int = DEFAULT_MAX_CATEGORIES, bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """A schema document drafted from ``data`` (module docstring; NOT public)."""
    import duckdb

    from .duckdb_engine import (
        _check_path,
        _table_parts,
        attach_sealed,
        check_blank_lines,
        csv_header,
        parse_table_ref,
        type_class,
    )

    if not (isinstance(max_categories, int) and 1 <= max_categories <= 1 << 16):
        raise DataError("--max-categories must be an integer in 1..65536")
    if not (isinstance(bins, int) and 1 <= bins <= 1 << 16):
        raise DataError("--bins must be an integer in 1..65536")
    con = duckdb.connect(":memory:", config={"temp_directory": "", "autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        table = parse_table_ref(os.fspath(data))
        if table is not None:
            attach_sealed(con, table.database, "src")  # a view may not read other files
            source = ".".join(_ident(x) for x in ["src", *_table_parts(table)])
            label = str(table)
        else:
            p, fmt = _check_path(data)
            label = p.name
            if fmt == "csv":
                check_blank_lines(p)
                header = csv_header(p)
                spec = ", ".join(f"{_literal(h)}: 'VARCHAR'" for h in header)
                source = (f"read_csv({_literal(str(p))}, header = true, auto_detect = false, "
                          f"columns = {{{spec}}}, delim = ',', quote = '\"', escape = '\"')")
            else:
                source = f"read_parquet({_literal(str(p))})"
        described = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        names = [str(r[0]) for r in described]
        types = {str(r[0]): str(r[1]) for r in described}
        wanted = names if columns is None else list(columns)
        missing = [c for c in wanted if c not in types]
        if missing:
            raise DataError(f"{label}: no column(s) {missing}")
        attrs = [_draft_attribute(con, source, c, type_class(types[c]), max_categories, bins) for c in wanted]
    except duckdb.Error as exc:
        raise DataError(f"DuckDB cannot read {label!r} to draft a schema ({type(exc).__name__}; its "
                        "message is withheld: it may quote record contents)") from None
    finally:
        con.close()
    doc = {
        "format": SCHEMA_FORMAT,
        "version": SCHEMA_VERSION,
        "description": f"DRAFTED FROM THE DATA FILE {label} -- NOT PUBLIC until reviewed (see drafted_from_data)",
        "drafted_from_data": {"file": label, "warning": DRAFT_WARNING},
        "attributes": attrs,
    }
    DomainSchema.from_dict(doc, source="the drafted schema", allow_draft=True)  # valid apart from the draft mark
    return doc


def _draft_attribute(con: Any, source: str, col: str, tc: str | None, max_categories: int,
                     bins: int) -> dict[str, Any]:
    c = _ident(col)
    if tc is None:
        raise DataError(f"column {col!r} has a type the schema cannot describe (text, integer, float, "
                        "decimal or boolean columns only); leave it out with --columns")
    if tc == "boolean":
        return {"name": col, "kind": "categorical", "values": [False, True], "outside": "catch_all"}
    if tc == "text":
        t = trim_sql(c)  # the schema's rule: U+0020 only
        n, n_int, n_num, n_distinct = con.execute(
            f"SELECT count(*) FILTER (WHERE {t} <> ''), "
            f"count(*) FILTER (WHERE regexp_full_match({t}, {_literal(INTEGER_TEXT)})), "
            f"count(*) FILTER (WHERE regexp_full_match({t}, {_literal(NUMBER_TEXT)})), "
            f"count(DISTINCT {t}) FILTER (WHERE {t} <> '') FROM {source}").fetchone()
        if n and n_int == n:
            lo, hi, k = con.execute(
                f"SELECT min(CAST(split_part({t}, '.', 1) AS HUGEINT)), max(CAST(split_part({t}, '.', 1) "
                f"AS HUGEINT)), count(DISTINCT CAST(split_part({t}, '.', 1) AS HUGEINT)) FROM {source} "
                f"WHERE {t} <> ''").fetchone()
            return _integer_attr(col, int(lo), int(hi), int(k), max_categories, bins)
        if n and n_num == n and n_distinct > max_categories:
            lo, hi = con.execute(f"SELECT min(CAST({t} AS DOUBLE)), max(CAST({t} AS DOUBLE)) FROM {source} "
                                 f"WHERE {t} <> ''").fetchone()
            return {"name": col, "kind": "numeric", "edges": _nice_edges(float(lo), float(hi), bins),
                    "closed": "left", "outside": "clamp"}
        rows = con.execute(f"SELECT {t} AS v, count(*) AS n FROM {source} WHERE {t} <> '' GROUP BY v "
                           f"ORDER BY n DESC, v LIMIT {max_categories}").fetchall()
        values = sorted(str(r[0]) for r in rows) or ["(none)"]
        attr: dict[str, Any] = {"name": col, "kind": "categorical", "values": values, "outside": "catch_all"}
        if "other" in values:
            attr["catch_all_label"] = "(other)"
        return attr
    if tc == "null":
        return {"name": col, "kind": "categorical", "values": ["(none)"], "outside": "catch_all"}
    if tc == "integer":
        lo, hi, k = con.execute(f"SELECT min({c}), max({c}), count(DISTINCT {c}) FROM {source}").fetchone()
        if lo is None:
            lo = hi = 0
        return _integer_attr(col, int(lo), int(hi), int(k or 0), max_categories, bins)
    nan = f" AND NOT isnan({c})" if tc == "float" else ""
    lo, hi = con.execute(f"SELECT min(CAST({c} AS DOUBLE)), max(CAST({c} AS DOUBLE)) FROM {source} "
                         f"WHERE {c} IS NOT NULL{nan}").fetchone()
    lo = 0.0 if lo is None else float(lo)
    hi = 1.0 if hi is None else float(hi)
    return {"name": col, "kind": "numeric", "edges": _nice_edges(lo, hi, bins), "closed": "left",
            "outside": "clamp"}


def _integer_attr(col: str, lo: int, hi: int, k: int, max_categories: int, bins: int) -> dict[str, Any]:
    if hi - lo + 1 <= max(max_categories, 1) and abs(lo) <= 2**53 and abs(hi) <= 2**53:
        return {"name": col, "kind": "integer", "min": lo, "max": hi, "outside": "clamp"}
    return {"name": col, "kind": "numeric", "edges": _nice_edges(float(lo), float(hi), bins),
            "closed": "left", "outside": "clamp"}


def draft_schema_command(data: str, out: str, *, columns: str | None = None,
                         max_categories: int = DEFAULT_MAX_CATEGORIES, bins: int = DEFAULT_BINS) -> list[str]:
    """``factorize schema draft DATA --out FILE``: draft, write ``out``, and return the lines
    to print (the warning first). ``columns``: comma-separated column names (default: all)."""
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    out_p = Path(out)
    data_s = os.fspath(data)
    if out_p.suffix.lower() != ".json":
        raise DataError(f"--out {out!r}: a schema is a .json file")
    try:
        if Path(data_s).exists() and out_p.exists() and out_p.resolve() == Path(data_s).resolve():
            raise DataError("--out names the data file; write the schema elsewhere")
    except OSError:
        pass
    doc = draft_schema_dict(data_s, columns=cols, max_categories=max_categories, bins=bins)
    schema = DomainSchema.from_dict(doc, source="the drafted schema", allow_draft=True)
    schema.to_json(out_p)
    banner = "!" * 78
    lines = [
        banner,
        f"WARNING: NOT PUBLIC. {out} was drafted FROM THE DATA in {doc['drafted_from_data']['file']}:",
        "every value, integer range and bin edge in it was read from the private records and is",
        "NOT protected by differential privacy. A schema must be public. Review every attribute,",
        "replace what is known only from the data with public knowledge (a codebook, a standard,",
        "round bin edges), then delete the \"drafted_from_data\" field; until then --domain refuses it.",
        banner,
        f"wrote       {out}: " + ", ".join(f"{a.name}={a.size} ({a.kind})" for a in schema.attributes),
    ]
    return lines


def check_schema_command(path: str) -> list[str]:
    """``factorize schema check FILE``: validate a schema and describe it (codes and labels)."""
    schema = DomainSchema.from_json(path)
    lines = [f"ok          {path}: domain schema version {SCHEMA_VERSION}, {len(schema)} attributes, "
             f"N = {schema.domain().size} cells"]
    for a in schema.attributes:
        labels = a.labels()
        shown = ", ".join(labels[:4]) + (f", …, {labels[-1]}" if len(labels) > 5 else
                                         "".join(f", {x}" for x in labels[4:]))
        lines.append(f"  {a.name}: {a.kind}, {a.size} codes, outside={a.outside}; labels {shown}")
    lines.append("sizes       " + ",".join(f"{a.name}={a.size}" for a in schema.attributes))
    return lines
