"""How many threads the BLAS / OpenMP pools of a ``factorize`` command get (one decision, one place).

Why a policy at all. numpy and scipy each load their own OpenBLAS, and OpenBLAS starts one
worker per core it sees; its workers *spin* waiting for the next call rather than sleep. The
planner's work (the dual fixed-point solvers, the low-rank approximate-γ₂ solver, the
strategy searches) is a long sequence of moderate LAPACK/BLAS calls: an N×N
eigendecomposition per iteration, N in the hundreds. A second thread can at best halve such
a call on two cores, and only while nothing else runs; on a machine where any other process
wants a core (a shared 2-core box, a CI runner, a second ``factorize``) the spinning workers
and the process that owns the core take turns, every call waits for the slowest worker, and
the same solve becomes several to 70× slower (measured on a shared 2-core machine:
``solve prefix:256 --norm gamma_2`` 9–49 s instead of 0.5–0.8 s; the README's ``local plan``
example 444 s instead of 23 s). That is oversubscription.

The policy, applied once at CLI start (``factorize.cli.main``) before numpy is imported:

- ``--threads N`` on the command line, else the environment variable ``FACTORIZE_THREADS``,
  else the default, **1 thread**. A long plan on a shared machine is where the loss happens
  (``reports/bench_threads.md``), and the default cannot know whether the machine will stay
  idle; opt in with ``--threads max`` (every usable core) or a number on a machine you know
  is yours.
- Never more than the usable cores: the CPUs this process may run on
  (``os.sched_getaffinity``), and fewer if a cgroup v2 CPU quota (``cpu.max``) allows fewer. A
  larger request is capped, and the decision says so.
- One pool size for every pool: the environment variables the BLAS / OpenMP libraries read
  when they load (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, …) are
  set, so libraries loaded later (scipy's own OpenBLAS is loaded only when scipy.linalg is
  first imported) start with that size; libraries already loaded are limited with
  threadpoolctl. The variables are inherited by subprocesses. An explicit
  ``OPENBLAS_NUM_THREADS`` etc. in the environment is overridden: ``--threads`` and
  ``FACTORIZE_THREADS`` are the one knob.

The Python API (``factorize.planner.routes.solve`` …) leaves a caller's pools alone; wrap calls in
``threadpoolctl.threadpool_limits`` or :func:`limited` to get the same behaviour. DuckDB's and
Spark's own worker pools are not BLAS pools and are not touched.

Invalid values (``0``, ``-1``, ``two``) raise :class:`ThreadsError` naming ``--threads`` or
``FACTORIZE_THREADS``; the CLI prints it and exits with status 2.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from factorize.errors import InputError

if TYPE_CHECKING:
    import argparse

#: The environment override (the CLI option ``--threads`` wins over it).
ENV_VAR = "FACTORIZE_THREADS"
#: The CLI option.
OPTION = "--threads"
#: Without an option or ``FACTORIZE_THREADS``: one thread (see the module docstring).
DEFAULT_THREADS = 1
#: What the thread-pool libraries read when they load (OpenBLAS also reads OMP_NUM_THREADS).
POOL_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
#: Words accepted for "every usable core".
_ALL_CORES = ("max", "all")
#: Modules whose presence in ``sys.modules`` means a BLAS / OpenMP library may be loaded.
_POOL_MODULES = ("numpy", "scipy", "cvxpy", "scs", "clarabel", "mosek")


class ThreadsError(InputError):
    """An invalid ``--threads`` / ``FACTORIZE_THREADS`` value (the message names which)."""


@dataclass(frozen=True)
class ThreadDecision:
    """The thread count a command runs with, and why."""

    threads: int
    source: str  #: "--threads", "FACTORIZE_THREADS" or "default"
    usable_cores: int
    requested: int  #: what the source asked for, before the cap at ``usable_cores``

    @property
    def capped(self) -> bool:
        return self.requested > self.threads

    def describe(self) -> str:
        cap = (f" (asked for {self.requested}, capped at the {self.usable_cores} usable cores)"
               if self.capped else "")
        return f"{self.threads} BLAS/OpenMP thread(s) from {self.source}{cap}"


def usable_cores(*, cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The cores this process can use: its CPU affinity, lowered by a cgroup v2 quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota(cgroup_root)
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def _cgroup_quota(root: str) -> int | None:
    """⌈quota / period⌉ of the cgroup v2 ``cpu.max`` file (``max 100000`` means none), or None."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def parse_threads(text: str | int, origin: str = OPTION) -> int | None:
    """A thread count from ``text``: a positive integer, or ``max`` / ``all`` (None: every
    usable core). ``origin`` (``--threads`` or ``FACTORIZE_THREADS``) is named in the error."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        word = str(text).strip().lower()
        if word in _ALL_CORES:
            return None
        try:
            value = int(word, 10)
        except ValueError:
            raise ThreadsError(f"{origin}={text!r}: expected a positive number of threads or "
                               f"'max' (every usable core)") from None
    if value < 1:
        raise ThreadsError(f"{origin}={text!r}: the number of threads must be at least 1 "
                           f"(or 'max' for every usable core)")
    return value


def decide(option: str | int | None = None, environ: Mapping[str, str] | None = None,
           cores: int | None = None) -> ThreadDecision:
    """The thread count for ``--threads option`` (None: not given), the environment
    (``FACTORIZE_THREADS``) and the usable cores (default: :func:`usable_cores`)."""
    env = os.environ if environ is None else environ
    usable = usable_cores() if cores is None else max(1, int(cores))
    if option is not None:
        source, value = OPTION, parse_threads(option, OPTION)
    elif env.get(ENV_VAR, "").strip():
        source, value = ENV_VAR, parse_threads(env[ENV_VAR], ENV_VAR)
    else:
        source, value = "default", DEFAULT_THREADS
    requested = usable if value is None else value
    return ThreadDecision(min(requested, usable), source, usable, requested)


@contextlib.contextmanager
def limited(threads: int) -> Iterator[None]:
    """Every BLAS / OpenMP pool at ``threads`` for the duration of a ``with`` block: the pool
    variables of the environment for libraries loaded from now on, threadpoolctl for those
    already loaded (imported only when one may be: not in a fresh ``factorize`` process, whose
    numpy loads later). Afterwards the previous environment and pool sizes are back (for
    in-process callers: tests, the Python API); a library first loaded inside the block keeps
    the size it started with."""
    if int(threads) < 1:
        raise ThreadsError(f"cannot run with {threads} threads")
    saved = {var: os.environ.get(var) for var in POOL_ENV_VARS}
    controller = None
    if any(m in sys.modules for m in _POOL_MODULES):
        from threadpoolctl import threadpool_limits

        controller = threadpool_limits(limits=int(threads))
    try:
        for var in POOL_ENV_VARS:
            os.environ[var] = str(int(threads))
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        if controller is not None:
            controller.restore_original_limits()


def add_option(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """Add ``--threads N|max`` to a parser (checked at parse time, the error naming it). On a
    sub-command the option has no default, so it does not hide the top-level one."""
    import argparse

    def threads_arg(text: str) -> str:
        try:
            parse_threads(text, OPTION)
        except ThreadsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parser.add_argument(OPTION, type=threads_arg, metavar="N|max",
                        default=None if top_level else argparse.SUPPRESS,
                        help=f"BLAS/OpenMP threads (default: ${ENV_VAR}, else {DEFAULT_THREADS}; "
                             "'max' = every usable core; never more than the usable cores)")


def pool_info() -> list[dict[str, object]]:
    """The loaded BLAS / OpenMP pools and their sizes (threadpoolctl), for reports and tests."""
    from threadpoolctl import threadpool_info

    return [{k: d.get(k) for k in ("user_api", "internal_api", "num_threads", "filepath")}
            for d in threadpool_info()]
