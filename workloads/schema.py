"""Public domain schemas: each attribute's raw values, their codes and labels (``docs/schema.md``).

A :class:`DomainSchema` says, for every attribute of a domain, which raw values it takes and
which code ``0 .. size-1`` each one gets -- so the engines can read raw data (``"Female"``,
``37``, ``41250.5``) and the planner still sees a :class:`~workloads.Domain` of sizes. It is
read from a versioned JSON file::

    {"format": "factorize-domain-schema", "version": 1,
     "attributes": [
       {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
       {"name": "age", "kind": "integer", "min": 17, "max": 90, "outside": "clamp"},
       {"name": "income", "kind": "numeric", "edges": [0, 20000, 50000, 1e6], "closed": "left",
        "outside": "catch_all", "catch_all_label": "unknown"},
       {"name": "income>50K", "kind": "categorical", "values": [false, true]}]}

Attribute kinds (codes in this order):

* ``categorical``: an explicit list of ``values`` -- all strings, all integers or all
  booleans; value ``i`` has code ``i``.
* ``integer``: every integer ``min .. max``; value ``v`` has code ``v - min``.
* ``numeric``: bins between strictly increasing ``edges`` ``e_0 < … < e_m`` (``m`` codes),
  ``"closed": "left"`` (bins ``[e_i, e_{i+1})``) or ``"right"`` (``(e_i, e_{i+1}]``),
  stated explicitly; values are compared as 64-bit floats.

``outside`` says what happens to a value that is not in the schema: ``"refuse"`` (the
default: the engine refuses the data, counting such rows per column, never quoting them),
``"clamp"`` (``integer`` and ``numeric`` only: a value below the range gets the first code,
above it the last), or ``"catch_all"`` (one more code, last, labelled ``catch_all_label``,
default ``"other"``, that takes every value that is not in the schema: unlisted, out of
range, unparsable or missing).

**A schema must be public**: chosen from public knowledge (a codebook, a standard, the
question's possible answers), never by looking at the private data -- its values travel in
plans and answers unprotected, and a value seen only in the data (a rare country, an
outlier's bin) would reveal that someone with it is there. :func:`draft_schema_dict` (behind
``factorize schema draft``) drafts one *from* a data file for convenience; such a draft
carries a ``drafted_from_data`` field saying so, and is refused as a domain until a person has
reviewed every value and deleted that field.

This module has one job: parse, validate and serialise schemas, and give, per attribute, the
SQL (DuckDB or Spark) that maps a raw column to its code (:meth:`AttributeSchema.prepare_sql`,
:meth:`AttributeSchema.code_sql`), the same mapping in pure Python
(:meth:`AttributeSchema.encode`, the reference the SQL is tested against), and the label of
every code (:meth:`DomainSchema.labels`). The codes come from the schema only, never from
the data.
"""

from __future__ import annotations

import bisect
import decimal
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import DomainError

__all__ = [
    "AttributeSchema",
    "DomainSchema",
    "SCHEMA_FORMAT",
    "SCHEMA_VERSION",
    "SchemaError",
    "SchemaTypeError",
    "TYPE_CLASSES",
    "MISSING",
    "UNPARSED",
    "OUTSIDE",
    "is_schema_document",
    "load_schema",
]

SCHEMA_FORMAT = "factorize-domain-schema"
#: The schema versions this reader knows; a file of another version is refused.
SCHEMA_VERSION = 1
KINDS = ("categorical", "integer", "numeric")
OUTSIDE_RULES = ("refuse", "clamp", "catch_all")
DEFAULT_CATCH_ALL_LABEL = "other"
#: Limits (bounded SQL, exact float64 arithmetic on integer bounds and edges).
MAX_ATTRIBUTES = 4096
MAX_CATEGORIES = 1 << 16
MAX_EDGES = (1 << 16) + 1
MAX_INTEGER_RANGE = 1 << 31
MAX_ABS_INTEGER = 1 << 53
MAX_LABEL_CHARS = 1024

#: Negative results of the mapping (SQL and :meth:`AttributeSchema.encode`): a missing value
#: (NULL, empty text, float NaN), a value of the wrong form (text that is not an integer /
#: number / true-false, a non-integral number for an integer attribute), a value outside
#: the schema (unlisted, out of range). Codes are >= 0.
MISSING, UNPARSED, OUTSIDE = -1, -2, -3
_BELOW, _ABOVE = -4, -5  # internal: outside an ordered attribute, below / above its range

#: Classes of column types the mapping reads (engines map their SQL types onto these).
TYPE_CLASSES = ("text", "integer", "float", "decimal", "boolean", "null")

#: How an integer is written in text (after trimming spaces): the language of
#: ``engines.INTEGER_PATTERN`` (``"3.0"`` is 3; ``"1e3"``, ``"0x10"``, ``"1_000"`` are not
#: integers). Written without backslashes, so it is the same in DuckDB and Spark SQL.
INTEGER_TEXT = "[+-]?[0-9]+([.]0*)?"
#: How a number is written in text (after trimming spaces): decimal, optional exponent.
NUMBER_TEXT = "[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?"
_INTEGER_RE = re.compile(INTEGER_TEXT)
_NUMBER_RE = re.compile(NUMBER_TEXT)

_TOP_KEYS = ("format", "version", "description", "attributes", "drafted_from_data")
_COMMON_KEYS = ("name", "kind", "outside", "catch_all_label", "description")
_KIND_KEYS = {"categorical": ("values",), "integer": ("min", "max"), "numeric": ("edges", "closed")}
_DOC = "see docs/schema.md"


class SchemaError(DomainError):
    """A domain schema is invalid, of an unknown version, or a draft not yet reviewed."""


class SchemaTypeError(SchemaError):
    """A column's type cannot hold the raw values an attribute's schema describes."""


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return (_is_int(x) or isinstance(x, float)) and not isinstance(x, bool)


def _number_text(x: int | float) -> str:
    """An edge or bound as written in labels: integers as such, floats by their shortest repr."""
    if _is_int(x):
        return str(x)
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# -- SQL dialects -----------------------------------------------------------------------------


class _Dialect:
    """The few spellings where DuckDB and Spark SQL differ (everything else is shared)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def string(self, text: str) -> str:
        if self.name == "spark":  # Spark string literals use backslash escapes
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    def text(self, expr: str) -> str:
        return f"CAST({expr} AS {'STRING' if self.name == 'spark' else 'VARCHAR'})"

    def try_cast(self, expr: str, sql_type: str) -> str:
        return f"TRY_CAST({expr} AS {sql_type})"

    def full_match(self, expr: str, pattern: str) -> str:
        if self.name == "spark":  # no backslash in the pattern, no `$` (it matches before a final \n)
            return f"(regexp_extract({expr}, {self.string('^(' + pattern + ')')}, 1) = {expr})"
        return f"regexp_full_match({expr}, {self.string(pattern)})"

    def double(self, x: int | float) -> str:
        return f"CAST({self.string(repr(float(x)))} AS DOUBLE)"

    def non_integral(self, expr: str, type_class: str) -> str:
        if self.name == "spark":
            one = "CAST(1 AS DOUBLE)" if type_class == "float" else "1"
            return f"({expr} % {one} <> 0)"
        return f"({expr} <> trunc({expr}))"

    def is_inf(self, expr: str) -> str:
        if self.name == "spark":
            return f"(abs({expr}) = CAST('Infinity' AS DOUBLE))"
        return f"isinf({expr})"


_DIALECTS = {"duckdb": _Dialect("duckdb"), "spark": _Dialect("spark")}


def _dialect(name: str) -> _Dialect:
    try:
        return _DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown SQL dialect {name!r}; expected 'duckdb' or 'spark'") from None


# -- one attribute ----------------------------------------------------------------------------


class AttributeSchema:
    """One attribute of a schema (module docstring): its kind, raw values and rule for values
    outside them. Build with :meth:`from_dict`; immutable."""

    __slots__ = ("name", "kind", "values", "value_type", "low", "high", "edges", "closed",
                 "outside", "catch_all_label", "description", "_fedges")

    def __init__(self, name: str, kind: str, *, values: Sequence[Any] | None = None,
                 low: int | None = None, high: int | None = None,
                 edges: Sequence[int | float] | None = None, closed: str | None = None,
                 outside: str = "refuse", catch_all_label: str | None = None,
                 description: str | None = None) -> None:
        self.name = name
        self.kind = kind
        self.values = tuple(values) if values is not None else None
        self.value_type: str | None = None
        if self.values is not None:
            v0 = self.values[0]
            self.value_type = "boolean" if isinstance(v0, bool) else "integer" if _is_int(v0) else "string"
        self.low, self.high = low, high
        self.edges = tuple(edges) if edges is not None else None
        self._fedges = tuple(float(e) for e in self.edges) if self.edges is not None else None
        self.closed = closed
        self.outside = outside
        self.catch_all_label = catch_all_label if outside == "catch_all" else None
        self.description = description

    # -- parsing ----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, obj: Any, where: str) -> "AttributeSchema":
        """Parse and validate one attribute object; ``where`` prefixes every message."""
        if not isinstance(obj, dict):
            raise SchemaError(f"{where} must be a JSON object with \"name\" and \"kind\" ({_DOC})")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"{where}: \"name\" must be a non-empty string ({_DOC})")
        where = f"{where} ({name!r})"
        kind = obj.get("kind")
        if kind not in KINDS:
            raise SchemaError(f"{where}: \"kind\" must be one of {', '.join(map(repr, KINDS))}, "
                              f"got {kind!r} ({_DOC})")
        allowed = _COMMON_KEYS + _KIND_KEYS[kind]
        unknown = [k for k in obj if k not in allowed]
        if unknown:
            raise SchemaError(f"{where}: unknown field(s) {unknown} for a {kind} attribute; its fields "
                              f"are {', '.join(map(repr, allowed))} ({_DOC})")
        outside = obj.get("outside", "refuse")
        if outside not in OUTSIDE_RULES:
            raise SchemaError(f"{where}: \"outside\" must be one of "
                              f"{', '.join(map(repr, OUTSIDE_RULES))}, got {outside!r} ({_DOC})")
        if outside == "clamp" and kind == "categorical":
            raise SchemaError(f"{where}: \"outside\": \"clamp\" needs an ordered attribute (integer "
                              "or numeric); a categorical attribute takes \"refuse\" or \"catch_all\"")
        label = obj.get("catch_all_label")
        if label is not None and outside != "catch_all":
            raise SchemaError(f"{where}: \"catch_all_label\" is given but \"outside\" is not "
                              "\"catch_all\"; add \"outside\": \"catch_all\" or drop the label")
        if outside == "catch_all":
            label = DEFAULT_CATCH_ALL_LABEL if label is None else label
            if not isinstance(label, str) or not label or len(label) > MAX_LABEL_CHARS:
                raise SchemaError(f"{where}: \"catch_all_label\" must be a non-empty string of at most "
                                  f"{MAX_LABEL_CHARS} characters")
        desc = obj.get("description")
        if desc is not None and not isinstance(desc, str):
            raise SchemaError(f"{where}: \"description\" must be a string")
        kw: dict[str, Any] = {"outside": outside, "catch_all_label": label, "description": desc}
        if kind == "categorical":
            kw["values"] = _check_values(obj.get("values"), where)
        elif kind == "integer":
            lo, hi = obj.get("min"), obj.get("max")
            for key, v in (("min", lo), ("max", hi)):
                if not _is_int(v) or abs(v) > MAX_ABS_INTEGER:
                    raise SchemaError(f"{where}: \"{key}\" must be an integer of magnitude at most "
                                      f"2**53, got {v!r} ({_DOC})")
            if hi < lo:
                raise SchemaError(f"{where}: \"max\" ({hi}) is below \"min\" ({lo})")
            if hi - lo + 1 > MAX_INTEGER_RANGE:
                raise SchemaError(f"{where}: \"min\" .. \"max\" spans {hi - lo + 1} integers, more than "
                                  f"2**31; bin it as a numeric attribute with \"edges\" instead")
            kw["low"], kw["high"] = lo, hi
        else:
            kw["edges"] = _check_edges(obj.get("edges"), where)
            closed = obj.get("closed")
            if closed not in ("left", "right"):
                raise SchemaError(f"{where}: \"closed\" must be stated, \"left\" (bins [a, b)) or "
                                  f"\"right\" (bins (a, b]), got {closed!r} ({_DOC})")
            kw["closed"] = closed
        attr = cls(name, kind, **kw)
        if attr.catch_all_label is not None and attr.catch_all_label in attr.base_labels():
            raise SchemaError(f"{where}: \"catch_all_label\" {attr.catch_all_label!r} is also the label "
                              "of a value; choose another one")
        return attr

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON object of this attribute (every field explicit)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "categorical":
            out["values"] = list(self.values or ())
        elif self.kind == "integer":
            out["min"], out["max"] = self.low, self.high
        else:
            out["edges"] = list(self.edges or ())
            out["closed"] = self.closed
        out["outside"] = self.outside
        if self.catch_all_label is not None:
            out["catch_all_label"] = self.catch_all_label
        if self.description is not None:
            out["description"] = self.description
        return out

    # -- codes and labels -------------------------------------------------------------------
    @property
    def base_size(self) -> int:
        """The codes of the schema's own values (without the catch-all)."""
        if self.kind == "categorical":
            return len(self.values or ())
        if self.kind == "integer":
            return int(self.high) - int(self.low) + 1  # type: ignore[operator]
        return len(self.edges or ()) - 1

    @property
    def size(self) -> int:
        """The attribute's number of codes: its values, plus one for a catch-all."""
        return self.base_size + (1 if self.outside == "catch_all" else 0)

    def base_labels(self) -> list[str]:
        if self.kind == "categorical":
            return [_value_text(v) for v in self.values or ()]
        if self.kind == "integer":
            return [str(v) for v in range(int(self.low), int(self.high) + 1)]  # type: ignore[arg-type]
        e = [_number_text(x) for x in self.edges or ()]
        if self.closed == "left":
            return [f"[{a}, {b})" for a, b in zip(e, e[1:])]
        return [f"({a}, {b}]" for a, b in zip(e, e[1:])]

    def labels(self) -> list[str]:
        """The label of every code, in code order. With ``"clamp"`` the first and last codes
        also hold the values beyond the range, and their labels say so (``<=17``,
        ``(-inf, 10)``); a catch-all code is labelled ``catch_all_label``."""
        out = self.base_labels()
        if self.outside == "clamp":
            if self.kind == "integer":
                if len(out) == 1:
                    out = ["all integers"]
                else:
                    out[0], out[-1] = f"<={self.low}", f">={self.high}"
            else:
                e = [_number_text(x) for x in self.edges or ()]
                lo_b, hi_b = ("[", ")") if self.closed == "left" else ("(", "]")
                if len(out) == 1:
                    out = ["(-inf, inf)"]
                else:
                    out[0] = f"(-inf, {e[1]}{hi_b}"
                    out[-1] = f"{lo_b}{e[-2]}, inf)"
        if self.catch_all_label is not None:
            out.append(self.catch_all_label)
        return out

    def rule_text(self) -> str:
        """What the schema accepts, in words (for messages; public, from the schema alone)."""
        if self.kind == "categorical":
            n = len(self.values or ())
            return f"not among the schema's {n} value{'s' if n != 1 else ''}"
        if self.kind == "integer":
            return f"outside the schema's range {self.low}..{self.high}"
        e = self.edges or (0, 0)
        lo_b, hi_b = ("[", ")") if self.closed == "left" else ("(", "]")
        return f"outside the schema's bins {lo_b}{_number_text(e[0])}, {_number_text(e[-1])}{hi_b}"

    def unparsed_text(self) -> str:
        if self.kind == "numeric":
            return "not a number"
        if self.kind == "categorical" and self.value_type == "boolean":
            return "not true/false"
        return "not an integer"

    # -- column types -----------------------------------------------------------------------
    def check_type(self, type_class: str) -> None:
        """Refuse (:class:`SchemaTypeError`) a column type class that cannot hold this
        attribute's raw values; the message says what to do, the engine adds the column."""
        if type_class not in TYPE_CLASSES:
            raise SchemaTypeError(f"cannot hold the {self.kind} values of the schema (a column of "
                                  "text, integers, floats, decimals or booleans is needed)")
        if type_class == "null":
            return
        vt = self.value_type
        if self.kind == "categorical" and vt == "string" and type_class in ("float", "decimal"):
            raise SchemaTypeError("holds numbers but the schema lists text values for it; store the "
                                  "column as text, or list its values as integers in the schema")
        if self.kind == "categorical" and vt == "boolean" and type_class not in ("boolean", "text"):
            raise SchemaTypeError("cannot hold the true/false values the schema lists for it; store "
                                  "it as a boolean or text column, or list integer values [0, 1]")
        if self.kind == "numeric" and type_class == "boolean":
            raise SchemaTypeError("holds booleans but the schema bins numbers for it")

    # -- the mapping in Python (the reference) ------------------------------------------------
    def encode(self, value: Any, type_class: str) -> int:
        """The code of one raw ``value`` read from a column of ``type_class`` (``str`` or
        ``None`` for text, ``int``, ``float``, ``decimal.Decimal``, ``bool``), or
        :data:`MISSING` / :data:`UNPARSED` / :data:`OUTSIDE` after the schema's ``outside``
        rule: exactly what :meth:`code_sql` computes, in plain Python."""
        self.check_type(type_class)
        return self._finish(self._raw(value, type_class))

    def _finish(self, r: int) -> int:
        if r >= 0:
            return r
        if self.outside == "catch_all":
            return self.base_size
        if self.outside == "clamp" and r in (_BELOW, _ABOVE):
            return 0 if r == _BELOW else self.base_size - 1
        return OUTSIDE if r in (_BELOW, _ABOVE) else r

    def _raw(self, value: Any, tc: str) -> int:
        if value is None or tc == "null":
            return MISSING
        if self.kind == "numeric":
            return self._bin(self._number(value, tc))
        if self.kind == "categorical" and self.value_type == "string":
            s = value if tc == "text" else _value_text(value)
            s = s.strip(" ")
            if s == "":
                return MISSING
            try:
                return self.values.index(s)  # type: ignore[union-attr]
            except ValueError:
                return OUTSIDE
        if self.kind == "categorical" and self.value_type == "boolean":
            if tc == "text":
                s = value.strip(" ").lower()
                if s == "":
                    return MISSING
                if s not in ("true", "false"):
                    return UNPARSED
                b = s == "true"
            else:
                b = bool(value)
            return self.values.index(b) if b in self.values else OUTSIDE  # type: ignore[operator,union-attr]
        v = self._integer(value, tc)
        if isinstance(v, _Status):
            return int(v)
        if self.kind == "integer":
            if v < self.low:  # type: ignore[operator]
                return _BELOW
            if v > self.high:  # type: ignore[operator]
                return _ABOVE
            return int(v) - int(self.low)  # type: ignore[arg-type]
        vals = self.values or ()
        return vals.index(v) if v in vals else OUTSIDE

    @staticmethod
    def _integer(value: Any, tc: str) -> Any:
        if tc == "text":
            s = value.strip(" ")
            if s == "":
                return _Status(MISSING)
            if not _INTEGER_RE.fullmatch(s):
                return _Status(UNPARSED)
            return int(s.split(".")[0])
        if tc == "float":
            f = float(value)
            if math.isnan(f):
                return _Status(MISSING)
            if math.isinf(f) or f != math.trunc(f):
                return _Status(UNPARSED)
            return int(f)
        if tc == "decimal":
            d = decimal.Decimal(value)
            if d.is_nan():
                return _Status(MISSING)
            if d != d.to_integral_value():
                return _Status(UNPARSED)
            return int(d)
        return int(value)  # integer, boolean

    @staticmethod
    def _number(value: Any, tc: str) -> Any:
        if tc == "text":
            s = value.strip(" ")
            if s == "":
                return _Status(MISSING)
            if not _NUMBER_RE.fullmatch(s):
                return _Status(UNPARSED)
            return float(s)
        f = float(value)
        if math.isnan(f):
            return _Status(MISSING)
        return f

    def _bin(self, d: Any) -> int:
        if isinstance(d, _Status):
            return int(d)
        e = self._fedges or ()
        if self.closed == "left":
            if d < e[0]:
                return _BELOW
            if d >= e[-1]:
                return _ABOVE
            return bisect.bisect_right(e, d) - 1
        if d <= e[0]:
            return _BELOW
        if d > e[-1]:
            return _ABOVE
        return bisect.bisect_left(e, d) - 1

    # -- the mapping in SQL -----------------------------------------------------------------
    def prepare_sql(self, column: str, type_class: str, dialect: str = "duckdb") -> list[str]:
        """Stage-1 SQL expressions over the raw ``column`` (an SQL column reference), computed
        once per row; :meth:`code_sql` reads them (by the names the engine gives them)."""
        self.check_type(type_class)
        d = _dialect(dialect)
        if type_class == "null":
            return ["NULL"]
        if type_class == "text":
            trimmed = f"trim({column})"
            if self.kind == "categorical" and self.value_type == "boolean":
                return [f"lower({trimmed})"]
            if self.kind == "numeric":
                return [trimmed, d.try_cast(trimmed, "DOUBLE")]
            if self.kind == "integer" or self.value_type == "integer":
                # the raw text and its BIGINT cast: the fast path (text = the cast's canonical
                # spelling) skips the trim and the pattern (code_sql)
                return [column, d.try_cast(column, "BIGINT")]
            return [column]  # untrimmed: an exact match is the fast path (code_sql)
        if self.kind == "categorical" and self.value_type == "string":
            return [d.text(column)]  # integers and booleans are spelled without spaces
        if self.kind == "numeric" and type_class in ("integer", "decimal"):
            return [f"CAST({column} AS DOUBLE)"]
        if type_class == "boolean" and self.kind != "categorical":
            return [f"CAST({column} AS BIGINT)"]
        if type_class == "boolean" and self.value_type == "integer":
            return [f"CAST({column} AS BIGINT)"]
        return [column]

    def code_sql(self, prepared: Sequence[str], type_class: str, dialect: str = "duckdb", *,
                 refused_as_null: bool = False) -> str:
        """The SQL expression (BIGINT) of the code of a row, over the stage-1 columns
        ``prepared`` (references to :meth:`prepare_sql`'s expressions, in order): the code
        ``>= 0``, or :data:`MISSING` / :data:`UNPARSED` / :data:`OUTSIDE` after the
        ``outside`` rule -- or, with ``refused_as_null``, NULL for every value the schema
        refuses (whatever the reason). Every expression is total (no cast or arithmetic can
        fail on any value). Equal to :meth:`encode` on every value (tested on random data)."""
        self.check_type(type_class)
        d = _dialect(dialect)

        def fin(status: int) -> Any:
            r = self._finish(status)
            return "NULL" if refused_as_null and r < 0 else r

        miss, unp = fin(MISSING), fin(UNPARSED)
        below, above, out = fin(_BELOW), fin(_ABOVE), fin(OUTSIDE)
        p = prepared[0]
        if type_class == "null":
            return f"CAST({miss} AS BIGINT)"
        tc = type_class
        if self.kind == "numeric":
            if tc == "text":
                num = prepared[1]
                sign = f"(CASE WHEN {p} LIKE '-%' THEN {below} ELSE {above} END)"  # an overflow
                return (f"CAST(CASE WHEN {p} IS NULL OR {p} = '' THEN {miss} "
                        f"WHEN NOT {d.full_match(p, NUMBER_TEXT)} THEN {unp} "
                        f"ELSE {self._bins_sql(num, d, below, above, sign)} END AS BIGINT)")
            nan = (f"isnan({p})", miss) if tc == "float" else None
            return f"CAST({self._bins_sql(p, d, below, above, str(miss), nan)} AS BIGINT)"
        if self.kind == "categorical" and self.value_type == "string":
            # values have no surrounding spaces: an exact match of the raw text equals the match
            # of its trimmed text, so only the rows that miss are trimmed and matched again
            t = f"trim({p})"
            if d.name == "duckdb":  # an ENUM cast: one hash lookup per value
                enum = "ENUM(" + ", ".join(d.string(str(v)) for v in self.values or ()) + ")"
                return (f"CAST(coalesce(enum_code(TRY_CAST({p} AS {enum})), CASE WHEN {p} IS NULL "
                        f"OR {t} = '' THEN {miss} ELSE coalesce(enum_code(TRY_CAST({t} AS {enum})), {out}) "
                        "END) AS BIGINT)")
            whens = " ".join(f"WHEN {d.string(str(v))} THEN {i}" for i, v in enumerate(self.values or ()))
            return (f"CAST(CASE {p} {whens} ELSE (CASE WHEN {p} IS NULL OR {t} = '' THEN {miss} "
                    f"ELSE (CASE {t} {whens} ELSE {out} END) END) END AS BIGINT)")
        if self.kind == "categorical" and self.value_type == "boolean":
            whens = " ".join(f"WHEN {_value_text(v)} THEN {i}" for i, v in enumerate(self.values or ()))
            if tc == "text":
                whens = " ".join(f"WHEN {d.string(_value_text(v))} THEN {i}"
                                 for i, v in enumerate(self.values or ()))
                return (f"CAST(CASE WHEN {p} IS NULL OR {p} = '' THEN {miss} "
                        f"WHEN {p} NOT IN ('true', 'false') THEN {unp} "
                        f"ELSE (CASE {p} {whens} ELSE {out} END) END AS BIGINT)")
            if self.values == (False, True):
                return f"coalesce(CAST({p} AS BIGINT), {miss})"
            if self.values == (True, False):
                return f"coalesce(1 - CAST({p} AS BIGINT), {miss})"
            return f"CAST(CASE WHEN {p} IS NULL THEN {miss} ELSE (CASE {p} {whens} ELSE {out} END) END AS BIGINT)"
        # integer kinds: integer attribute, or categorical with integer values
        if self.kind == "integer":
            lo, hi = int(self.low), int(self.high)  # type: ignore[arg-type]
        else:
            lo, hi = min(self.values or (0,)), max(self.values or (0,))

        def mapped(v: str) -> str:  # v: a BIGINT expression in lo..hi
            if self.kind == "integer":
                return f"({v} - {lo})" if lo else v
            whens = " ".join(f"WHEN {x} THEN {i}" for i, x in enumerate(self.values or ()))
            return f"(CASE {v} {whens} ELSE {out} END)"

        if self.kind == "integer":
            low_r, high_r = below, above
        else:
            low_r = high_r = out
        if tc == "text":
            # fast path: the text is the canonical spelling of its BIGINT cast ("40", "-3");
            # else (spaces, "+40", "040", "40.0", or not an integer at all) trim and match the
            # integer pattern, then take the digits before the point
            fast = prepared[1]
            t = f"trim({p})"
            v = d.try_cast(f"split_part({t}, '.', 1)", "BIGINT")
            ranged = (f"CASE WHEN {{v}} < {lo} THEN {low_r} WHEN {{v}} > {hi} THEN {high_r} "
                      f"ELSE {{m}} END")
            return (f"CAST(CASE WHEN {fast} IS NOT NULL AND {d.text(fast)} = {p} THEN "
                    + ranged.format(v=fast, m=mapped(fast)) +
                    f" WHEN {p} IS NULL OR {t} = '' THEN {miss} "
                    f"WHEN NOT {d.full_match(t, INTEGER_TEXT)} THEN {unp} "
                    f"WHEN {v} IS NULL THEN (CASE WHEN {t} LIKE '-%' THEN {low_r} ELSE {high_r} END) "
                    f"ELSE {ranged.format(v=v, m=mapped(v))} END AS BIGINT)")
        if tc in ("float", "decimal"):
            nan = f" OR isnan({p})" if tc == "float" else ""
            inf = f"{d.is_inf(p)} OR " if tc == "float" else ""
            lo_s = d.double(lo) if tc == "float" else str(lo)
            hi_s = d.double(hi) if tc == "float" else str(hi)
            return (f"CAST(CASE WHEN {p} IS NULL{nan} THEN {miss} "
                    f"WHEN {inf}{d.non_integral(p, tc)} THEN {unp} "
                    f"WHEN {p} < {lo_s} THEN {low_r} WHEN {p} > {hi_s} THEN {high_r} "
                    f"ELSE {mapped(f'CAST({p} AS BIGINT)')} END AS BIGINT)")
        # integer (any width) or boolean cast to BIGINT
        if self.kind == "integer" and self.outside == "clamp":
            # (least / greatest skip NULLs in DuckDB and Spark: test for NULL first)
            return f"CASE WHEN {p} IS NULL THEN {miss} ELSE CAST(least(greatest({p}, {lo}), {hi}) AS BIGINT) - {lo} END"
        return (f"CAST(CASE WHEN {p} BETWEEN {lo} AND {hi} THEN {mapped(f'CAST({p} AS BIGINT)')} "
                f"WHEN {p} IS NULL THEN {miss} WHEN {p} < {lo} THEN {low_r} ELSE {high_r} END AS BIGINT)")

    def quick_code_sql(self, prepared: Sequence[str], type_class: str, *, trim: bool = True) -> str:
        """DuckDB only: the code of a row as an unsigned integer whose range ``0 .. size-1``
        DuckDB's planner can derive, or NULL; over the stage-1 columns ``prepared`` (as for
        :meth:`code_sql`).

        NULL stands for a value the schema refuses (whatever the reason) and, for a text
        column of a categorical attribute that refuses unlisted values, for text that does not
        match a value exactly -- only after trimming its spaces (not tried when ``trim`` is
        false). Wherever the result is not NULL, it is :meth:`code_sql`'s code (tested on
        random data). The engine groups the rows by these codes and, only when some result is
        NULL, maps the data again with :meth:`code_sql`, which tells the reasons apart (to
        count them) and trims.

        Why: DuckDB groups integer columns with its perfect-hash aggregate (an array indexed
        by the codes, no hashing or probing) when it knows each column's minimum and maximum
        and their bits add up to at most ``perfect_ht_threshold`` -- which is how it groups
        integer codes read from Parquet. The negative statuses of :meth:`code_sql` widen every
        range by up to three values (a bit more per column), and a NULL branch in a CASE or a
        function such as ``enum_code`` hides the range altogether, so those codes are grouped
        in a hash table, several times slower. Here a refused value is NULL (the aggregate
        reserves a slot for NULL anyway), and the code goes through ``% size`` on an unsigned
        type: the identity on ``0 .. size-1`` (NULL stays NULL), of a range DuckDB derives."""
        self.check_type(type_class)
        size = self.size
        unsigned = "UTINYINT" if size <= 1 << 8 else "USMALLINT" if size <= 1 << 16 else "UINTEGER"
        p = prepared[0]
        if (type_class == "text" and self.kind == "categorical" and self.value_type == "string"
                and self.outside == "refuse"):
            # enum_code is UTINYINT / USMALLINT (2**16 values at most): no cast needed
            enum = "ENUM(" + ", ".join(_DIALECTS["duckdb"].string(str(v)) for v in self.values or ()) + ")"
            code = f"enum_code(TRY_CAST({p} AS {enum}))"
            if trim:
                code = f"coalesce({code}, enum_code(TRY_CAST(trim({p}) AS {enum})))"
            return f"({code} % {size})"
        if (type_class == "boolean" and self.kind == "categorical"
                and self.values in ((False, True), (True, False))):
            b = p if self.values == (False, True) else f"(NOT {p})"
            return f"(CAST({b} AS UTINYINT) % 2)"
        code = None
        if self.kind == "numeric" and type_class in ("float", "integer", "decimal"):
            code = self._step_bins_sql(p, type_class)  # p is a DOUBLE (prepare_sql)
        if code is None:
            code = self.code_sql(prepared, type_class, "duckdb", refused_as_null=True)
        return f"(CAST({code} AS {unsigned}) % {size})"

    def _step_bins_sql(self, x: str, type_class: str) -> str | None:
        """DuckDB: the bin of the DOUBLE ``x`` by integer arithmetic instead of a search, when
        the edges allow it -- all integers, and the inner edges ``e_1 … e_{m-1}`` equally
        spaced (step ``g``; the first and last bins may be wider or narrower): round bins such
        as ages by 5 years or incomes by 2500 with an open-ended top bin. None otherwise
        (:meth:`_bins_sql` then searches). A refused value is NULL (``code_sql`` with
        ``refused_as_null``).

        With integer edges, ``e_i <= x`` iff ``e_i <= floor(x)`` (bins closed on the left), and
        ``e_i < x`` iff ``e_i <= ceil(x) - 1`` (on the right), so the bin of ``x`` is the bin of
        the integer ``f`` = ``floor(x)`` (``ceil(x) - 1``), computed exactly in BIGINT: for ``x``
        in the range, ``|f| < 2**53`` and ``floor`` / ``ceil`` of a double are exact. With
        ``b = e_1 - g``: bin = ``min((max(f, b) - b) // g, m - 1)`` (``max`` needed only when the
        first bin is wider than ``g``, ``min`` only when the last one is). Values outside the
        range, NaN and NULL are handled first, by comparisons, as in :meth:`_bins_sql`. One
        pass of a few vectorised operations per row, where the search runs
        ``⌈log₂(m + 2)⌉`` nested CASE levels (about twice as slow in DuckDB)."""
        e = self.edges or ()
        if not all(float(v).is_integer() and abs(v) <= MAX_ABS_INTEGER for v in e):
            return None
        ints = [int(v) for v in e]
        m = len(ints) - 1
        g = ints[2] - ints[1] if m >= 3 else ints[1] - ints[0]
        if any(ints[i + 1] - ints[i] != g for i in range(1, m - 1)):
            return None
        d = _DIALECTS["duckdb"]
        fin = self._finish
        miss, below, above = (fin(s) for s in (MISSING, _BELOW, _ABOVE))
        miss, below, above = (str(v) if v >= 0 else "NULL" for v in (miss, below, above))
        lo, hi = d.double(ints[0]), d.double(ints[-1])
        if self.closed == "left":
            inside, under, over = f"{x} >= {lo} AND {x} < {hi}", f"{x} < {lo}", f"{x} >= {hi}"
            f = f"TRY_CAST(floor({x}) AS BIGINT)"
        else:
            inside, under, over = f"{x} > {lo} AND {x} <= {hi}", f"{x} <= {lo}", f"{x} > {hi}"
            f = f"(TRY_CAST(ceil({x}) AS BIGINT) - 1)"
        base = ints[1] - g
        if base > ints[0]:
            f = f"greatest({f}, ({base}))"
        k = f"({f} - ({base})) // {g}" if base else f"{f} // {g}"
        if ints[-1] - ints[-2] > g:
            k = f"least({k}, {m - 1})"
        nan = f"WHEN isnan({x}) THEN {miss} " if type_class == "float" else ""
        return (f"CASE WHEN {inside} THEN {k} WHEN {under} THEN {below} {nan}"
                f"WHEN {over} THEN {above} ELSE {miss} END")

    def _bins_sql(self, x: str, d: _Dialect, below: int | str, above: int | str, null: str,
                  nan: tuple[str, int | str] | None = None) -> str:
        """The bin of the DOUBLE ``x`` by one binary search (nested CASE, depth
        ⌈log₂(m + 2)⌉) over the thresholds e_0 … e_m: ``k`` thresholds passed (``x >= e_i`` for
        bins closed on the left, ``x > e_i`` on the right) means below the range (k = 0), bin
        k − 1, or above it (k = m + 1). A NULL ``x`` fails every comparison and reaches the
        lowest leaf, which returns ``null``; a NaN passes every one (NaN is the largest double
        in DuckDB and Spark) and reaches the highest, where ``nan = (test, result)`` applies."""
        e = self.edges or ()
        ge = ">=" if self.closed == "left" else ">"
        m = len(e) - 1

        def leaf(k: int) -> str:
            if k == 0:
                return f"(CASE WHEN {x} IS NULL THEN {null} ELSE {below} END)"
            if k == m + 1:
                return f"(CASE WHEN {nan[0]} THEN {nan[1]} ELSE {above} END)" if nan is not None else str(above)
            return str(k - 1)

        def rec(lo: int, hi: int) -> str:  # outcomes lo..hi; thresholds e[lo..hi-1] decide
            if lo == hi:
                return leaf(lo)
            mid = (lo + hi + 1) // 2  # outcome >= mid  <=>  x ge e[mid - 1]
            return f"CASE WHEN {x} {ge} {d.double(e[mid - 1])} THEN {rec(mid, hi)} ELSE {rec(lo, mid - 1)} END"

        return rec(0, m + 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttributeSchema):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __repr__(self) -> str:
        return f"AttributeSchema({self.name!r}, {self.kind}, size={self.size})"


class _Status(int):
    """A negative mapping status travelling where a value is expected (internal)."""


def _check_values(values: Any, where: str) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise SchemaError(f"{where}: \"values\" must be a non-empty list of strings, integers or "
                          f"booleans ({_DOC})")
    if len(values) > MAX_CATEGORIES:
        raise SchemaError(f"{where}: \"values\" lists {len(values)} values, more than 2**16; "
                          "group them, or use an integer or numeric attribute")
    kinds = {"boolean" if isinstance(v, bool) else "integer" if _is_int(v) else
             "string" if isinstance(v, str) else "other" for v in values}
    if "other" in kinds:
        raise SchemaError(f"{where}: \"values\" may hold strings, integers or booleans only (no "
                          f"floats, null, lists or objects; bin numbers with a numeric attribute)")
    if len(kinds) > 1:
        raise SchemaError(f"{where}: \"values\" mixes {' and '.join(sorted(kinds))}; list values of "
                          "one type (write numbers as strings to mix them with text)")
    kind = kinds.pop()
    if kind == "string":
        for v in values:
            if v == "" or v != v.strip(" "):
                raise SchemaError(f"{where}: a value is empty or has leading/trailing spaces; spaces "
                                  "around raw values are trimmed before matching and an empty field "
                                  "is a missing value, so list values without them")
            if len(v) > MAX_LABEL_CHARS:
                raise SchemaError(f"{where}: a value is longer than {MAX_LABEL_CHARS} characters")
    if kind == "integer" and any(abs(v) > MAX_ABS_INTEGER for v in values):
        raise SchemaError(f"{where}: integer values must have magnitude at most 2**53")
    if len(set(values)) != len(values):
        raise SchemaError(f"{where}: \"values\" lists a value more than once")
    return list(values)


def _check_edges(edges: Any, where: str) -> list[int | float]:
    if not isinstance(edges, list) or len(edges) < 2:
        raise SchemaError(f"{where}: \"edges\" must be a list of at least two numbers e_0 < e_1 < … "
                          f"(m + 1 edges make m bins) ({_DOC})")
    if len(edges) > MAX_EDGES:
        raise SchemaError(f"{where}: \"edges\" lists {len(edges)} edges, more than 2**16 + 1")
    for e in edges:
        if not _is_number(e) or not math.isfinite(float(e)):
            raise SchemaError(f"{where}: every edge must be a finite number (to take values beyond "
                              "the first or last edge, use \"outside\": \"clamp\" or \"catch_all\")")
        if _is_int(e) and abs(e) > MAX_ABS_INTEGER:
            raise SchemaError(f"{where}: integer edges must have magnitude at most 2**53 (exact as "
                              "64-bit floats)")
    f = [float(e) for e in edges]
    if any(b <= a for a, b in zip(f, f[1:])):
        raise SchemaError(f"{where}: \"edges\" must be strictly increasing (as 64-bit floats)")
    return list(edges)


# -- the whole schema -------------------------------------------------------------------------


class DomainSchema:
    """A versioned domain schema (module docstring): attributes in order, each with its raw
    values, codes and labels. :meth:`domain` gives the :class:`~workloads.Domain` the planner
    uses (same names, sizes = number of codes) carrying this schema."""

    __slots__ = ("attributes", "description", "drafted_from_data", "_index")

    def __init__(self, attributes: Sequence[AttributeSchema], *, description: str | None = None,
                 drafted_from_data: dict[str, Any] | None = None) -> None:
        attrs = tuple(attributes)
        if not attrs:
            raise SchemaError("a domain schema needs at least one attribute")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise SchemaError(f"the domain schema names attribute(s) {dup} more than once")
        self.attributes = attrs
        self.description = description
        self.drafted_from_data = drafted_from_data
        self._index = {n: i for i, n in enumerate(names)}

    # -- reading and writing ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, obj: Any, *, source: str = "domain schema",
                  allow_draft: bool = False) -> "DomainSchema":
        """Parse and validate a schema document. ``source`` names it in messages. A draft
        (``drafted_from_data`` present) is refused unless ``allow_draft``."""
        if not isinstance(obj, dict):
            raise SchemaError(f"{source} must be a JSON object ({_DOC})")
        if obj.get("format") != SCHEMA_FORMAT:
            raise SchemaError(f"{source}: \"format\" must be {SCHEMA_FORMAT!r}, got "
                              f"{obj.get('format')!r} ({_DOC})")
        version = obj.get("version")
        if version != SCHEMA_VERSION or not _is_int(version):
            raise SchemaError(f"{source}: domain schema version {version!r} is not supported; this "
                              f"factorize reads version {SCHEMA_VERSION} ({_DOC})")
        unknown = [k for k in obj if k not in _TOP_KEYS]
        if unknown:
            raise SchemaError(f"{source}: unknown field(s) {unknown}; a version-{SCHEMA_VERSION} "
                              f"schema has {', '.join(map(repr, _TOP_KEYS))} ({_DOC})")
        desc = obj.get("description")
        if desc is not None and not isinstance(desc, str):
            raise SchemaError(f"{source}: \"description\" must be a string")
        draft = obj.get("drafted_from_data")
        if draft is not None:
            if not isinstance(draft, dict):
                raise SchemaError(f"{source}: \"drafted_from_data\" must be an object")
            if not allow_draft:
                what = draft.get("file") if isinstance(draft.get("file"), str) else "a data file"
                raise SchemaError(
                    f"{source} was drafted from the data file {what!r} (it has a "
                    "\"drafted_from_data\" field): its values and bins were read from that file "
                    "and are NOT protected by differential privacy. Review every value, replacing "
                    "anything known only from the data with public knowledge (a codebook, a "
                    "standard), then delete the \"drafted_from_data\" field to use it as --domain "
                    f"({_DOC})")
        attrs = obj.get("attributes")
        if not isinstance(attrs, list) or not attrs:
            raise SchemaError(f"{source}: \"attributes\" must be a non-empty list of attribute "
                              f"objects ({_DOC})")
        if len(attrs) > MAX_ATTRIBUTES:
            raise SchemaError(f"{source}: more than {MAX_ATTRIBUTES} attributes")
        parsed = [AttributeSchema.from_dict(a, f"{source}: attribute {i}") for i, a in enumerate(attrs)]
        try:
            return cls(parsed, description=desc, drafted_from_data=draft)
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None

    @classmethod
    def from_json(cls, path: str | os.PathLike[str], *, allow_draft: bool = False) -> "DomainSchema":
        """Read a schema file (strict JSON, no repeated keys)."""
        source = f"domain schema {os.fspath(path)!r}"
        return cls.from_dict(_read_json(path, source), source=source, allow_draft=allow_draft)

    def to_dict(self) -> dict[str, Any]:
        """The canonical document (what :meth:`from_dict` reads back to an equal schema)."""
        out: dict[str, Any] = {"format": SCHEMA_FORMAT, "version": SCHEMA_VERSION}
        if self.description is not None:
            out["description"] = self.description
        if self.drafted_from_data is not None:
            out["drafted_from_data"] = dict(self.drafted_from_data)
        out["attributes"] = [a.to_dict() for a in self.attributes]
        return out

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """The document as indented JSON text; written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    def digest(self) -> str:
        """SHA-256 of the canonical JSON (names the exact mapping, e.g. in answers' metadata)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()

    # -- views ------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def __getitem__(self, name: str) -> AttributeSchema:
        try:
            return self.attributes[self._index[name]]
        except KeyError:
            raise SchemaError(f"unknown attribute {name!r}; the schema has {list(self.names)}") from None

    def labels(self, attribute: str) -> list[str]:
        """The label of every code of ``attribute``, in code order."""
        return self[attribute].labels()

    def project(self, names: Iterable[str]) -> "DomainSchema":
        """The schema of the named attributes, in the order given."""
        return DomainSchema([self[n] for n in names], description=self.description,
                            drafted_from_data=self.drafted_from_data)

    def domain(self) -> Any:
        """The :class:`~workloads.Domain` (names, sizes) carrying this schema."""
        from .domain import Domain

        return Domain(self.names, self.sizes, schema=self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DomainSchema):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.digest())

    def __repr__(self) -> str:
        inner = ", ".join(f"{a.name!r}: {a.kind} {a.size}" for a in self.attributes)
        return f"DomainSchema({{{inner}}})"


def _read_json(path: str | os.PathLike[str], source: str) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise SchemaError(f"{source} repeats a key in one object")
        return dict(pairs)

    def no_constants(name: str) -> Any:
        raise SchemaError(f"{source}: {name} is not valid JSON (edges must be finite numbers)")

    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except OSError as exc:
        raise SchemaError(f"cannot read {source}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{source} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise SchemaError(f"{source} is nested too deeply") from None


def is_schema_document(obj: Any) -> bool:
    """Whether a parsed JSON document claims to be a domain schema (a text ``format`` or an
    ``attributes`` list) rather than a ``{name: size}`` object (whose values are integers, so
    attributes named "format" or "version" stay sizes)."""
    return isinstance(obj, dict) and (isinstance(obj.get("format"), str)
                                      or isinstance(obj.get("attributes"), list))


def load_schema(path: str | os.PathLike[str], *, allow_draft: bool = False) -> DomainSchema:
    """:meth:`DomainSchema.from_json`."""
    return DomainSchema.from_json(path, allow_draft=allow_draft)

