"""Test-session settings.

Property tests (hypothesis) run derandomized by default, so the test command is reproducible:
the same examples on every run and machine, no example database. Set
``FACTORIZE_HYPOTHESIS=explore`` to search new random examples (and keep the failures found
in ``.hypothesis/``) — how the scaling and zero-point bugs of the dense solvers were found.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tests.raw_adult import ADULT_CSV, ADULT_DOMAIN

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("FACTORIZE_HYPOTHESIS", "ci"))


# --------------------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="session")
def adult() -> tuple[Path, Path]:
    """The shared Adult data set ``(records.csv, domain.json)`` (``tests/raw_adult.ADULT_DIR``:
    ``../shared/data/adult`` beside the checkout, or ``FACTORIZE_ADULT_DIR``); the test is
    skipped, saying so, where it is absent."""
    if not (ADULT_CSV.is_file() and ADULT_DOMAIN.is_file()):
        pytest.skip(f"Adult data not found at {ADULT_CSV.parent} (../shared/data/adult)")
    return ADULT_CSV, ADULT_DOMAIN


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread_per_xdist_worker():
    """Under pytest-xdist (``-n 2`` in the default run, one worker per core) each worker's BLAS
    and OpenMP pools run one thread: two workers of two threads each on two cores measured the
    dense linear-algebra tests several times slower than one thread each. Without xdist the
    pools are left as they are."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    from factorize.threads import limited

    with limited(1):
        yield
