"""Programs the benchmarks run outside factorize's own environment (``hdmm_runner``: HDMM's
side of ``python -m benchmarks --suite hdmm_unions``, run by HDMM's Python; its conversion and
error helpers import numpy only, so the suite and the tests import them too)."""
