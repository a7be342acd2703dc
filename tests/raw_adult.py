"""A raw-valued copy of Adult for the schema tests (and ``python -m benchmarks --suite raw``).

The code lives in ``benchmarks/raw_adult.py`` (the benchmark suite needs it and the
benchmarks never import from ``tests/``); this module re-exports it under the names the tests
use: ``ADULT_DIR`` (``../shared/data/adult`` beside the checkout, or ``FACTORIZE_ADULT_DIR``:
the one place the tests state where the shared Adult data set is), ``ADULT_CSV``,
``ADULT_DOMAIN``, the label lists, ``adult_schema()``, ``write_schema``, ``decode``,
``read_coded`` and ``write_raw``.
"""

from __future__ import annotations

from benchmarks.raw_adult import (  # noqa: F401 - re-exported
    ADULT_CSV,
    ADULT_DIR,
    ADULT_DOMAIN,
    COUNTRIES,
    MARITAL,
    OCCUPATION,
    RACE,
    RELATIONSHIP,
    SEX,
    UNLISTED_COUNTRY,
    WORKCLASS,
    adult_schema,
    decode,
    read_coded,
    write_raw,
    write_schema,
)
