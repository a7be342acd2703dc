"""The answer labels call Arrow's kernels by name (``executor.labels.arrow_call``) instead of
importing ``pyarrow.compute`` (about 40 ms of every run's start-up): the same
results as the public wrappers, nulls included (independent truth: ``pyarrow.compute``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factorize.executor.labels import _fill_total, _join, _joined, _kron, arrow_call, arrow_take


def _strings(rng, n, null_rate=0.3):
    return pa.array([None if rng.random() < null_rate else f"a={rng.integers(0, 9)}" for _ in range(n)],
                    type=pa.string())


def test_kernels_match_pyarrow_compute():
    rng = np.random.default_rng(17)
    for _ in range(20):
        n = int(rng.integers(0, 12))
        a, b, c = _strings(rng, n), _strings(rng, n), _strings(rng, n, 0.0)
        assert arrow_call("binary_join_element_wise", [a, b, pa.scalar(", ")]).equals(
            pc.binary_join_element_wise(a, b, ", "))
        assert arrow_call("is_null", [a]).equals(pc.is_null(a))
        assert arrow_call("equal", [a, pa.scalar("", pa.string())]).equals(pc.equal(a, ""))
        assert arrow_call("if_else", [pc.is_null(a), b, c]).equals(pc.if_else(pc.is_null(a), b, c))
        idx = rng.integers(0, max(n, 1), 2 * n) if n else np.array([], dtype=np.int64)
        assert arrow_take(a, idx).equals(a.take(pa.array(idx)))
        # the label helpers, against their definitions in pyarrow.compute
        want = pc.if_else(pc.is_null(a), b, pc.if_else(pc.is_null(b), a, pc.binary_join_element_wise(a, b, ", ")))
        assert _join(a, b).equals(want)
        empty = pc.or_kleene(pc.is_null(a), pc.equal(a, ""))
        assert _fill_total(a).equals(pc.if_else(empty, pa.scalar("total"), a))
        assert _joined([a, b, c], "/").equals(pc.binary_join_element_wise(a, b, c, "/"))
        k = int(rng.integers(1, 5))
        d = _strings(rng, k)
        left = a.take(pa.array(np.repeat(np.arange(n, dtype=np.int64), k)))
        right = d.take(pa.array(np.tile(np.arange(k, dtype=np.int64), n)))
        assert _kron(a, d).equals(_join(left, right))


def test_cast_to_text_matches():
    from pyarrow._compute import CastOptions

    ints = pa.array(np.arange(-3, 12, dtype=np.int64))
    assert arrow_call("cast", [ints], CastOptions.safe(pa.string())).equals(pc.cast(ints, pa.string()))
