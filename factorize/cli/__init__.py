"""The ``factorize`` command line (I/O only: parsing, printing, exit codes).

``app.py`` builds the parser and runs a subcommand; each command group registers itself
from its own module — ``plan.py`` (plan, run, verify, inspect), ``report.py``,
``local.py``, ``budget.py``, ``schema.py`` — and ``common.py`` holds what they share
(exit codes, the exception-to-exit-code rule, the solver options); ``errors.py`` holds
``UsageError``, options that do not go together.
"""

from factorize.cli.app import build_parser, main
from factorize.cli.common import apply_thread_policy

__all__ = ["main", "build_parser", "apply_thread_policy"]
