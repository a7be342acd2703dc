"""Test-session settings.

Property tests (hypothesis) run derandomized by default, so the test command is reproducible:
the same examples on every run and machine, no example database. Set
``FACTORIZE_HYPOTHESIS=explore`` to search new random examples (and keep the failures found
in ``.hypothesis/``) — how the scaling and zero-point bugs of the dense solvers were found.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("FACTORIZE_HYPOTHESIS", "ci"))
