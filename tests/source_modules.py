"""The project's source modules by dotted name, read from the tree (the import-contract and
architecture-document tests both walk it)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=4)
def source_modules(packages: Sequence[str]) -> dict[str, Path]:
    """``{dotted name: file}`` for every ``.py`` under the given top-level packages
    (a package's ``__init__.py`` under the package's own name)."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out
