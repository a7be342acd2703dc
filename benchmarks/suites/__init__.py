"""The benchmark suites of ``python -m benchmarks`` (registered in ``benchmarks.SUITES``).

Each module defines ``NAME``, ``SUMMARY``, ``add_arguments(parser)`` and ``run(args, harness)``
and imports only the standard library at the top (``python -m benchmarks --list`` imports them all).
"""
