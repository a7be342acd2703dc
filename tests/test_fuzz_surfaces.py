"""The forgery fuzzer (``test_fuzz_forgeries.py``) extended to the input and
output surfaces of ``factorize run`` — hostile domain schemas, hostile data sources, hostile
output paths — every case driven through the real command line (``factorize.cli.main``, in
process) with a real ledger.

(a) **schemas** — random JSON documents per docs/schema.md with hostile attribute names and
    values (quotes, SQL metacharacters, Unicode, formula prefixes, very long strings,
    duplicates after normalisation, empty strings), integer ranges at the int64 edges, bin
    edges with NaN / inf / subnormals / unsorted. Each is either refused by ``factorize schema
    check`` with the package's typed error (exit 2, and ``DomainSchema.from_json`` agrees), or,
    accepted, planned over and run on random raw records (CSV or typed Parquet): no crash; a
    refusal names no record count nor per-column count; DuckDB's codes equal the pure-Python
    reference (``AttributeSchema.encode``): the histogram of data the reference maps whole is
    the reference's, data it refuses is refused.
(b) **data sources** — CSV / Parquet with wrong columns, NaN, empty, huge values, not what the
    suffix says, glob characters in the name; DuckDB files with tables, views over
    ``read_csv`` / ``read_parquet`` / ``glob`` / ``read_text`` of other files, macros,
    replacement scans, databases attached inside the attached one. Never a read of a file
    other than the one named (inotify on a folder of decoys, which hold valid records), no
    crash, and a refusal charges nothing (the ledger has no entry, no answers file).
(c) **output paths** — existing files and folders, symlinks and hard links to the plan, the
    data, the ledger or a bystander file, ``--tables`` folders holding a table's file already,
    attribute names that collide after sanitising, ``--tables`` on a prefix (CDF) plan,
    formula prefixes in names and labels. Never a pre-existing file lost or changed, never a
    charge without every file written, and every CSV cell written is safe to open in a
    spreadsheet (no text cell starting with = + - @ TAB CR).
(d) **the plan file** — replaced (by another genuine plan, a flipped byte, a truncation) or
    removed the moment the data is first opened, after verification and before the charge:
    the run opens the plan file once, and what it charges and records in the answers is the
    digest of the bytes it verified, or it refuses and charges nothing.

Every refusal must also be one of the package's typed errors (``FactorizeError``): the CLI maps
a bare ``ValueError`` / ``OSError`` to exit 2 as well, so the fuzzers record the exception
behind each exit code (``cli`` below) and report a refusal by anything else.

Every failure names its surface, its invariant and the smallest case (by the length of its
description) that broke it, with how many cases did. A fixed list of seeds (``SEEDS``); set
``FACTORIZE_FUZZ_SEED`` to explore another one.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import hashlib
import io
import json
import math
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from factorize.engines import DataError, histogram_duckdb
from factorize.errors import FactorizeError
from factorize.ledger import Ledger
from tests.plan_fixtures import identity_certificate
from workloads.schema import DomainSchema, SchemaError

SEEDS = ([int(os.environ["FACTORIZE_FUZZ_SEED"])] if os.environ.get("FACTORIZE_FUZZ_SEED")
         else [20261127, 26])
SCHEMA_CASES = 14     # per seed: hostile schema documents
DATA_CASES = 11       # per seed: hostile data sources
OUTPUT_CASES = 12     # per seed: hostile output paths
UNSAFE_LEAD = ("=", "+", "-", "@", "\t", "\r")
_SCHEMA = {"format": "factorize-domain-schema", "version": 1}


# ---------------------------------------------------------------------------------------
# findings: every broken invariant with its smallest case


class Findings:
    """Broken invariants of one surface, each with every case that broke it."""

    def __init__(self, surface: str) -> None:
        self.surface = surface
        self.cases: dict[str, list[tuple[str, str]]] = {}
        self.counts: dict[str, int] = {}

    def add(self, invariant: str, case: str, detail: str = "") -> None:
        self.cases.setdefault(invariant, []).append((case, detail))

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def report(self) -> str:
        lines = [f"surface {self.surface!r}: {len(self.cases)} invariant(s) broken (cases seen: {self.counts})"]
        for inv, cases in sorted(self.cases.items()):
            case, detail = min(cases, key=lambda c: len(c[0]))
            lines.append(f"- [{self.surface}] {inv}: {len(cases)} case(s); smallest: {case}"
                         + (f"\n    -> {detail[:600]}" if detail else ""))
        return "\n".join(lines)

    def check(self) -> None:
        if self.cases:
            pytest.fail(self.report(), pytrace=False)


# ---------------------------------------------------------------------------------------
# the command line, in process, with the exception behind every exit code recorded


@pytest.fixture
def cli(monkeypatch) -> Callable[[list[str]], tuple[int | None, str, BaseException | None]]:
    """``factorize`` in process: (exit code or None for a crash, stderr, the exception the
    exit code was mapped from, or the crash). The real ``exit_code_for`` maps every error;
    the wrapper only records which exception it was."""
    import factorize.cli.app as app
    import factorize.cli.common as common
    from factorize.cli import main

    seen: list[BaseException] = []
    real = common.exit_code_for

    def recording(exc: BaseException) -> int | None:
        seen.append(exc)
        return real(exc)

    monkeypatch.setattr(common, "exit_code_for", recording)
    monkeypatch.setattr(app, "exit_code_for", recording)

    def call(argv: list[str]) -> tuple[int | None, str, BaseException | None]:
        seen.clear()
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = main(argv)
        except SystemExit as exc:  # argparse
            return int(exc.code or 0), err.getvalue(), None
        except Exception as exc:  # noqa: BLE001 - a crash: reported by the caller
            return None, err.getvalue(), exc
        return rc, err.getvalue(), seen[-1] if seen else None

    return call


def _outcome(f: Findings, case: str, rc: int | None, exc: BaseException | None) -> bool:
    """Record a crash (an exception the CLI cannot map: a bug) or a refusal by an exception
    that is not one of the package's typed errors (``FactorizeError``; a bare ``ValueError``
    is mapped to exit 2 too, but is not the typed error the house rules ask for); False
    after a crash (nothing else to check)."""
    if rc is None:
        f.add("no crash", case, f"{type(exc).__name__}: {exc}")
        return False
    if rc != 0 and exc is not None and not isinstance(exc, FactorizeError):
        f.add("a refusal is the package's typed error", case, f"{type(exc).__name__} (exit {rc}): {exc}")
    return True


# ---------------------------------------------------------------------------------------
# ledger, plans, files


def _ledger(folder: Path) -> Path:
    L = folder / "ledger.db"
    Ledger.create(L).create_dataset("d", {"type": "approx_dp", "epsilon": 1e6, "delta": 0.5})
    return L


def _charges(L: Path) -> list[dict[str, Any]] | str:
    try:
        return Ledger.open(L).history("d")
    except Exception as exc:  # noqa: BLE001 - a destroyed ledger is a finding
        return f"ledger unreadable: {type(exc).__name__}: {exc}"


def _marginal_plan(domain: Any, path: Path) -> Path:
    """A genuine plan of the 1-way marginals over ``domain`` (identity certificate: no solve)."""
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import save_plan

    spec = "marginals:" + "x".join(map(str, domain.sizes)) + ":1"
    save_plan(build_plan(spec, "epsilon=1,delta=1e-6", domain=domain,
                         certificate=identity_certificate(spec)), path)
    return path


def _schema(attrs: list[dict[str, Any]]) -> DomainSchema:
    return DomainSchema.from_dict({**_SCHEMA, "attributes": attrs})


def _accepted_values(candidates: list[str]) -> list[str]:
    """The candidates a one-attribute schema accepts as categorical values (whatever the
    whitespace rule of the day), in order, without repeats."""
    out: list[str] = []
    for v in candidates:
        try:
            _schema([{"name": "t", "kind": "categorical", "values": out + [v]}])
            out.append(v)
        except SchemaError:
            pass
    return out


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    """A CSV (RFC 4180 quoting, ``None`` as an empty field)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\r\n")  # \r in a field is quoted too
        w.writerow(header)
        w.writerows([["" if v is None else v for v in r] for r in rows])
    return path


def _snapshot(folder: Path, skip: set[str]) -> dict[str, str]:
    """Every entry under ``folder``: a file's SHA-256, 'dir', or 'link->target'."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            rel = str(p.relative_to(folder))
            if rel in skip:
                continue
            if p.is_symlink():
                out[rel] = "link->" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _unsafe_cells(path: Path) -> list[str]:
    """The text cells of a CSV that a spreadsheet would take for a formula (header included;
    ``#`` metadata lines and numbers aside)."""
    text = path.read_text(encoding="utf-8")
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    bad = []
    for row in csv.reader(io.StringIO(body, newline="")):
        for cell in row:
            if cell[:1] in UNSAFE_LEAD:
                try:
                    float(cell)
                except ValueError:
                    bad.append(cell)
    return bad


# ---------------------------------------------------------------------------------------
# no record count in a refusal


def _count_leaks(message: str, secrets: set[int], public: str) -> list[str]:
    """The numbers of ``message`` that are one of the data's counts (``secrets``) and not also
    in the ``public`` text (paths, the schema): any ``N row(s)`` phrase, and any other number
    of at least two digits."""
    pub = set(re.findall(r"\d+", public))
    found = {m for m in re.findall(r"\b(\d+) rows?\b", message)}
    found |= {t for t in re.findall(r"\d+", message) if len(t) >= 2}
    return sorted(t for t in found if int(t) in secrets and t not in pub)


# ---------------------------------------------------------------------------------------
# (a) hostile schemas

_NAMES = ["sex", 'a"b', "x'; DROP TABLE t; --", "é名", '=cmd|" /C calc"!A0', "+1", "-x", "@sum",
          "\tTab", "a b", "a_b", "A", "a", "x ", " x", "", "n" * 5000, "a,b", "a\nb",
          "__factorize_source", "v0", "c0", "count", "e\u0301", "\u00e9", "ﬁ", "NULL", '"', "\\",
          "x\x00y", "\u202eevil", "vk", "r1", "g", "s0", "age", "pay"]
_TEXTS = ["Female", "Male", "=1+1", "+A", "-B", "@C", "\tD", "E\t", "\rF", "G\r", "\nH", " I", "J ",
          "", "NULL", "null", "nan", "true", "1e3", "0x10", "40", "O'Brien", 'a"b', "a,b", "é",
          "e\u0301", "名前", "\u00a0nbsp", "z\u3000", "x" * 1024, "y" * 1025, "%s", "%", "_", "\\",
          "'; SELECT 1; --", "\u202e", "\x00", "other", "-", "=", "k1", "k2", "k3"]
_INTS = [0, 1, -1, 17, 2**31 - 1, -2**31, 2**53, -2**53, 2**53 + 1, 2**63 - 1, -2**63, 2**64]
_FLOATS = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 0.1, 0.5, 1.0, 10.5, 1e15,
           2.0**53, 2.0**53 + 2, 1e308, 1.7976931348623157e308, -1.0, -1e308, math.nan, math.inf,
           -math.inf]


def _pick(rng: np.random.Generator, pool: list[Any]) -> Any:
    return pool[int(rng.integers(len(pool)))]


def _hostile_attribute(rng: np.random.Generator) -> dict[str, Any]:
    a: dict[str, Any] = {"name": _pick(rng, _NAMES)}
    kind = _pick(rng, ["categorical"] * 3 + ["integer"] * 2 + ["numeric"] * 2 + ["Numeric"])
    a["kind"] = kind
    if kind == "categorical":
        t = _pick(rng, ["text"] * 4 + ["int", "int", "bool", "mixed", "float"])
        k = int(rng.integers(1, 5))
        if t == "text":
            a["values"] = [_pick(rng, _TEXTS) for _ in range(k)]
        elif t == "int":
            a["values"] = [_pick(rng, _INTS) + int(rng.integers(0, 3)) for _ in range(k)]
        elif t == "bool":
            a["values"] = _pick(rng, [[True, False], [False], [True, True], [False, True]])
        elif t == "mixed":
            a["values"] = ["a", 1]
        else:
            a["values"] = [1.5, 2.0]
    elif kind == "integer":
        lo = _pick(rng, _INTS + [1.0, True, "3"])
        a["min"] = lo
        a["max"] = lo + int(rng.integers(-1, 5)) if isinstance(lo, int) and not isinstance(lo, bool) \
            else _pick(rng, _INTS)
    else:
        k = int(rng.integers(2, 5))
        edges = [_pick(rng, _FLOATS) for _ in range(k)]
        if rng.random() < 0.6:
            edges = sorted(set(e for e in edges if math.isfinite(e)) | {float(rng.integers(-5, 5))})
            edges = edges if len(edges) >= 2 else edges + [edges[-1] + 1]
        if rng.random() < 0.3:
            edges = [int(e) if math.isfinite(e) and abs(e) < 2**62 else e for e in edges]
        a["edges"] = edges
        closed = _pick(rng, ["left", "right", "left", "right", None, "both"])
        if closed is not None:
            a["closed"] = closed
    outside = _pick(rng, ["refuse", "clamp", "catch_all", "catch_all", None, "CLAMP"])
    if outside is not None:
        a["outside"] = outside
    if outside == "catch_all" and rng.random() < 0.5:
        a["catch_all_label"] = _pick(rng, _TEXTS)
    if rng.random() < 0.15:
        a["description"] = _pick(rng, _TEXTS)
    if rng.random() < 0.03:
        a["bogus"] = 1
    return a


def _mostly_valid_attribute(rng: np.random.Generator) -> dict[str, Any]:
    """A hostile attribute; three times in four one the parser accepts alone (drawn again up
    to 8 times), so that most documents reach a run."""
    a = _hostile_attribute(rng)
    if rng.random() < 0.25:
        return a
    for _ in range(8):
        try:
            _schema([a])
            return a
        except SchemaError:
            a = _hostile_attribute(rng)
    return a


def _hostile_schema(rng: np.random.Generator) -> dict[str, Any]:
    doc: dict[str, Any] = dict(_SCHEMA)
    if rng.random() < 0.04:
        doc["version"] = _pick(rng, [2, "1", True, 1.0])
    doc["attributes"] = [_mostly_valid_attribute(rng) for _ in range(int(rng.integers(1, 4)))]
    if rng.random() < 0.03:
        doc["extra"] = None
    return doc


def _raw_values(rng: np.random.Generator, attr: Any, fmt: str, n: int, p_bad: float) -> tuple[list[Any], str]:
    """``n`` raw values for ``attr`` and their column's type class: CSV text, or a typed
    Parquet column; a share ``p_bad`` (about) hostile — unlisted, missing, malformed, beyond
    the range, at the ends of the float and int64 ranges."""
    good: list[Any]
    bad: list[Any]
    if attr.kind == "categorical" and attr.value_type == "string":
        good = list(attr.values)
        bad = [v for v in _TEXTS if v not in attr.values] + [None, "", " "]
        good += [f" {v} " for v in attr.values[:1]]
        tc = "text"
    elif attr.kind == "categorical" and attr.value_type == "boolean":
        good = list(attr.values)
        bad = [None, "yes", "1", " TRUE "] if fmt == "csv" else [None]
        tc = "text" if fmt == "csv" else "boolean"
        if fmt == "csv":
            good = ["true" if v else "false" for v in good] + ["True" if attr.values[0] else "FALSE"]
    else:
        if attr.kind == "categorical":
            good = list(attr.values)
        elif attr.kind == "integer":
            good = [int(x) for x in rng.integers(0, attr.high - attr.low + 1, 6)] if attr.high > attr.low else [0]
            good = [attr.low + g for g in good]
        else:
            e = [float(x) for x in attr.edges]
            good = [(a + b) / 2 for a, b in zip(e, e[1:], strict=False)] + e[1:-1] + \
                [math.nextafter(x, math.inf) for x in e[:-1]] + [math.nextafter(x, -math.inf) for x in e[1:]]
            good = [g for g in good if math.isfinite(g)]
        big = [2**63 - 1, -2**63] if fmt != "csv" else [2**63, -2**63 - 1, 2**64]
        bad = [None, 2**53 + 1, -2**53 - 1, *big]
        if attr.kind == "numeric" or rng.random() < 0.5:
            tc = "float" if fmt != "csv" else "text"
            bad += [math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1e308, 1.5]
        else:
            tc = "integer" if fmt != "csv" else "text"
        if tc == "float":
            good = [float(g) for g in good]
            bad = [None if b is None else float(b) for b in bad]
            bad = [None if b is None else float(b) for b in bad]
        if fmt == "csv":
            def text(v: Any) -> Any:
                return None if v is None else repr(v) if isinstance(v, float) else str(v)
            good = [text(g) for g in good] + ([f" {text(good[0])} "] if good else [])
            bad = [text(b) for b in bad] + ["1e999", "-1e999", "nan", "inf", "1_000", "0x10", "4e1", "", "x"]
        elif tc == "integer":
            good = [int(g) for g in good if float(g) == int(g) and abs(g) < 2**63] or [0]
            bad = [b for b in bad if b is None or (isinstance(b, int) and -2**63 <= b < 2**63)]
    good = good or [None]
    out = [(_pick(rng, bad) if rng.random() < p_bad else _pick(rng, good)) for _ in range(n)]
    return out, tc


def _arrow_type(tc: str) -> Any:
    return {"text": pa.string(), "integer": pa.int64(), "float": pa.float64(), "boolean": pa.bool_()}[tc]


def _small_domain(schema: DomainSchema, limit: int = 96) -> Any:
    """The schema projected onto its first attributes whose domain has at most ``limit`` cells
    (None when even the first is larger)."""
    names, size = [], 1
    for a in schema.attributes:
        if size * a.size > limit:
            break
        names.append(a.name)
        size *= a.size
    return schema.project(names).domain() if names else None


def _first_mismatch(attr: Any, values: list[Any], tc: str, folder: Path, fmt: str) -> str:
    """The first raw value whose DuckDB code differs from the reference's (one file per
    distinct value, at most 24)."""
    dom = DomainSchema([attr]).domain()
    seen: list[Any] = []
    for v in values:
        if v in seen or (isinstance(v, float) and math.isnan(v) and any(isinstance(s, float) and math.isnan(s) for s in seen)):
            continue
        seen.append(v)
        if len(seen) > 24:
            break
        want = attr.encode(v, tc)
        p = folder / f"one.{fmt}"
        if fmt == "csv":
            _write_csv(p, [attr.name], [[v]])
        else:
            pq.write_table(pa.table({attr.name: pa.array([v], _arrow_type(tc))}), p)
        try:
            got: Any = int(np.argmax(histogram_duckdb(p, dom)))
        except DataError:
            got = "refused"
        except Exception as exc:  # noqa: BLE001 - reported as the value's outcome
            got = f"crash {type(exc).__name__}"
        if (want < 0) != (got == "refused") or (want >= 0 and got != want):
            return f"value {v!r} ({tc}): reference {want}, DuckDB {got}"
    return "no single value differs (a combination does)"


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_schemas(seed, tmp_path, cli):  # noqa: C901 (counted allow-list)
    """Surface (a) of the module docstring."""
    f = Findings(f"schemas seed={seed}")
    rng = np.random.default_rng([seed, 1])
    for i in range(SCHEMA_CASES):
        doc = _hostile_schema(rng)
        case_dir = tmp_path / f"s{i}"
        case_dir.mkdir()
        spath = case_dir / "schema.json"
        text = json.dumps(doc, allow_nan=True, ensure_ascii=bool(rng.random() < 0.5))
        spath.write_text(text, encoding="utf-8")
        case = f"schema {text[:300]}"
        rc, err, exc = cli(["schema", "check", str(spath)])
        if not _outcome(f, case, rc, exc):
            continue
        try:
            schema = DomainSchema.from_json(spath)
        except SchemaError:
            schema = None
        except Exception as exc2:  # noqa: BLE001 - a crash is a finding
            f.add("schema parsing: typed refusal", case, f"{type(exc2).__name__}: {exc2}")
            continue
        if (rc == 0) != (schema is not None):
            f.add("schema check agrees with DomainSchema.from_json", case, f"exit {rc}, parsed {schema is not None}")
        if schema is None:
            f.count("refused")
            continue
        f.count("accepted")
        dom = _small_domain(schema)
        if dom is None:
            f.count("too large to run")
            continue
        try:
            plan = _marginal_plan(dom, case_dir / "p.plan")
        except FactorizeError:
            f.count("plan refused")
            continue
        except Exception as exc2:  # noqa: BLE001 - a crash is a finding
            f.add("planning over an accepted schema: no crash", case, f"{type(exc2).__name__}: {exc2}")
            continue
        # random raw records
        fmt = _pick(rng, ["csv", "parquet"])
        n = int(rng.integers(313, 900))
        p_bad = _pick(rng, [0.0, 0.0, 0.03, 0.2])
        cols, tcs = {}, {}
        for a in dom.schema.attributes:
            cols[a.name], tcs[a.name] = _raw_values(rng, a, fmt, n, p_bad)
        data = case_dir / f"records.{fmt}"
        if fmt == "csv":
            _write_csv(data, list(cols), [list(r) for r in zip(*cols.values(), strict=True)])
        else:
            pq.write_table(pa.table({k: pa.array(v, _arrow_type(tcs[k])) for k, v in cols.items()}), data)
        case = f"{case}; {fmt} of {n} rows, p_bad={p_bad}"
        codes = {a.name: [a.encode(v, tcs[a.name]) for v in cols[a.name]] for a in dom.schema.attributes}
        refused = any(c < 0 for cs in codes.values() for c in cs)
        secrets = {n}
        for a in dom.schema.attributes:
            cs = codes[a.name]
            secrets |= {sum(c == k for c in cs) for k in (-1, -2, -3)} | {sum(c < 0 for c in cs)}
        secrets.discard(0)
        public = str(case_dir) + json.dumps(schema.to_dict(), ensure_ascii=False) \
            + " ".join(a.rule_text() + " ".join(a.labels()) for a in schema.attributes)
        # DuckDB's codes against the reference
        try:
            h = histogram_duckdb(data, dom)
            got_refused = False
        except DataError as e:
            got_refused, h = True, None
            leaks = _count_leaks(str(e), secrets, public)
            if leaks:
                f.add("refusal names no record count", case, f"numbers {leaks} of counts {sorted(secrets)} in: {e}")
        except Exception as exc2:  # noqa: BLE001 - a crash is a finding
            f.add("DuckDB mapping: no crash", case, f"{type(exc2).__name__}: {exc2}")
            continue
        if refused != got_refused:
            bad = next(a for a in dom.schema.attributes if any(c < 0 for c in codes[a.name])) if refused else None
            detail = (f"reference refuses ({_first_mismatch(bad, cols[bad.name], tcs[bad.name], case_dir, fmt)})"
                      if bad is not None else "DuckDB refuses data the reference maps whole")
            if not refused:
                for a in dom.schema.attributes:
                    d1 = _first_mismatch(a, cols[a.name], tcs[a.name], case_dir, fmt)
                    if not d1.startswith("no single"):
                        detail += f": attribute {a.name!r}: {d1}"
                        break
            f.add("DuckDB codes equal the reference (refusals)", case, detail)
        elif h is not None:
            idx = np.ravel_multi_index(tuple(np.array(codes[a]) for a in dom.attributes), dom.sizes)
            want = np.bincount(idx, minlength=dom.size)
            if not np.array_equal(h, want):
                detail = ""
                for j, a in enumerate(dom.schema.attributes):
                    axes = tuple(k for k in range(len(dom.sizes)) if k != j)
                    if not np.array_equal(h.reshape(dom.sizes).sum(axis=axes), want.reshape(dom.sizes).sum(axis=axes)):
                        detail = f"attribute {a.name!r}: " + _first_mismatch(a, cols[a.name], tcs[a.name], case_dir, fmt)
                        break
                f.add("DuckDB codes equal the reference (histogram)", case, detail)
        # the whole run, through the command line, with a ledger
        L = _ledger(case_dir)
        out = case_dir / "answers.csv"
        rc, err, exc = cli(["run", str(plan), "--data", str(data), "--out", str(out),
                            "--ledger", str(L), "--dataset", "d"])
        if not _outcome(f, case, rc, exc):
            continue
        charges = _charges(L)
        if rc != 0:
            f.count("run refused")
            leaks = _count_leaks(err, secrets, public)
            if leaks:
                f.add("run refusal names no record count", case, f"numbers {leaks} of counts {sorted(secrets)} in: {err}")
            if charges or out.exists():
                f.add("no charge without a release", case, f"exit {rc}, ledger {charges}, answers {out.exists()}")
        else:
            f.count("released")
            if not (isinstance(charges, list) and len(charges) == 1 and charges[0]["status"] == "released"
                    and out.is_file()):
                f.add("a release is charged once and written", case, f"ledger {charges}")
            else:
                unsafe = _unsafe_cells(out)
                if unsafe:
                    f.add("CSV cells safe to open", case, f"unsafe cells {unsafe[:5]}")
    assert f.counts.get("accepted", 0) >= 3 and f.counts.get("released", 0) >= 1, \
        f"the schema fuzzer reached too few runs: {f.counts}"
    f.check()


# ---------------------------------------------------------------------------------------
# (b) hostile data sources

class FileWatch:
    """Opens and reads of anything in one folder (Linux inotify), whoever does them — DuckDB's
    C++ included."""

    IN_ACCESS, IN_OPEN = 0x1, 0x20

    def __init__(self, folder: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, os.fsencode(folder),
                                                      self.IN_ACCESS | self.IN_OPEN) < 0:
            pytest.fail(f"inotify unavailable (errno {ctypes.get_errno()}): reads of other files "
                        "cannot be observed", pytrace=False)

    def events(self) -> list[tuple[int, str]]:
        """(mask, name) of every open or read since the last call ('.' for the folder itself:
        a listing)."""
        out: list[tuple[int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            i = 0
            while i < len(data):
                _, mask, _, ln = struct.unpack_from("iIII", data, i)
                out.append((mask, data[i + 16:i + 16 + ln].rstrip(b"\0").decode(errors="replace") or "."))
                i += 16 + ln

    def names(self) -> set[str]:
        """Names opened or read since the last call."""
        return {name for _, name in self.events()}

    def close(self) -> None:
        os.close(self.fd)


GOOD_ATTRS = [{"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
              {"name": "age", "kind": "integer", "min": 17, "max": 20, "outside": "clamp"},
              {"name": "pay", "kind": "numeric", "edges": [0, 10.5, 100], "closed": "left",
               "outside": "catch_all"}]
GOOD_ROWS = [["Female", 18, 1.5], ["Male", 19, 50.0], ["Male", 40, 99.0], ["Female", 17, -3.0]] * 30


def _decoys(folder: Path) -> dict[str, Path]:
    """Valid record files that no run may read: a read would release their counts."""
    folder.mkdir()
    d = {"csv": _write_csv(folder / "secret.csv", ["sex", "age", "pay"], GOOD_ROWS),
         "parquet": folder / "secret.parquet", "db": folder / "secret.duckdb",
         "glob": folder / "rec_secret.csv"}
    pq.write_table(pa.table({"sex": [r[0] for r in GOOD_ROWS], "age": [r[1] for r in GOOD_ROWS],
                             "pay": [r[2] for r in GOOD_ROWS]}), d["parquet"])
    con = duckdb.connect(str(d["db"]))
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{d['parquet']}')")
    con.close()
    _write_csv(d["glob"], ["sex", "age", "pay"], GOOD_ROWS)
    return d


def _sql_text(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def _database(path: Path, statements: list[str]) -> Path:
    con = duckdb.connect(str(path))
    try:
        for s in statements:
            con.execute(s)
    finally:
        con.close()
    return path


DATA_KINDS = ["csv_good", "parquet_good", "table_good", "csv_bad", "parquet_bad", "empty", "not_what_it_says",
              "glob_name", "view", "view", "view", "macro", "attached", "directory", "table_ref_oddities"]


def _kinds(rng: np.random.Generator, kinds: list[str], n: int) -> list[str]:
    """``n`` kinds: seed-shuffled rounds of every kind (each reached once per round)."""
    out: list[str] = []
    while len(out) < n:
        out += [kinds[int(i)] for i in rng.permutation(len(kinds))]
    return out[:n]


def _data_case(rng: np.random.Generator, kind: str, folder: Path, decoys: dict[str, Path],  # noqa: C901 (counted allow-list)
               i: int) -> tuple[str, str, bool]:
    """One hostile data source of ``kind``: (--data argument, description, whether it is a
    genuine source of the plan's records that must release)."""
    cols = ["sex", "age", "pay"]
    p = folder / f"d{i}"
    if kind == "csv_good":
        return str(_write_csv(p.with_suffix(".csv"), cols, GOOD_ROWS)), kind, True
    if kind == "parquet_good":
        t = pa.table({c: [r[j] for r in GOOD_ROWS] for j, c in enumerate(cols)})
        pq.write_table(t, p.with_suffix(".parquet"))
        return str(p.with_suffix(".parquet")), kind, True
    if kind == "table_good":
        vals = ", ".join(f"('{r[0]}', {r[1]}, {r[2]})" for r in GOOD_ROWS)
        db = _database(p.with_suffix(".duckdb"), ["CREATE TABLE t(sex VARCHAR, age BIGINT, pay DOUBLE)",
                                                  f"INSERT INTO t VALUES {vals}"])
        return f"{db}::t", kind, True
    if kind == "csv_bad":
        variant = _pick(rng, ["missing column", "extra column", "upper-case header", "duplicate header",
                              "NaN and huge", "quoted header", "BOM", "ragged"])
        header = {"missing column": ["sex", "age"], "extra column": cols + ["x"],
                  "upper-case header": ["SEX", "age", "pay"], "duplicate header": ["sex", "sex", "age", "pay"],
                  "quoted header": ['"sex"', "age", "pay"]}.get(variant, cols)
        rows = [r + ["1"] * (len(header) - 3) for r in GOOD_ROWS] if len(header) >= 3 else [r[:2] for r in GOOD_ROWS]
        if variant == "NaN and huge":
            rows = [["Male", "9223372036854775808", "nan"], ["Female", "-1e999", "1e999"], ["Male", "18", "inf"]] * 5
        path = _write_csv(p.with_suffix(".csv"), header, rows)
        if variant == "BOM":
            path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        if variant == "ragged":
            path.write_text(path.read_text() + "Male,18\n")
        return str(path), f"csv {variant}", False
    if kind == "parquet_bad":
        variant = _pick(rng, ["zero rows", "date column", "list column", "int64 extremes", "NaN floats", "struct"])
        n = len(GOOD_ROWS)
        t = {"sex": pa.array([r[0] for r in GOOD_ROWS]), "age": pa.array([r[1] for r in GOOD_ROWS]),
             "pay": pa.array([r[2] for r in GOOD_ROWS])}
        if variant == "zero rows":
            t = {k: v.slice(0, 0) for k, v in t.items()}
        elif variant == "date column":
            t["age"] = pa.array([0] * n, pa.date32())
        elif variant == "list column":
            t["pay"] = pa.array([[1.0]] * n)
        elif variant == "int64 extremes":
            t["age"] = pa.array([2**63 - 1, -2**63] * (n // 2), pa.int64())
        elif variant == "NaN floats":
            t["pay"] = pa.array([math.nan, math.inf, -math.inf, 1e308] * (n // 4))
        else:
            t["sex"] = pa.array([{"a": 1}] * n)
        pq.write_table(pa.table(t), p.with_suffix(".parquet"))
        return str(p.with_suffix(".parquet")), f"parquet {variant}", False
    if kind == "empty":
        variant = _pick(rng, ["0 bytes csv", "header only", "newline only", "0 bytes parquet"])
        suffix = ".parquet" if "parquet" in variant else ".csv"
        content = {"header only": b"sex,age,pay\n", "newline only": b"\n"}.get(variant, b"")
        p.with_suffix(suffix).write_bytes(content)
        return str(p.with_suffix(suffix)), variant, False
    if kind == "not_what_it_says":
        variant = _pick(rng, ["parquet named .csv", "csv named .parquet", "duckdb named .csv", "binary .csv",
                              "non-UTF-8 csv"])
        target = p.with_suffix(".parquet" if "named .parquet" in variant else ".csv")
        if variant == "parquet named .csv":
            target.write_bytes(decoys["parquet"].read_bytes())
        elif variant == "csv named .parquet":
            target.write_bytes(decoys["csv"].read_bytes())
        elif variant == "duckdb named .csv":
            target.write_bytes(decoys["db"].read_bytes())
        elif variant == "binary .csv":
            target.write_bytes(bytes(rng.integers(0, 256, 300, dtype=np.uint8)))
        else:
            target.write_bytes(b"sex,age,pay\n\xff\xfe,18,1\n")
        return str(target), variant, False
    if kind == "glob_name":
        # a file literally named with glob characters, next to a decoy its pattern matches
        name = _pick(rng, ["rec*.csv", "rec?secret.csv", "rec[_]secret.csv", "rec_secre{t,x}.csv"])
        target = decoys["csv"].parent / name
        _write_csv(target, cols, GOOD_ROWS[:8])
        return str(target), f"glob characters in the name {name!r}", False
    if kind == "directory":
        return str(decoys["csv"].parent), "the decoys' folder as --data", False
    if kind == "table_ref_oddities":
        variant = _pick(rng, ["read_csv as table name", "db in a path with ::", "quoted table"])
        if variant == "read_csv as table name":
            db = _database(p.with_suffix(".duckdb"), ["CREATE TABLE t AS SELECT 1 AS x"])
            return f"{db}::read_csv({_sql_text(decoys['csv'])})", variant, False
        if variant == "db in a path with ::":
            sub = folder / f"x::y{i}"
            sub.mkdir()
            return f"{sub}::t", variant, False
        db = _database(p.with_suffix(".duckdb"), ["CREATE TABLE t AS SELECT 1 AS x"])
        return f'{db}::"t"; SELECT * FROM read_csv({_sql_text(decoys["csv"])}) --', variant, False
    # views, macros, attached databases over other files
    csvs, pqs = _sql_text(decoys["csv"]), _sql_text(decoys["parquet"])
    glob = _sql_text(decoys["csv"].parent / "*.csv")
    if kind == "view":
        body = _pick(rng, [f"SELECT * FROM read_csv({csvs})", f"SELECT * FROM read_csv_auto({csvs})",
                           f"SELECT * FROM read_parquet({pqs})", f"SELECT * FROM read_csv({glob})",
                           f"FROM {csvs}", f"SELECT * FROM {pqs}",
                           f"SELECT 'Male' AS sex, 18 AS age, (SELECT count(*) FROM read_csv({csvs}))::DOUBLE AS pay",
                           f"SELECT 'Male' AS sex, 18 AS age, length(content)::DOUBLE AS pay FROM read_text({csvs})",
                           f"SELECT 'Male' AS sex, 18 AS age, 1.0 AS pay FROM glob({glob})",
                           f"SELECT * FROM read_csv({csvs}) UNION ALL SELECT * FROM read_csv({csvs})",
                           f"SELECT 'Male' AS sex, 18 AS age, size::DOUBLE AS pay FROM read_blob({csvs})"])
        schema = _pick(rng, ["", "s."])
        stmts = (["CREATE SCHEMA s"] if schema else []) + [f"CREATE VIEW {schema}v AS {body}"]
        return _view_source(p, stmts, f"{schema}v", f"view {schema}v AS {body}")
    if kind == "macro":
        stmts = [f"CREATE MACRO m() AS TABLE SELECT * FROM read_csv({csvs})",
                 "CREATE VIEW v AS SELECT * FROM m()"]
        return _view_source(p, stmts, "v", "view over a table macro reading another file")
    # attached inside the attached database
    stmts = [f"ATTACH {_sql_text(decoys['db'])} AS inner_db (READ_ONLY)",
             "CREATE VIEW v AS SELECT * FROM inner_db.t"]
    return _view_source(p, stmts, "v", "view over a database attached inside the attached one")


def _view_source(p: Path, stmts: list[str], view: str, label: str) -> tuple[str, str, bool]:
    """A DuckDB file holding ``stmts`` as the data source ``FILE::view`` (empty when DuckDB
    itself refuses the statements)."""
    try:
        db = _database(p.with_suffix(".duckdb"), stmts)
    except duckdb.Error:
        return "", "", False
    return f"{db}::{view}", label, False


@pytest.fixture(scope="module")
def good_plan(tmp_path_factory) -> Path:
    return _marginal_plan(_schema(GOOD_ATTRS).domain(), tmp_path_factory.mktemp("plans") / "good.plan")


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_data_sources(seed, tmp_path, cli, good_plan):
    """Surface (b) of the module docstring."""
    f = Findings(f"data sources seed={seed}")
    rng = np.random.default_rng([seed, 2])
    decoys = _decoys(tmp_path / "decoys")
    watch = FileWatch(decoys["csv"].parent)
    try:
        for i, kind in enumerate(_kinds(rng, DATA_KINDS, DATA_CASES)):
            case_dir = tmp_path / f"c{i}"
            case_dir.mkdir()
            data, what, genuine = _data_case(rng, kind, case_dir, decoys, i)
            if not data:
                continue  # DuckDB itself would not store it
            L = _ledger(case_dir)
            out = case_dir / "answers.csv"
            watch.names()  # forget what building the case read
            rc, err, exc = cli(["run", str(good_plan), "--data", data, "--out", str(out),
                                "--ledger", str(L), "--dataset", "d"])
            read = sorted(watch.names() - {Path(data).name})
            case = f"{what} (--data {data.replace(str(tmp_path), '<tmp>')})"
            if not _outcome(f, case, rc, exc):
                continue
            if read:
                f.add("never a read of a file other than the one named", case,
                      f"opened/read {read} in the decoys' folder; exit {rc}; {err.strip()[:300]}")
            charges = _charges(L)
            if rc != 0:
                f.count("refused")
                if charges or out.exists():
                    f.add("no charge without a release", case, f"exit {rc}, ledger {charges}")
                if genuine:
                    f.add("a genuine source releases", case, err.strip())
            else:
                f.count("released")
                if not (isinstance(charges, list) and len(charges) == 1 and out.is_file()):
                    f.add("a release is charged once and written", case, f"ledger {charges}")
    finally:
        watch.close()
    assert f.counts.get("released", 0) >= 1 and f.counts.get("refused", 0) >= 3, f.counts
    f.check()


# ---------------------------------------------------------------------------------------
# (c) hostile output paths

_HOSTILE_LABELS = ["=1+1", "+A", "-B", "@C", "\tD", "\rE", "=HYPERLINK(\"x\")", "ok"]


@pytest.fixture(scope="module")
def output_plans(tmp_path_factory) -> dict[str, Any]:
    """Plans whose labels and attribute names start with formula characters: one whose
    --tables names are distinct after sanitising, one whose names collide ("a b" / "a_b",
    "=n" / "@n": written to distinct files all the same), and a prefix workload (one CDF
    table); with records for each."""
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import save_plan

    d = tmp_path_factory.mktemp("out_plans")
    values = _accepted_values(_HOSTILE_LABELS)
    assert len(values) >= 3, values
    distinct = _schema([{"name": "=name", "kind": "categorical", "values": values},
                        {"name": "+age", "kind": "integer", "min": -2, "max": 1, "outside": "clamp"}])
    colliding = _schema([{"name": "a b", "kind": "categorical", "values": values[:2]},
                         {"name": "a_b", "kind": "categorical", "values": values[:2]},
                         {"name": "=n", "kind": "integer", "min": 0, "max": 1},
                         {"name": "@n", "kind": "integer", "min": 0, "max": 1}])
    rows = [[values[i % len(values)], (i % 6) - 3] for i in range(240)]
    plans = {"distinct": _marginal_plan(distinct.domain(), d / "distinct.plan"),
             "colliding": _marginal_plan(colliding.domain(), d / "colliding.plan")}
    data = {"distinct": _write_csv(d / "distinct.csv", ["=name", "+age"], rows),
            "colliding": _write_csv(d / "colliding.csv", ["a b", "a_b", "=n", "@n"],
                                    [[values[i % 2], values[(i // 2) % 2], i % 2, (i // 3) % 2] for i in range(240)])}
    one = _schema([{"name": "=name", "kind": "categorical", "values": values}])
    spec = f"prefix:{len(values)}"
    save_plan(build_plan(spec, "epsilon=1,delta=1e-6", domain=one.domain(),
                         certificate=identity_certificate(spec)), d / "prefix.plan")
    plans["prefix"] = d / "prefix.plan"
    data["prefix"] = _write_csv(d / "prefix.csv", ["=name"], [[r[0]] for r in rows])
    return {"plans": plans, "data": data, "tables": {"distinct": 2, "colliding": 4, "prefix": 1}}


OUTPUT_KINDS = ["fresh", "existing", "existing_overwrite", "directory", "symlink", "hardlink", "dangling",
                "missing_folder", "suffix", "formula_name", "tables", "tables_existing", "tables_is_file",
                "out_in_tables", "out_is_tables", "dotdot_data"]


def _output_case(rng: np.random.Generator, kind: str, root: Path, plan: Path, data: Path, L: Path,  # noqa: C901 (counted allow-list)
                 has_overwrite: bool) -> tuple[list[str], str, Path, bool]:
    """A hostile output of ``kind``: (extra arguments, description, --out path, whether
    --overwrite is given)."""
    sentinel = root / "bystander.txt"
    sentinel.write_text("a file that belongs to someone else\n")
    suffix = _pick(rng, [".csv", ".csv", ".json", ".parquet"])
    out = root / f"answers{suffix}"
    extra: list[str] = []
    overwrite = False
    if kind == "existing":
        out.write_bytes(b"precious earlier answers\n")
    elif kind == "existing_overwrite":
        out.write_bytes(b"earlier answers the caller means to replace\n")
        overwrite = has_overwrite
    elif kind == "directory":
        out.mkdir()
        (out / "inside.txt").write_text("kept\n")
    elif kind == "symlink":
        target = _pick(rng, [plan, data, L, Path(str(L) + ".head"), sentinel])
        out.symlink_to(target)
        kind += f" to {target.name}"
    elif kind == "hardlink":
        target = _pick(rng, [plan, data, sentinel])
        out = root / f"linked{suffix}"
        os.link(target, out)
        kind += f" of {target.name}"
    elif kind == "dangling":
        out.symlink_to(root / "nowhere" / "x.csv")
    elif kind == "missing_folder":
        out = root / "no_such_folder" / f"answers{suffix}"
    elif kind == "suffix":
        out = root / _pick(rng, ["answers.txt", "answers", "answers.csv.gz", ".csv"])
    elif kind == "formula_name":
        out = root / (_pick(rng, ["=cmd", "+x", "-x", "@x", "\tx"]) + suffix)
    elif kind.startswith("tables") or kind.startswith("out_"):
        tables = root / "tables"
        tables.mkdir()
        extra = ["--tables", str(tables)]
        if kind == "tables_existing":
            for name in ("_name.csv", "_age.csv", "a_b.csv", "_n.csv", "total.csv"):
                (tables / name).write_text("someone's table\n")
        elif kind == "tables_is_file":
            tables.rmdir()
            tables.write_text("not a folder\n")
        elif kind == "out_in_tables":
            out = tables / _pick(rng, ["_name.csv", "a_b.csv", "_n.csv"])
        elif kind == "out_is_tables":
            out = tables
    elif kind == "dotdot_data":
        out = root / "sub" / ".." / data.name
        (root / "sub").mkdir()
    return extra, f"{kind}, --out {out.name!r}", out, overwrite


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_output_paths(seed, tmp_path, cli, output_plans):
    """Surface (c) of the module docstring."""
    import shutil

    from factorize.cli.app import build_parser

    f = Findings(f"output paths seed={seed}")
    rng = np.random.default_rng([seed, 3])
    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]
    has_overwrite = any("--overwrite" in a.option_strings for a in run_parser._actions)
    for i, kind in enumerate(_kinds(rng, OUTPUT_KINDS, OUTPUT_CASES)):
        which = _pick(rng, ["distinct", "colliding", "prefix"] if kind.startswith("tables")
                      else ["distinct", "distinct", "colliding", "prefix"])
        root = tmp_path / f"o{i}"
        root.mkdir()
        plan = Path(shutil.copy(output_plans["plans"][which], root / "p.plan"))
        data = Path(shutil.copy(output_plans["data"][which], root / "records.csv"))
        L = _ledger(root)
        extra, what, out, overwrite = _output_case(rng, kind, root, plan, data, L, has_overwrite)
        case = f"{which} plan, {what}" + (", --tables" if extra else "") + (", --overwrite" if overwrite else "")
        ledger_names = {p.name for p in root.iterdir() if p.name.startswith("ledger.db")}
        before = _snapshot(root, ledger_names)
        argv = ["run", str(plan), "--data", str(data), "--out", str(out), "--ledger", str(L),
                "--dataset", "d", *extra] + (["--overwrite"] if overwrite else [])
        rc, err, exc = cli(argv)
        if not _outcome(f, case, rc, exc):
            continue
        after = _snapshot(root, ledger_names)
        out_rel = os.path.relpath(out, root)
        lost = [p for p, h in before.items() if after.get(p) != h
                and not (rc == 0 and overwrite and p == out_rel)]
        if lost:
            f.add("never a pre-existing file lost or changed", case,
                  f"exit {rc}; changed/lost {lost}; {err.strip()[:300]}")
        charges = _charges(L)
        if isinstance(charges, str):
            f.add("the ledger survives", case, charges)
            continue
        n_tables = output_plans["tables"][which]
        written_tables = sorted(t for t, h in after.items() if before.get(t) != h and t != out_rel
                                and t.startswith("tables" + os.sep) and t.endswith(".csv")) if extra else []
        if rc != 0:
            f.count("refused")
            if charges:
                f.add("nothing charged without a release", case, f"exit {rc}; ledger {charges}; {err.strip()[:300]}")
            continue
        f.count("released")
        if not (len(charges) == 1 and charges[0]["status"] == "released" and Path(out).is_file()):
            f.add("a release is charged once and its answers written", case, f"ledger {charges}")
        if extra and len(written_tables) != n_tables:
            f.add("every --tables table written (no name collision)", case,
                  f"{n_tables} tables, {len(written_tables)} files: {written_tables}")
        for written in ([out] if Path(out).suffix == ".csv" else []) + [root / t for t in written_tables]:
            unsafe = _unsafe_cells(Path(written))
            if unsafe:
                f.add("CSV cells safe to open (no = + - @ TAB CR lead)", case,
                      f"{Path(written).name}: {unsafe[:6]}")
    assert f.counts.get("released", 0) >= 1 and f.counts.get("refused", 0) >= 1, f.counts
    f.check()


# ---------------------------------------------------------------------------------------
# (d) the plan file changed during the run: read once, the verified bytes charged

PLAN_SWAPS = ["another genuine plan", "one byte flipped", "truncated", "removed"]


def _swap_when_opened(watch: FileWatch, name: str, swap: Callable[[], None], done: list[str]) -> None:
    """Wait (up to 20 s) for ``name`` to be opened, then ``swap`` at once."""
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if name in watch.names():
            swap()
            done.append("swapped")
            return
        time.sleep(0.0005)


@pytest.mark.parametrize("seed", SEEDS)
def test_plan_file_swapped_while_the_data_is_read(seed, tmp_path, cli, good_plan):
    """The plan file is replaced the moment the data is first opened (after the plan was read
    and verified, before the charge): the run opens the plan file once, and what it charges
    and records is the digest of the bytes it verified — or it refuses and charges nothing."""
    import shutil
    import threading

    f = Findings(f"plan file seed={seed}")
    rng = np.random.default_rng([seed, 4])
    other = _marginal_plan(_schema(GOOD_ATTRS).domain(), tmp_path / "other.plan")
    other_bytes = other.read_bytes()
    for i, how in enumerate(_kinds(rng, PLAN_SWAPS, len(PLAN_SWAPS))):
        case_dir, plan_dir, data_dir = tmp_path / f"w{i}", tmp_path / f"w{i}" / "plan", tmp_path / f"w{i}" / "data"
        for d in (case_dir, plan_dir, data_dir):
            d.mkdir()
        plan = Path(shutil.copy(good_plan, plan_dir / "p.plan"))
        original = plan.read_bytes()
        data = _write_csv(data_dir / "records.csv", ["sex", "age", "pay"], GOOD_ROWS)
        L = _ledger(case_dir)
        out = case_dir / "answers.csv"
        swapped = case_dir / "swapped.plan"
        if how == "another genuine plan":
            swapped.write_bytes(other_bytes)
        elif how == "one byte flipped":
            b = bytearray(original)
            b[int(rng.integers(8, len(b)))] ^= 0x01
            swapped.write_bytes(bytes(b))
        elif how == "truncated":
            swapped.write_bytes(original[: int(rng.integers(8, len(original)))])

        def swap(how: str = how, plan: Path = plan, swapped: Path = swapped) -> None:
            if how == "removed":
                plan.unlink()
            else:
                os.replace(swapped, plan)

        plan_watch, data_watch, done = FileWatch(plan_dir), FileWatch(data_dir), []
        try:
            t = threading.Thread(target=_swap_when_opened, args=(data_watch, data.name, swap, done))
            t.start()
            rc, err, exc = cli(["run", str(plan), "--data", str(data), "--out", str(out),
                                "--ledger", str(L), "--dataset", "d"])
            t.join()
            opens = sum(1 for mask, name in plan_watch.events() if name == plan.name and mask & FileWatch.IN_OPEN)
        finally:
            plan_watch.close()
            data_watch.close()
        case = f"plan {how} when the data is opened"
        if not _outcome(f, case, rc, exc):
            continue
        if not done:
            f.add("the swap happened (fuzzer)", case, "the data file was never opened")
            continue
        if opens != 1:
            f.add("the plan file is opened once", case, f"opened {opens} times; exit {rc}")
        charges = _charges(L)
        if isinstance(charges, str) or (rc != 0 and charges):
            f.add("nothing charged without a release", case, f"exit {rc}; ledger {charges}")
            continue
        if rc == 0:
            f.count("released")
            want = hashlib.sha256(original).hexdigest()
            meta = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("# plan_sha256:")]
            if charges[0]["plan_sha256"] != want or meta != [f"# plan_sha256: {json.dumps(want)}"]:
                f.add("the bytes verified are the bytes charged and recorded", case,
                      f"verified {want[:12]}…, ledger {charges[0]['plan_sha256'][:12]}…, answers {meta}")
        else:
            f.count("refused")
    f.check()


def test_findings_name_the_surface_and_the_smallest_case(tmp_path):
    """The report the fuzzers fail with (one line per invariant, its smallest case), and the
    two detectors the invariants rest on, on known inputs."""
    f = Findings("demo")
    f.add("inv", "a much longer case description", "x")
    f.add("inv", "short", "y")
    with pytest.raises(pytest.fail.Exception, match=r"\[demo\] inv: 2 case\(s\); smallest: short\n    -> y"):
        f.check()
    p = tmp_path / "a.csv"
    p.write_text('# note: "=x"\nlabel,estimate\n"=1+1",-3.5\n\'=2,1\n-3,2\n"\tx",0\n"@a",1\n', encoding="utf-8")
    assert _unsafe_cells(p) == ["=1+1", "\tx", "@a"]
    assert _count_leaks("of 1234 rows", {1234}, "") == ["1234"]
    assert _count_leaks("column 'x': 3 rows missing", {3}, "") == ["3"]
    assert _count_leaks("range 1000..1234", {1234}, "range 1000..1234") == []


@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_verify_and_inspect_open_the_plan_file_once(tmp_path, command):
    """``verify`` and ``inspect`` read the plan once (``plan.files.read_plan_bytes``): its kind
    and its contents come from the same bytes (``verify`` used to open it twice — a file
    replaced in between would be verified as one kind and read as another)."""
    from factorize.cli import main

    folder = tmp_path / "plans"
    folder.mkdir()
    plan = folder / "p.plan"
    assert main(["plan", "--workload", "prefix:8", "--privacy", "rho=0.5", "--out", str(plan)]) == 0
    watch = FileWatch(folder)
    try:
        watch.events()
        assert main([command, str(plan)]) == 0
        opens = sum(1 for mask, name in watch.events() if name == plan.name and mask & FileWatch.IN_OPEN)
    finally:
        watch.close()
    assert opens == 1
