"""The benchmark suites of ``factorize bench`` (registered in ``factorize.bench.SUITES``).

Each module defines ``NAME``, ``SUMMARY``, ``add_arguments(parser)`` and ``run(args, harness)``
and imports only the standard library at the top (``factorize bench --list`` imports them all).
"""
