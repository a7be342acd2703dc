"""Checks shared by the histogram engines (internal)."""

from __future__ import annotations

from typing import Any

from workloads.domain import Domain

from .errors import DataError

__all__ = ["MAX_HISTOGRAM_CELLS", "check_domain", "format_problems", "rows"]

#: Largest domain (number of cells ``N``) the engines build a histogram for. Cell indices
#: then fit comfortably in a signed 64-bit integer; larger domains must be handled through
#: marginals (project the domain onto a few attributes).
MAX_HISTOGRAM_CELLS = 2**40


def rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def check_domain(domain: Any) -> Domain:
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    n_cells = domain.size
    if n_cells > MAX_HISTOGRAM_CELLS:
        raise DataError(
            f"the domain has N={n_cells} cells (> 2**40 = {MAX_HISTOGRAM_CELLS}); a dense histogram "
            f"of it cannot be built. Use marginals instead: histogram a projection onto a few "
            f"attributes, e.g. domain.project([...])"
        )
    return domain


def format_problems(
    names: list[str],
    sizes: list[int],
    counts: list[tuple[int, int, int]],
    n_rows: int,
) -> str | None:
    """Message for per-column counts ``(missing, non_integer, out_of_range)``, or None if all zero."""
    parts = []
    for name, size, (missing, nonint, oor) in zip(names, sizes, counts):
        kinds = []
        if missing:
            kinds.append(f"{rows(missing)} missing (NULL/empty/NaN)")
        if nonint:
            kinds.append(f"{rows(nonint)} not an integer")
        if oor:
            kinds.append(f"{rows(oor)} outside 0..{size - 1}")
        if kinds:
            parts.append(f"column {name!r}: " + ", ".join(kinds))
    if not parts:
        return None
    return (
        f"invalid values in {len(parts)} column(s) of {n_rows} rows (values are not shown, "
        f"records are private): " + "; ".join(parts)
    )
