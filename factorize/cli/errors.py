"""The command line's own error (:mod:`factorize.cli`)."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["UsageError"]


class UsageError(InputError):
    """The options of a ``factorize`` command do not go together, or one it needs is
    missing (argparse cannot express the rule). A ``ValueError`` too, exit code 2; the
    message names the flags that fix it. Errors of what the flags point at (a plan, a
    workload, a ledger, a file) use their own layer's class."""
