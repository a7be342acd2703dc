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

This module has one job: the schema model -- parse, validate and serialise schemas, give the
label of every code (:meth:`DomainSchema.labels`), check a column's type against an attribute
(:meth:`AttributeSchema.check_type`), and map raw values to codes in pure Python
(:meth:`AttributeSchema.encode`). The SQL that does the same mapping in the engines (DuckDB
and Spark dialects) is :mod:`factorize.engines.schema_sql`, tested against :meth:`~AttributeSchema.encode`
as its reference. The codes come from the schema only, never from the data.
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

from .domain import Domain, check_attribute_name, is_schema_document
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
    "read_domain",
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
BELOW, ABOVE = -4, -5  # internal (and schema_sql): outside an ordered attribute, below / above its range

#: Classes of column types the mapping reads (engines map their SQL types onto these).
TYPE_CLASSES = ("text", "integer", "float", "decimal", "boolean", "null")

#: The one character trimmed from both ends of a text value before it is matched or parsed:
#: U+0020 SPACE, and nothing else -- not a tab, a line break, a no-break space (U+00A0), a thin
#: space (U+2009), an ideographic space (U+3000) or any other Unicode space, which stay part of
#: the value (so ``"Female\u00a0"`` is not ``"Female"``). Written out in every dialect
#: (:func:`factorize.engines.schema_sql.trim_sql`), never left to an engine's default ``trim``: DuckDB's
#: strips Unicode spaces, Spark's only this one.
TRIMMED = " "

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


def _bound(obj: dict[str, Any], key: str, where: str) -> int:
    """``obj[key]`` (``"min"`` or ``"max"`` of an integer attribute): an integer of magnitude
    at most :data:`MAX_ABS_INTEGER`, else :class:`SchemaError`."""
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or abs(v) > MAX_ABS_INTEGER:
        raise SchemaError(f"{where}: \"{key}\" must be an integer of magnitude at most "
                          f"2**53, got {v!r} ({_DOC})")
    return v


def _number_text(x: int | float) -> str:
    """An edge or bound as written in labels: integers as such, floats by their shortest repr."""
    if _is_int(x):
        return str(x)
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _trim(text: str) -> str:
    """``text`` without the :data:`TRIMMED` characters (U+0020 only) at either end; no other
    change (no case folding, no Unicode normalisation)."""
    return text.strip(TRIMMED)


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


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

    def integer_range(self) -> tuple[int, int]:
        """``(min, max)`` of an integer attribute (both set whenever ``kind == "integer"``);
        :class:`SchemaError` for an attribute without them."""
        if self.low is None or self.high is None:
            raise SchemaError(f"attribute {self.name!r} ({self.kind}) has no integer range \"min\" .. \"max\"")
        return self.low, self.high

    def value_tuple(self) -> tuple[Any, ...]:
        """The listed values of a categorical attribute (set whenever ``kind == "categorical"``);
        :class:`SchemaError` for an attribute without them."""
        if self.values is None:
            raise SchemaError(f"attribute {self.name!r} ({self.kind}) has no listed \"values\"")
        return self.values

    # -- parsing ----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, obj: Any, where: str) -> AttributeSchema:  # noqa: C901 (counted allow-list)
        """Parse and validate one attribute object; ``where`` prefixes every message."""
        if not isinstance(obj, dict):
            raise SchemaError(f"{where} must be a JSON object with \"name\" and \"kind\" ({_DOC})")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"{where}: \"name\" must be a non-empty string ({_DOC})")
        check_attribute_name(name, SchemaError)
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
            lo, hi = _bound(obj, "min", where), _bound(obj, "max", where)
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
            lo, hi = self.integer_range()
            return hi - lo + 1
        return len(self.edges or ()) - 1

    @property
    def size(self) -> int:
        """The attribute's number of codes: its values, plus one for a catch-all."""
        return self.base_size + (1 if self.outside == "catch_all" else 0)

    def base_labels(self) -> list[str]:
        if self.kind == "categorical":
            return [value_text(v) for v in self.values or ()]
        if self.kind == "integer":
            lo, hi = self.integer_range()
            return [str(v) for v in range(lo, hi + 1)]
        e = [_number_text(x) for x in self.edges or ()]
        if self.closed == "left":
            return [f"[{a}, {b})" for a, b in zip(e, e[1:], strict=False)]
        return [f"({a}, {b}]" for a, b in zip(e, e[1:], strict=False)]

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
        rule: exactly what :func:`factorize.engines.schema_sql.code_sql` computes, in plain Python.

        Text (``docs/schema.md``, "How raw values are matched"): only U+0020 spaces are
        trimmed from either end (:data:`TRIMMED`); an empty result is missing. What remains
        is compared code point by code point -- no Unicode normalisation (an NFD ``"Café"``
        is not the NFC one), no case folding, no look-alikes -- except that booleans are
        ``true`` / ``false`` in any mix of ASCII case. Integers (:data:`INTEGER_TEXT`) and
        numbers (:data:`NUMBER_TEXT`) are written with ASCII digits only (no Arabic-Indic or
        fullwidth digits, no ``_``, ``inf`` or ``nan``); an integer of any length is read
        exactly (beyond int64 only its sign matters), a number is rounded to the nearest
        64-bit float (``"1e400"`` is ``inf``, ``"1e-400"`` is 0, ``"-0.0"`` is -0.0 = 0)."""
        self.check_type(type_class)
        return self._finish(self._raw(value, type_class))

    def _finish(self, r: int) -> int:
        # a raw status after the ``outside`` rule (also schema_sql's, so the SQL agrees)
        if r >= 0:
            return r
        if self.outside == "catch_all":
            return self.base_size
        if self.outside == "clamp" and r in (BELOW, ABOVE):
            return 0 if r == BELOW else self.base_size - 1
        return OUTSIDE if r in (BELOW, ABOVE) else r

    def _raw(self, value: Any, tc: str) -> int:
        if value is None or tc == "null":
            return MISSING
        if self.kind == "numeric":
            return self._bin(self._number(value, tc))
        if self.kind == "categorical" and self.value_type == "string":
            s = _trim(value if tc == "text" else value_text(value))
            if s == "":
                return MISSING
            try:
                return self.value_tuple().index(s)
            except ValueError:
                return OUTSIDE
        if self.kind == "categorical" and self.value_type == "boolean":
            if tc == "text":
                s = _trim(value)
                s = s.lower() if s.isascii() else s  # ASCII letters only change case
                if s == "":
                    return MISSING
                if s not in ("true", "false"):
                    return UNPARSED
                b = s == "true"
            else:
                b = bool(value)
            vals = self.value_tuple()
            return vals.index(b) if b in vals else OUTSIDE
        v = self._integer(value, tc)
        if isinstance(v, _Status):
            return int(v)
        if self.kind == "integer":
            lo, hi = self.integer_range()
            if v < lo:
                return BELOW
            if v > hi:
                return ABOVE
            return int(v) - lo
        vals = self.values or ()
        return vals.index(v) if v in vals else OUTSIDE

    @staticmethod
    def _integer(value: Any, tc: str) -> Any:
        if tc == "text":
            s = _trim(value)
            if s == "":
                return _Status(MISSING)
            if not _INTEGER_RE.fullmatch(s):
                return _Status(UNPARSED)
            head = s.split(".")[0]
            if len(head.lstrip("+-").lstrip("0")) > 19:
                # beyond int64 (and every bound, |bound| <= 2**53): only its sign matters, and
                # int() would refuse a text of more than 4300 digits
                return -(1 << 64) if head.startswith("-") else 1 << 64
            return int(head)
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
            s = _trim(value)
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
                return BELOW
            if d >= e[-1]:
                return ABOVE
            return bisect.bisect_right(e, d) - 1
        if d <= e[0]:
            return BELOW
        if d > e[-1]:
            return ABOVE
        return bisect.bisect_left(e, d) - 1

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
            if v == "" or v != _trim(v):
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
    if any(b <= a for a, b in zip(f, f[1:], strict=False)):
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
                  allow_draft: bool = False) -> DomainSchema:
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
    def from_json(cls, path: str | os.PathLike[str], *, allow_draft: bool = False) -> DomainSchema:
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

    def project(self, names: Iterable[str]) -> DomainSchema:
        """The schema of the named attributes, in the order given."""
        return DomainSchema([self[n] for n in names], description=self.description,
                            drafted_from_data=self.drafted_from_data)

    def domain(self) -> Any:
        """The :class:`~workloads.Domain` (names, sizes) carrying this schema."""
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


def load_schema(path: str | os.PathLike[str], *, allow_draft: bool = False) -> DomainSchema:
    """:meth:`DomainSchema.from_json`."""
    return DomainSchema.from_json(path, allow_draft=allow_draft)


def read_domain(path: str | os.PathLike[str]) -> Domain:
    """The :class:`~workloads.Domain` of a JSON file of either kind: a ``{name: size}`` object
    (:meth:`Domain.from_json`) or a domain schema (``docs/schema.md``), which gives the domain of
    its codes carrying the schema (:meth:`DomainSchema.domain`)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError):
        data = None  # Domain.from_json reports it, with its messages
    if is_schema_document(data):
        return DomainSchema.from_dict(data, source=f"domain schema {os.fspath(path)!r}").domain()
    return Domain.from_json(path)
