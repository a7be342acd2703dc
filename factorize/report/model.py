"""The report document: sections of prose, tables and figures, rendered by ``report.render``.

Pure data: a :class:`Report` is a title, a list of :class:`Section` and ``numbers`` — every
figure the prose and tables quote, keyed by name, so tests can check the report against the
plan it describes without parsing HTML.
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
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    table: list[list[str]] | None = None  # first row = header
    figures: list[Figure] = field(default_factory=list)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section]
    numbers: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
