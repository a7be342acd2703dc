"""The production executor: run a verified plan on private data.

``import factorize.executor`` needs only numpy and the plan file: no cvxpy, no solver (a test
checks it in a fresh interpreter). DuckDB is imported only when records are read; the privacy
layer (calibration re-check, exact samplers) only when a plan is verified or run.

- :func:`run_plan`: verify → read data → exact noise → answers (+ optional post-processing);
- :func:`load_histogram`: histogram from ``.npy`` / ``.csv`` / ``.parquet`` (DuckDB);
- :func:`write_answers`: CSV / JSON / Parquet, atomically.
"""

from .data import load_histogram
from .linear_release import Release
from .output import write_answers
from .pipeline import run_plan
from .release import ExecutionError

__all__ = ["ExecutionError", "Release", "load_histogram", "run_plan",
           "write_answers"]
