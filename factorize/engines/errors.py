"""Exception type of :mod:`factorize.engines`.

Records are private data. A :class:`DataError` message says *which* column (or file, or
array) is wrong, *what kind* of problem it has and *how many* rows are affected -- never
the offending values, nor the contents of any row.
"""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["DataError"]


class DataError(InputError):
    """Private input data (records, a data file, a histogram file) is invalid or unreadable.

    Messages never contain record values; they name columns and count offending rows.
    """
