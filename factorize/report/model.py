"""The report document: sections of prose, tables and figures, rendered by ``report.render``.

Pure data: a :class:`Report` is a title, a list of :class:`Section` and ``numbers`` — every
figure the prose and tables quote, keyed by name, so tests can check the report against the
plan it describes without parsing HTML.

Besides its prose, table and figures, a section may hold :class:`Panel` s (one small figure
per table of a release, laid out in a grid and named by the table: ``data-table`` in HTML),
:class:`Page` s (a long table cut into collapsible pages, so every row is in the document
without a page of thousands of rows opening at once) and :class:`DataFile` s (tidy files
written beside the report and linked from it, for answers too many to inline).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    png: bytes
    alt: str
    name: str  # file stem when written next to a Markdown report


@dataclass
class Panel:
    """One small figure of one table: ``table`` is the table's name, ``caption`` a line under
    the figure (what it shows), ``name`` the file stem beside a Markdown report."""

    png: bytes
    alt: str
    name: str
    table: str
    caption: str


@dataclass
class Page:
    """One page of a long table: ``summary`` (what it holds, e.g. "age,sex: rows 1–500 of
    1,184") and its rows, the first one the header."""

    summary: str
    rows: list[list[str]]


@dataclass
class DataFile:
    """A tidy file written beside the report (``<report stem>_files/<name>``) by
    ``executor.output.write_answers``: ``columns`` and ``metadata`` as that function takes
    them; ``text`` is the link's text."""

    name: str
    text: str
    columns: dict[str, Any]
    metadata: dict[str, Any]


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    table: list[list[str]] | None = None  # first row = header
    figures: list[Figure] = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    files: list[DataFile] = field(default_factory=list)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section]
    numbers: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


#: Rows per page of a long table (:func:`paged`).
PAGE_ROWS = 500


def pages(rows: list[list[str]], what: str, size: int = PAGE_ROWS) -> list[Page]:
    """A table (header first) as pages of at most ``size`` rows, each with the header and a
    summary naming its rows of ``what`` ("age,sex: answers 501–1,000 of 1,184"; "…: all 170")."""
    header, body = rows[0], rows[1:]
    if len(body) <= size:
        return [Page(f"{what}: all {len(body):,}", rows)]
    return [Page(f"{what} {lo + 1:,}–{min(lo + size, len(body)):,} of {len(body):,}",
                 [header, *body[lo:lo + size]]) for lo in range(0, len(body), size)]


def paged(rows: list[list[str]], what: str, size: int = PAGE_ROWS) -> dict[str, Any]:
    """A table (header first) as :class:`Section` keyword arguments: ``table`` when it has at
    most ``size`` rows, else its :func:`pages`."""
    return {"table": rows} if len(rows) - 1 <= size else {"pages": pages(rows, what, size)}
