"""Answers files are published whole or not at all, at the cost of a rename, and the Parquet
encoding chosen for speed changes no value.

Independent truth: the bytes handed to the writer (read back with ``os``), pyarrow's default
Parquet writer on the same table (``pq.write_table``), Arrow's own ``pa.array(values, mask=…)``
and the direct formula ``codes[(r // stride) mod n]``; values compared bit for bit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from factorize.executor import labels as labels_module
from factorize.executor.output import open_output, parquet_options, read_answers, write_answers
from factorize.io import atomic
from factorize.io.atomic import AtomicOutput, copy_file, link_unnamed


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _payload(n: int = 3 * (1 << 20) + 12345) -> bytes:
    return np.random.default_rng(0).integers(0, 256, size=n, dtype=np.uint8).tobytes()


def _unnamed_links_here(folder: Path) -> bool:
    """Whether this kernel lets this process link an unnamed file in ``folder``."""
    tmpfile = getattr(os, "O_TMPFILE", None)
    if tmpfile is None:
        return False
    try:
        fd = os.open(folder, os.O_RDWR | tmpfile, 0o600)
    except OSError:
        return False
    try:
        link_unnamed(fd, folder / "probe")
    except OSError:
        return False
    finally:
        os.close(fd)
    (folder / "probe").unlink()
    return True


def test_commit_publishes_the_bytes_by_a_link_not_a_copy(tmp_path, monkeypatch):
    if not _unnamed_links_here(tmp_path):
        pytest.skip("this kernel links no unnamed file here (the copy is tested below)")

    def no_copy(*_a, **_k):
        raise AssertionError("the file was copied, not linked")

    monkeypatch.setattr(AtomicOutput, "_copy_to", no_copy)
    data = _payload()
    target = tmp_path / "answers.parquet"
    out = AtomicOutput(target)
    out.write(lambda fh: fh.write(data))
    assert _entries(tmp_path) == []  # unnamed until the commit
    out.commit()
    assert target.read_bytes() == data and _entries(tmp_path) == ["answers.parquet"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_commit_syncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = AtomicOutput(tmp_path / "a.csv")
    out.write(lambda fh: fh.write(b"x\n"))
    out.commit()
    # the data first, the folder holding the new name last (a copy, where no link is
    # allowed, is synced in between)
    assert synced[0] is False and synced[-1] is True and synced.count(True) == 1


@pytest.mark.parametrize("in_kernel", [True, False])
def test_where_no_link_is_allowed_the_file_is_copied_whole(tmp_path, monkeypatch, in_kernel):
    def refused(fd, dest):
        raise OSError(errno.EXDEV, "refused")

    monkeypatch.setattr(atomic, "link_unnamed", refused)
    if not in_kernel:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    data = _payload()
    target = tmp_path / "answers.csv"
    out = AtomicOutput(target)
    out.write(lambda fh: fh.write(data))
    out.commit()
    assert target.read_bytes() == data and _entries(tmp_path) == ["answers.csv"]


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, (1 << 20) + 1, 5 * (1 << 20) + 3])
def test_copy_file_copies_every_byte(tmp_path, monkeypatch, size):
    data = _payload(size)
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src_path.write_bytes(data)
    for fallback in (False, True):
        if fallback:  # a file system where copy_file_range refuses: the buffered copy
            def refuse(*_a, **_k):
                raise OSError(errno.EXDEV, "cross-device")

            monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
        src = os.open(src_path, os.O_RDONLY)
        dst = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            copy_file(src, dst)
        finally:
            os.close(src)
            os.close(dst)
        assert dst_path.read_bytes() == data


def test_a_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path):
    target = tmp_path / "answers.csv"

    def half_then_fail(fh):
        fh.write(b"query,estimate\n0,1.5\n")
        fh.flush()
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError), open_output(target) as out:
        out.write(half_then_fail)
    assert _entries(tmp_path) == []  # neither the answers nor a hidden partial file

    target.write_bytes(b"previous release\n")
    with pytest.raises(RuntimeError), open_output(target, overwrite=True) as out:
        out.write(half_then_fail)
    assert target.read_bytes() == b"previous release\n" and _entries(tmp_path) == ["answers.csv"]


def test_a_failed_commit_leaves_no_file(tmp_path, monkeypatch):
    def no_rename(src, dst):
        raise OSError(errno.EIO, "rename failed")

    monkeypatch.setattr(os, "replace", no_rename)
    target = tmp_path / "answers.parquet"
    out = AtomicOutput(target)
    out.write(lambda fh: fh.write(b"x" * 1000))
    with pytest.raises(OSError):
        out.commit()
    out.abort()
    assert _entries(tmp_path) == []


# ---------------------------------------------------------------------------------------
# Parquet: the encodings chosen, and the values they keep


def _answers(k: int, repeated_se: bool) -> dict:
    from factorize.executor.labels import MarginalLabels, TableLabels, workload_tables
    from workloads.domain import Domain
    from workloads.spec import parse_workload

    W = parse_workload("marginals_upto:300x250:2")
    dom = Domain(["a", "b"], [300, 250])
    assert W.shape[0] == k
    rng = np.random.default_rng(7)
    est = rng.normal(scale=50.0, size=k)
    se = (np.repeat(rng.uniform(1, 9, size=4), [1, 300, 250, k - 551]) if repeated_se
          else rng.uniform(1, 9, size=k))
    return {"query": np.arange(k), "table": TableLabels(workload_tables(W, dom), k),
            "label": MarginalLabels.of(W, dom), "estimate": est, "std_error": se,
            "ci_low": est - 1.96 * se, "ci_high": est + 1.96 * se}


@pytest.mark.parametrize("repeated_se", [True, False])
def test_parquet_answers_keep_every_value_bit_for_bit(tmp_path, repeated_se):
    """75,551 answers (two row groups): read back equal, bit for bit, to what was given, and
    to pyarrow's default writer's file of the same rows; the encodings are the ones
    :func:`parquet_options` states."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = 75_551
    columns = _answers(k, repeated_se)
    out = tmp_path / "a.parquet"
    write_answers(out, columns, {"test": True})
    got, meta = read_answers(out)
    assert meta == {"test": True}
    for name in ("estimate", "std_error", "ci_low", "ci_high"):
        assert got[name].tobytes() == np.asarray(columns[name], dtype=np.float64).tobytes()
    assert np.array_equal(got["query"], np.arange(k))
    assert list(got["label"]) == columns["label"].to_pylist()

    new = pq.read_table(out)
    plain = tmp_path / "default.parquet"
    pq.write_table(new, plain)  # pyarrow's defaults: dictionary and snappy everywhere
    assert new.equals(pq.read_table(plain))

    meta_pq = pq.ParquetFile(out).metadata
    assert meta_pq.num_row_groups == 2
    chunks = {meta_pq.schema.column(j).name: meta_pq.row_group(0).column(j)
              for j in range(meta_pq.num_columns)}
    assert "DELTA_BINARY_PACKED" in chunks["query"].encodings
    for name in ("label", "estimate", "ci_low", "ci_high"):
        assert "RLE_DICTIONARY" not in chunks[name].encodings, name
    for name in ("estimate", "ci_low", "ci_high"):
        assert chunks[name].compression == "UNCOMPRESSED"
    assert ("RLE_DICTIONARY" in chunks["std_error"].encodings) == repeated_se
    for name in ("table", "a", "b"):
        assert "RLE_DICTIONARY" in chunks[name].encodings and chunks[name].statistics is None
    rows0 = meta_pq.row_group(0).num_rows
    est0 = np.asarray(columns["estimate"][:rows0])
    assert (chunks["estimate"].statistics.min, chunks["estimate"].statistics.max) == (est0.min(), est0.max())
    assert all(chunks[n].statistics is not None for n in ("query", "std_error", "ci_low", "ci_high"))
    first = new.slice(0, 10)
    assert parquet_options(first)["column_encoding"] == {"query": "DELTA_BINARY_PACKED"}
    assert pa.types.is_dictionary(new.schema.field("table").type)


# ---------------------------------------------------------------------------------------
# the label pieces the writer builds per batch


@pytest.mark.parametrize("seed", range(5))
def test_cyclic_runs_are_the_formula(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        stride = int(rng.integers(1, 40))
        codes = rng.permutation(50)[:n].astype(np.int32)
        lo = int(rng.integers(0, 3 * n * stride))
        hi = lo + int(rng.integers(0, 5 * n * stride))
        r = np.arange(lo, hi, dtype=np.int64)
        got = labels_module.cyclic_runs(codes, stride, lo, hi)
        assert got.dtype == codes.dtype and np.array_equal(got, codes[(r // stride) % n])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_masked_array_is_arrows_masked_array(dtype):
    import pyarrow as pa

    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 8, 9, 65_536, 65_541):
        values = rng.integers(0, 100, size=n).astype(dtype)
        null = rng.random(n) < 0.4
        got = labels_module.masked_array(values, null)
        want = pa.array(values, mask=null)
        got.validate(full=True)
        assert got.equals(want) and got.null_count == int(null.sum())
        assert labels_module.masked_array(values, None).equals(pa.array(values))


MARGINAL_FAMILIES = [
    ("marginals_upto:5x2x3x1x4:3", [5, 2, 3, 1, 4]),  # a size-1 attribute, the empty marginal
    ("marginals:3x4x2x5:2", [3, 4, 2, 5]),
    ("marginals_upto:2x3:0", [2, 3]),  # the total alone
    ("marginals_upto:30x25x4:2", [30, 25, 4]),
]


@pytest.mark.parametrize(("spec", "sizes"), MARGINAL_FAMILIES)
@pytest.mark.parametrize("scalar_rows", [1, 3, 40, 10**9])
def test_marginal_label_slices_by_scalar_and_per_row_strides(monkeypatch, spec, sizes, scalar_rows):
    """Marginals with many rows in a slice take the scalar-stride path, runs of small ones the
    per-row one: whatever the threshold, every slice is the all-at-once labels'."""
    from factorize.executor.labels import MarginalLabels, query_labels
    from workloads.domain import Domain
    from workloads.spec import parse_workload

    monkeypatch.setattr(MarginalLabels, "SCALAR_ROWS", scalar_rows)
    W = parse_workload(spec)
    dom = Domain([f"a{i}" for i in range(len(sizes))], sizes)
    want = query_labels(W, dom).to_pylist()
    lab = MarginalLabels.of(W, dom)
    rng = np.random.default_rng(scalar_rows)
    for _ in range(120):
        lo = int(rng.integers(0, len(want) + 2))
        n = int(rng.integers(0, len(want) + 3))
        assert lab.slice(lo, n).to_pylist() == want[lo:lo + n]
    assert lab.slice(0, len(want)).to_pylist() == want


@pytest.mark.parametrize("spec", ["marginals_upto:6x5x4:3", "kron(prefix:6,identity:5,total:4)"])
def test_table_label_batches_are_the_cells_formula(spec):
    """Every batch's table and attribute columns: row r of a table shows
    ``texts[codes[(r // stride) mod n]]`` of each of its columns (null elsewhere)."""
    from factorize.executor.labels import TableLabels, workload_tables
    from workloads.domain import Domain
    from workloads.spec import parse_workload

    W = parse_workload(spec)
    dom = Domain(["x", "y", "z"], [6, 5, 4])
    tables = workload_tables(W, dom)
    k = W.shape[0]
    layout = TableLabels(tables, k)
    want = {n: [None] * k for n in layout.attribute_columns}
    names = []
    for t in tables:
        names += [t.name] * t.rows
        for c in t.columns:
            for r in range(t.rows):
                want[c.name][t.start + r] = c.texts[c.codes[(r // c.stride) % c.codes.size]]
    rng = np.random.default_rng(0)
    for _ in range(60):
        lo = int(rng.integers(0, k))
        hi = int(rng.integers(lo, k + 1))
        got = layout.batch(lo, hi)
        assert got["table"].to_pylist() == names[lo:hi]
        for n in layout.attribute_columns:
            got[n].validate(full=True)
            assert got[n].to_pylist() == want[n][lo:hi], n


def test_the_benchmarks_values_digest_ignores_encoding_and_sees_every_value(tmp_path):
    """``benchmarks.suites.big_release.values_sha256``, which compares seeded answers between
    source trees: equal for one table written with the release's encodings and with pyarrow's
    defaults (other row groups too), different when one value, one label or one null changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.suites.big_release import values_sha256

    k = 75_551
    out = tmp_path / "a.parquet"
    write_answers(out, _answers(k, True), {"test": True})
    table = pq.read_table(out)
    other = tmp_path / "b.parquet"
    pq.write_table(table, other, row_group_size=10_000)
    assert values_sha256(out) == values_sha256(other)

    def changed(column: str, row: int, value) -> str:
        j = table.schema.get_field_index(column)
        values = table.column(column).to_pylist()
        values[row] = value
        arr = pa.array(values, type=table.schema.field(column).type)
        path = tmp_path / "c.parquet"
        pq.write_table(table.set_column(j, table.schema.field(column), arr), path)
        return values_sha256(path)

    est = float(table.column("estimate")[5].as_py())
    assert changed("estimate", 5, np.nextafter(est, np.inf)) != values_sha256(out)
    assert changed("label", 70_000, "a=1, b=2") != values_sha256(out)
    assert table.column("b")[400].is_valid  # the table "b"
    assert changed("b", 400, None) != values_sha256(out)  # a cell made empty (null)
