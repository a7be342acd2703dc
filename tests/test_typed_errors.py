"""The package raises its own typed errors: at most 3 bare built-in
``ValueError`` / ``RuntimeError`` / ``TypeError`` raises remain in factorize/, solvers/ and
workloads/ (a count that may only go down), every layer error derives from the one root with
the built-in base callers catch, and a bad solver option is bad input, not a solver failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from factorize.errors import FactorizeError, InputError, InternalError, SolverError

ROOT = Path(__file__).resolve().parents[1]
#: Bare built-in raises still in the package; the count may only go down.
BARE_ALLOWED = 2
BARE = re.compile(r"raise (ValueError|RuntimeError|TypeError)\(")


def test_few_bare_builtin_raises_remain():
    found = [f"{p.relative_to(ROOT)}:{i}" for d in ("factorize", "solvers", "workloads")
             for p in (ROOT / d).rglob("*.py")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if BARE.search(line)]
    assert len(found) <= BARE_ALLOWED, "\n".join(found)


def test_layer_errors_keep_their_roots_and_builtin_bases():
    from factorize.geometry.errors import GeometryError, GeometryTypeError
    from factorize.planner.errors import PlannerError
    from factorize.pure_dp.errors import PureDPError
    from factorize.research.errors import ResearchError
    from solvers.errors import SolverInputError

    for cls in (GeometryError, PlannerError, PureDPError, ResearchError, SolverInputError):
        assert issubclass(cls, InputError) and issubclass(cls, ValueError)
        assert not issubclass(cls, SolverError)
    assert issubclass(GeometryTypeError, TypeError)
    assert issubclass(InternalError, FactorizeError) and issubclass(InternalError, RuntimeError)
    assert InternalError.exit_code == 70


def test_a_bad_solver_option_is_bad_input():
    from solvers.errors import SolverInputError
    from solvers.options import SolverOptions

    with pytest.raises(SolverInputError, match="back-end"):
        SolverOptions(backend="nope")
