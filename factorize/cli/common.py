"""What every ``factorize`` subcommand shares: exit codes, the one exception-to-exit-code
rule, and the solver options (declared once, with one set of defaults).

Exit codes (``factorize.errors``): 0 success; 2 bad input (workload, domain, plan, data,
guarantee, ledger, arguments, environment); 3 the solver or the certificate failed; 4 the
charge does not fit the privacy budget; 5 the ledger is inconsistent (tampered?); 70 a bug
in factorize (an internal invariant broke). The
message is ``factorize: <label>: <what is wrong>``, the label from the exception's class
(:attr:`factorize.errors.FactorizeError.cli_label`); a data error never quotes private
values (``factorize.engines.errors.DataError``).

Nothing here imports numpy or a solver: ``budget`` and ``local client`` stay light.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factorize.choices import BACKENDS
from factorize.errors import EXIT_INPUT, EXIT_OK, EXIT_SOLVER, FactorizeError

__all__ = ["EXIT_OK", "EXIT_INPUT", "EXIT_SOLVER", "error", "exit_code_for", "guarded",
           "add_solver_options", "solver_options", "gap_tol", "parse_domain", "apply_thread_policy"]



def error(message: str, label: str = "error") -> None:
    """Print ``factorize: <label>: <message>`` to stderr."""
    print(f"factorize: {label}: {message}", file=sys.stderr)


def exit_code_for(exc: BaseException) -> int | None:
    """Print the CLI message for ``exc`` and return its exit code; None for an exception that
    is not an input, environment or solver error (a bug: let it propagate)."""
    if isinstance(exc, FactorizeError):
        error(str(exc), exc.cli_label)
        return exc.exit_code
    if isinstance(exc, (ValueError, OSError, KeyError)):  # numpy / json / file-system input errors
        error(str(exc))
        return EXIT_INPUT
    if isinstance(exc, MemoryError):
        error("out of memory (the plan, the workload or the data is too large for this machine)")
        return EXIT_INPUT
    if isinstance(exc, RecursionError):
        error("the input is nested too deeply")
        return EXIT_INPUT
    return None


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand, mapping its errors to exit codes by :func:`exit_code_for`."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except Exception as exc:  # noqa: BLE001 - mapped below, re-raised when not ours
            code = exit_code_for(exc)
            if code is None:
                raise
            return code

    return wrapper


def add_solver_options(p: argparse.ArgumentParser) -> None:
    """``--solver``, ``--eps``, ``--time-limit``, ``--gap-tol`` with the planner's defaults
    (``None`` here means: the planner's default, stated in the help)."""
    p.add_argument("--solver", default=None, choices=BACKENDS,
                   help="back-end of the generic SDP (method sdp, or auto's fallback); default scs")
    p.add_argument("--eps", type=float, default=None,
                   help="back-end tolerance; default: tightened until the certificate meets --gap-tol")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="wall-clock limit of each solve (default: none)")
    p.add_argument("--gap-tol", type=float, default=None,
                   help="largest acceptable certified relative gap (default 1e-6)")


def solver_options(args: argparse.Namespace) -> Any:
    """``solvers.SolverOptions`` from the parsed options (back-end defaults where unset)."""
    from solvers import SolverOptions

    kw = {k: v for k, v in (("backend", args.solver), ("eps", args.eps),
                            ("time_limit", args.time_limit)) if v is not None}
    return SolverOptions(**kw)


def gap_tol(args: argparse.Namespace) -> float:
    """``--gap-tol``, else the planner's default."""
    if args.gap_tol is not None:
        return float(args.gap_tol)
    from factorize.planner.routes import DEFAULT_GAP_TOL

    return DEFAULT_GAP_TOL


def _is_file(text: str) -> bool:
    """Whether ``text`` names an existing file (a long ``name=size,…`` list is not a path)."""
    try:
        return Path(text).is_file()
    except OSError:
        return False


def parse_domain(text: str | None, attributes: str | None):
    from workloads import Domain, DomainError

    if text is None:
        if attributes:
            raise DomainError("--attributes needs --domain (a JSON file of name→size)")
        return None
    if text.endswith(".json") or _is_file(text):
        from workloads.schema import read_domain

        dom = read_domain(text)
    else:
        pairs = [p.strip() for p in text.split(",") if p.strip()]
        mapping: dict[str, int] = {}
        for p in pairs:
            if p.count("=") != 1:
                raise DomainError(f"cannot parse {p!r} in --domain {text!r}; expected name=size pairs")
            name, size = (s.strip() for s in p.split("="))
            try:
                mapping[name] = int(size)
            except ValueError:
                raise DomainError(f"size {size!r} of {name!r} in --domain is not an integer") from None
        dom = Domain.from_dict(mapping)
    if attributes:
        dom = dom.project([a.strip() for a in attributes.split(",") if a.strip()])
    return dom


#: Commands that do no linear algebra: their BLAS pools are left as they are.
_NO_THREAD_POLICY = frozenset({"budget"})


def apply_thread_policy(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """``factorize.threads``: the BLAS / OpenMP pool size from ``--threads``, else
    ``FACTORIZE_THREADS``, else 1, never above the usable cores, applied for the command's
    duration (in a fresh process: before numpy loads). Raises ThreadsError (a ValueError)."""
    if getattr(args, "command", None) in _NO_THREAD_POLICY:
        return contextlib.nullcontext()
    from factorize.threads import decide, limited

    return limited(decide(getattr(args, "threads", None)).threads)
