"""The request of per-table precision targets (``plan.table_targets``), as ``factorize plan
--table-weights`` / ``--table-targets`` state it:

    NAME=W;NAME=W;…                      weights (``*=W``: every table not named; default 1)
    NAME=se:S;NAME=halfwidth:H;…         targets (``*=se:S`` for the rest; no default)

entries separated by ``;``, a NAME up to its entry's last ``=`` (trimmed), or in double quotes
(``""`` for ``"``) when it holds ``;`` or ``=``; every number finite and > 0.
"""

from __future__ import annotations

import math
from typing import Literal

from .errors import PlanError

__all__ = ["Request", "Kind", "REST", "parse_request"]

Request = Literal["weights", "targets"]
Kind = Literal["weight", "se", "halfwidth"]
#: ``*``: every table the request does not name.
REST = "*"


def _split_entries(text: str) -> list[tuple[str, str]]:
    """``NAME=VALUE;…`` into pairs; a quoted NAME may hold ``;`` and ``=``."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t;":
            i += 1
        if i >= n:
            break
        if text[i] == '"':
            buf, j = [], i + 1
            while True:
                if j >= n:
                    raise PlanError(f"unterminated quoted table name in {text!r}")
                if text[j] == '"':
                    if text[j + 1:j + 2] != '"':
                        break
                    j += 1
                buf.append(text[j])
                j += 1
            name, i = "".join(buf), j + 1
            while i < n and text[i] == " ":
                i += 1
            if i >= n or text[i] != "=":
                raise PlanError(f"expected '=' after the table name {name!r} in {text!r}")
            i += 1
        else:
            end = text.find(";", i)
            end = n if end < 0 else end
            entry = text[i:end]
            if "=" not in entry:
                raise PlanError(f"expected NAME=VALUE, got {entry.strip()!r} in {text!r}")
            cut = entry.rindex("=")
            name, i = entry[:cut].strip(), i + cut + 1
        end = text.find(";", i)
        end = n if end < 0 else end
        out.append((name, text[i:end].strip()))
        i = end + 1
    if not out:
        raise PlanError("the table request names no table")
    return out


def _positive(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise PlanError(f"{what}: expected a positive number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise PlanError(f"{what}: expected a finite positive number, got {text!r}")
    return v


def parse_request(text: str, request: Request) -> dict[str, tuple[Kind, float]]:
    """The request (module docstring) as ``{name: (kind, value)}``; ``*`` for the rest."""
    out: dict[str, tuple[Kind, float]] = {}
    for name, value in _split_entries(text):
        if not name:
            raise PlanError(f"an empty table name in {text!r}")
        if name in out:
            raise PlanError(f"table {name!r} is named twice in {text!r}")
        if request == "weights":
            out[name] = ("weight", _positive(value, f"the weight of table {name!r}"))
            continue
        kind, sep, number = value.partition(":")
        kind = kind.strip().lower()
        if not sep or kind not in ("se", "halfwidth"):
            raise PlanError(f"the target of table {name!r} is {value!r}; expected se:S (a standard "
                            "error) or halfwidth:H (a 95% half-width)")
        out[name] = ("se" if kind == "se" else "halfwidth",
                     _positive(number, f"the target of table {name!r}"))
    return out
