"""The report layer's error (:mod:`factorize.report`)."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["ReportError"]


class ReportError(InputError):
    """A report or figure cannot be made from what was given: a plot's data (not numbers,
    wrong shape, non-finite, mismatched lengths, bad groups or intervals), its title or
    unit, a PNG that is not one, or a report file's format. A ``ValueError`` too, exit code 2."""
