"""The one exception root of factorize, and the exit code each branch maps to.

Every error the project raises on purpose derives from :class:`FactorizeError`; each also
keeps the built-in base it always had (``ValueError`` for bad input, ``RuntimeError`` for a
solver, ``OSError`` / ``FileNotFoundError`` for the environment), so ``except ValueError``
code keeps working::

    FactorizeError
    ├── InputError (ValueError)             bad input: exit 2
    │   ├── WorkloadError, WorkloadSpecError, DenseTooLargeError   (workloads.errors)
    │   ├── DomainError, SchemaError, SchemaTypeError              (workloads)
    │   ├── PlanError, PlanFormatError, ExecutionError             (factorize.plan, executor)
    │   ├── DataError                                              (factorize.engines)
    │   ├── PrivacyError                                           (factorize.privacy)
    │   ├── LedgerError                                            (factorize.ledger)
    │   │   ├── BudgetExceeded                                     exit 4
    │   │   └── LedgerTampered                                     exit 5
    │   ├── ContainerError, NumericRangeError, StructureError, ThreadsError
    │   ├── GeometryError, PlannerError, PureDPError, ResearchError, LocalError, ReportError,
    │   │   UsageError (cli), BenchError               (each package's errors.py)
    │   ├── RandomSourceError (PrivacyError, TypeError): an rng that is not a random source
    │   └── SolverInputError                                       (solvers.errors: bad options)
    ├── EnvironmentProblem (OSError)         exit 2: MissingFolderError, SparkUnavailableError
    ├── SolverError (RuntimeError)           exit 3: solver failed / inaccurate / timed out,
    │                                        certificate gap or invalid (solvers.errors)
    └── InternalError (RuntimeError)         exit 70: an invariant of factorize itself broke
                                             (a bug, never bad input)

This module imports nothing, so the lower packages (``workloads``, ``solvers``) can derive
from it without loading anything of ``factorize`` (whose ``__init__`` is lazy). The CLI maps
an exception to its exit code and message prefix through :attr:`FactorizeError.exit_code` and
:attr:`FactorizeError.cli_label` (``factorize.cli.common.guarded``), one rule for every
subcommand.
"""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_INPUT",
    "EXIT_SOLVER",
    "EXIT_BUDGET",
    "EXIT_TAMPERED",
    "EXIT_INTERNAL",
    "FactorizeError",
    "InputError",
    "EnvironmentProblem",
    "SolverError",
    "InternalError",
]

#: Exit codes of the ``factorize`` command.
EXIT_OK = 0
EXIT_INPUT = 2
EXIT_SOLVER = 3
#: The charge does not fit the dataset's privacy budget (nothing was charged).
EXIT_BUDGET = 4
#: The ledger's database, chain or anchor is inconsistent (modified, rolled back, deleted).
EXIT_TAMPERED = 5
#: A bug in factorize (sysexits' EX_SOFTWARE).
EXIT_INTERNAL = 70


class FactorizeError(Exception):
    """Root of every error factorize raises on purpose."""

    #: The ``factorize`` command's exit status for this error.
    exit_code: int = EXIT_INPUT
    #: The word after ``factorize:`` in the command's message.
    cli_label: str = "error"


class InputError(FactorizeError, ValueError):
    """Bad input: a workload, domain, schema, plan, data set, guarantee or ledger that cannot
    be used as given. The message says what is wrong and, in the CLI, which flag fixes it."""


class EnvironmentProblem(FactorizeError, OSError):
    """The machine cannot do what was asked (a missing output folder, no Java for Spark)."""


class SolverError(FactorizeError, RuntimeError):
    """A solve failed, stalled, timed out or was inaccurate, or its re-checked certificate
    is looser than requested; never a silently poor answer."""

    exit_code = EXIT_SOLVER
    cli_label = "solver error"


class InternalError(FactorizeError, RuntimeError):
    """An invariant of factorize itself broke — a bug, never bad input; the message says
    which invariant. Raised where code would otherwise continue on a wrong assumption."""

    exit_code = EXIT_INTERNAL
    cli_label = "internal error (a bug in factorize)"
