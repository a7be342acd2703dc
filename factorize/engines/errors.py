"""Exception type of :mod:`factorize.engines`.

Records are private data. A :class:`DataError` message says *which* column (or file, or
array) is wrong and *what kind* of problem it has -- never the offending values, the
contents of any row, nor any number derived from the records (how many rows are invalid,
how many records there are, on which line a CSV file is malformed). Whoever writes a plan
chooses the domain it is checked against, so a count in a refusal would be an unlimited,
uncharged query on the data.

The counts exist: the check that refuses computes them, and the same exception carries them
in :attr:`DataError.holder_message`, a second rendering of the same refusal for the data
holder alone (``factorize data check``, which says that its output is NOT differentially
private). ``str(exc)`` -- what ``factorize run`` prints -- never contains them.
"""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["DataError"]


class DataError(InputError):
    """Private input data (records, a data file, a histogram file) is invalid or unreadable.

    The message (``str(exc)``) never contains record values nor numbers derived from the
    records; it names columns and kinds of problems. ``holder_message``, when not None, is
    the same refusal with its data-dependent numbers (rows per column and kind, the record
    count, a line number), for the data holder only: it is kept out of ``args`` (so out of
    ``str``, ``repr`` and tracebacks) and printed only by ``factorize data check``.
    """

    def __init__(self, message: str, *, holder_message: str | None = None) -> None:
        super().__init__(message)
        self.holder_message = holder_message

    def for_holder(self) -> str:
        """The counted rendering when there is one, else the message (NOT private)."""
        return self.holder_message if self.holder_message is not None else str(self)
