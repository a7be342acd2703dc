"""Bounded resources, clean failures: a container's header is validated
before any array data is read or allocated; every malformed file is a ContainerError (a
PlanFormatError for plans), never a traceback; huge histogram counts are refused instead of
wrapping around in int64."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from factorize.engines import DataError, histogram_from_npy
from factorize.engines._common import MAX_COUNT, check_counts
from factorize.io import container
from factorize.io.container import ContainerError
from factorize.kinds.factorization.codec import load_plan
from factorize.plan.files import PlanFormatError, plan_format
from tests.allocation import SMALL, peak_allocation
from workloads import Domain

FMT = "test-container"
DEEP = 200_000


# -- helpers ------------------------------------------------------------------------------


def _valid(tmp_path: Path, name: str = "c.bin") -> Path:
    """A valid container with arrays a (2,), b (3,) and an empty one z (0,)."""
    path = tmp_path / name
    container.write(path, FMT, 1, {"note": "x"},
                    {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0, 5.0]), "z": np.zeros(0)})
    return path


def _parts(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _manifest(header: dict) -> dict:
    return json.loads(header["__metadata__"]["manifest"])


def _forge(path: Path, header: dict | bytes, data: bytes = b"", *,
          manifest: dict | str | None = None) -> Path:
    """Write ``header`` (a dict, re-serialised compactly, or raw bytes) and ``data``."""
    if isinstance(header, dict):
        if manifest is not None:
            text = manifest if isinstance(manifest, str) else json.dumps(manifest, sort_keys=True)
            header = {**header, "__metadata__": {"manifest": text}}
        header = json.dumps(header, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    return path


@pytest.fixture
def no_array_data(monkeypatch):
    """Fail the test if array data is loaded (by the bounded reader or by safetensors)."""
    def boom(*args, **kwargs):
        raise AssertionError("array data was read before the header was refused")
    monkeypatch.setattr(container, "_read_arrays", boom, raising=False)
    monkeypatch.setattr(container, "load_file", boom, raising=False)


def _refused(path: Path, *needles: str, **kwargs) -> str:
    with pytest.raises(ContainerError) as info:
        container.read(path, FMT, 1, **kwargs)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, msg
    return msg


# -- a valid file -------------------------------------------------------------------------


def test_valid_file_round_trips(tmp_path):
    arrays = {"A.0": np.arange(12.0).reshape(3, 4), "q": np.array([0.5, -1e300, 2.0**-1074]),
              "e": np.zeros((0, 5)), "s": np.array([7.0])}
    path = tmp_path / "ok.bin"
    container.write(path, FMT, 1, {"nested": {"list": [1, [2, [3]]], "s": "[{\"]}"}}, arrays)
    manifest, back = container.read(path, FMT, 1)
    assert manifest["format"] == FMT and manifest["schema_version"] == 1
    assert manifest["nested"] == {"list": [1, [2, [3]]], "s": "[{\"]}"}
    assert set(back) == set(arrays)
    for name, a in arrays.items():
        b = back[name]
        assert b.dtype == np.float64 and b.flags["C_CONTIGUOUS"] and b.shape == a.shape
        np.testing.assert_array_equal(b, a)
        assert manifest["arrays"][name]["sha256"] == container.array_digest(b)
    head = container.read_header(path)
    assert [t.name for t in head.tensors] and head.file_size == path.stat().st_size
    # the exact limit is accepted, one byte less is not
    total = sum(a.nbytes for a in arrays.values())
    container.read(path, FMT, 1, max_total_bytes=total)
    _refused(path, str(total), str(total - 1), max_total_bytes=total - 1)


def test_flipped_data_byte_still_fails_its_digest(tmp_path):
    path = _valid(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    _refused(path, "SHA-256")


# -- sizes: refused before any data is read -----------------------------------------------


def test_sparse_file_over_the_cap_refused_fast(tmp_path, no_array_data):
    """A few KB on disk, MAX_TOTAL_BYTES + 8 declared and present (sparse): refused at once."""
    header, _ = _parts(_valid(tmp_path))
    k = container.MAX_TOTAL_BYTES // 8 + 1
    total = 8 * k
    manifest = _manifest(header)
    manifest["arrays"] = {"x": {"shape": [k], "sha256": "0" * 64}}
    path = _forge(tmp_path / "sparse.bin",
                  {"x": {"dtype": "F64", "shape": [k], "data_offsets": [0, total]}}, manifest=manifest)
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size + total)  # sparse: costs no disk, reads as zeros
    msg, peak = peak_allocation(lambda: _refused(path, str(container.MAX_TOTAL_BYTES), str(total)))
    assert peak < SMALL < total, f"the cap must be checked before reading data ({peak} bytes)"
    assert "max_total_bytes" in msg
    # a caller may lower the cap; the message states both numbers
    small = _valid(tmp_path, "small.bin")
    _refused(small, "40 bytes", "16", max_total_bytes=16)


@pytest.mark.parametrize("length", [2**40, 2**64 - 1, container.MAX_HEADER_BYTES + 1])
def test_absurd_header_length_refused(tmp_path, no_array_data, length):
    path = _valid(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(length.to_bytes(8, "little") + raw[8:])
    refused, peak = peak_allocation(lambda: _refused(path, "corrupt header length", str(length)))
    assert isinstance(refused, str) and peak < SMALL, peak
    with pytest.raises(PlanFormatError, match="header length"):
        plan_format(path)


@pytest.mark.parametrize("raw", [b"", b"\x05\x00", (0).to_bytes(8, "little"),
                                 (1000).to_bytes(8, "little") + b"{}",
                                 (2).to_bytes(8, "little") + b"[]",
                                 (4).to_bytes(8, "little") + b"\xff\xfe{}"],
                         ids=["empty", "short", "zero-length", "past-eof", "list", "not-utf8"])
def test_short_or_garbled_header_refused(tmp_path, raw):
    path = tmp_path / "g.bin"
    path.write_bytes(raw)
    _refused(path)


def _two(tmp_path: Path) -> tuple[dict, bytes]:
    return _parts(_valid(tmp_path))


@pytest.mark.parametrize("case,needle", [
    ("overlap", "overlaps"),
    ("gap", "gap of 8 bytes"),
    ("span", "its shape needs 24"),
    ("appended", "data appended"),
    ("truncated", "truncated"),
    ("not_from_zero", "gap of 8 bytes"),
])
def test_offsets_must_tile_the_data_exactly(tmp_path, no_array_data, case, needle):
    header, data = _two(tmp_path)
    a, b = header["a"]["data_offsets"], header["b"]["data_offsets"]
    first, second = ("a", "b") if a[0] < b[0] else ("b", "a")
    lo = header[first]["data_offsets"]
    size2 = 8 * header[second]["shape"][0]
    if case == "overlap":  # the second array starts 8 bytes inside the first
        header[second]["data_offsets"] = [lo[1] - 8, lo[1] - 8 + size2]
        data = data[:-8]
    elif case == "gap":
        header[second]["data_offsets"] = [lo[1] + 8, lo[1] + 8 + size2]
        data = data + b"\0" * 8
    elif case == "span":
        header["b"]["data_offsets"] = [header["b"]["data_offsets"][0], header["b"]["data_offsets"][1] - 8]
        header["b"]["shape"] = [3]
    elif case == "appended":
        data = data + b"\0" * 8
    elif case == "truncated":
        data = data[:-8]
    else:  # every array shifted by 8: a gap at the start of the data section
        for v in header.values():
            if "data_offsets" in v:
                v["data_offsets"] = [v["data_offsets"][0] + 8, v["data_offsets"][1] + 8]
        data = b"\0" * 8 + data
    path = _forge(tmp_path / f"{case}.bin", header, data)
    _refused(path, needle)


@pytest.mark.parametrize("dtype", ["F32", "I64", "F16", "BOOL", "f64", None, 8])
def test_dtype_other_than_f64_refused_before_load(tmp_path, no_array_data, dtype):
    header, data = _two(tmp_path)
    header["a"]["dtype"] = dtype  # same byte count for F32 [2] would be 8: the dtype decides
    path = _forge(tmp_path / "dt.bin", header, data)
    _refused(path, "dtype", "expected float64")


@pytest.mark.parametrize("edit", [
    lambda e: e.update(shape="2"), lambda e: e.update(shape=[-2]), lambda e: e.update(shape=[2.0]),
    lambda e: e.update(shape=[True, 2]), lambda e: e.update(shape=[1] * 65),
    lambda e: e.update(shape=[2**64]), lambda e: e.update(data_offsets=[0]),
    lambda e: e.update(data_offsets=[0.0, 16.0]), lambda e: e.update(data_offsets=[16, 0]),
    lambda e: e.update(data_offsets=[-16, 0]), lambda e: e.update(data_offsets="0,16"),
    lambda e: e.update(extra=1), lambda e: e.pop("dtype"), lambda e: e.clear(),
], ids=["shape-str", "shape-negative", "shape-float", "shape-bool", "ndim-65", "dim-2**64",
        "offsets-one", "offsets-float", "offsets-reversed", "offsets-negative", "offsets-str",
        "extra-key", "no-dtype", "empty-entry"])
def test_malformed_tensor_entries_refused(tmp_path, no_array_data, edit):
    header, data = _two(tmp_path)
    edit(header["a"])
    path = _forge(tmp_path / "m.bin", header, data)
    _refused(path)


def test_header_tensor_list_must_match_the_manifest(tmp_path, no_array_data):
    header, data = _two(tmp_path)
    manifest = _manifest(header)
    # an array in the header that the manifest does not list (data appended to match)
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    extra = dict(header, c={"dtype": "F64", "shape": [1], "data_offsets": [end, end + 8]})
    _refused(_forge(tmp_path / "extra.bin", extra, data + b"\0" * 8), "array list does not match")
    # a listed array missing from the header
    m2 = dict(manifest, arrays={**manifest["arrays"], "ghost": {"shape": [1], "sha256": "0" * 64}})
    _refused(_forge(tmp_path / "ghost.bin", header, data, manifest=m2), "array list does not match")
    # same names, another shape (same byte count): a (2,) declared (1, 2) in the header
    reshaped = json.loads(json.dumps(header))
    reshaped["a"]["shape"] = [1, 2]
    _refused(_forge(tmp_path / "shape.bin", reshaped, data), "has shape [1, 2]", "manifest says [2]")


# -- JSON: nesting, strictness ------------------------------------------------------------


def _deep_manifest(header: dict, depth: int) -> str:
    """The manifest as a string with a value nested ``depth`` deep (built by hand)."""
    body = json.dumps(_manifest(header), sort_keys=True)
    return body[:-1] + ', "z": ' + "[" * depth + "]" * depth + "}"


def test_manifest_nested_200000_deep_is_a_container_error(tmp_path, no_array_data):
    header, data = _two(tmp_path)
    path = _forge(tmp_path / "deep.plan", header, data, manifest=_deep_manifest(header, DEEP))
    _refused(path, "nested too deeply")  # not RecursionError
    with pytest.raises(PlanFormatError, match="nested too deeply"):
        plan_format(path)
    with pytest.raises(PlanFormatError):
        load_plan(path)


def test_moderately_deep_manifest_refused_at_the_depth_limit(tmp_path, no_array_data):
    """Depth 100 parses in Python, but code that walks the manifest recursively must never
    see more than MAX_JSON_DEPTH levels (the manifest object itself is one of them)."""
    header, data = _two(tmp_path)
    limit = container.MAX_JSON_DEPTH
    path = _forge(tmp_path / "d.bin", header, data, manifest=_deep_manifest(header, limit))
    _refused(path, "nested too deeply", str(limit))
    ok = _forge(tmp_path / "ok.bin", header, data, manifest=_deep_manifest(header, limit - 1))
    manifest = container.parse_manifest(ok, container.read_header(ok).header)
    assert manifest["format"] == FMT


def test_header_nested_200000_deep_is_a_container_error(tmp_path, no_array_data):
    header, data = _two(tmp_path)
    text = json.dumps(header, separators=(",", ":")).encode()
    deep = text[:-1] + b',"q":' + b"[" * DEEP + b"]" * DEEP + b"}"
    path = _forge(tmp_path / "hdeep.bin", deep, data)
    _refused(path, "nested too deeply")
    with pytest.raises(PlanFormatError, match="nested too deeply"):
        plan_format(path)


@pytest.mark.parametrize("manifest", [
    '{"format": "test-container", "schema_version": 1, "x": NaN, "arrays": {}}',
    '{"format": "test-container", "format": "test-container", "schema_version": 1, "arrays": {}}',
    '{"format": "test-container", "schema_version": 1, "x": ' + "1" * 5000 + "}",
    "[1, 2]", "not json", '"a string"',
], ids=["nan", "duplicate-key", "5000-digit-int", "list", "not-json", "string"])
def test_manifest_must_be_strict_json_object(tmp_path, no_array_data, manifest):
    header, data = _two(tmp_path)
    path = _forge(tmp_path / "s.bin", header, data, manifest=manifest)
    _refused(path)


@pytest.mark.parametrize("meta", [None, {}, {"manifest": 5}, {"manifest": "{}", "other": 1}, "text"])
def test_metadata_must_be_strings_with_a_manifest(tmp_path, no_array_data, meta):
    header, data = _two(tmp_path)
    header = dict(header)
    if meta is None:
        del header["__metadata__"]
    else:
        header["__metadata__"] = meta
    _refused(_forge(tmp_path / "md.bin", header, data))


def test_duplicate_header_keys_refused(tmp_path, no_array_data):
    header, data = _two(tmp_path)
    text = json.dumps(header, separators=(",", ":")).encode()
    dup = text[:-1] + b',"a":' + json.dumps(header["a"], separators=(",", ":")).encode() + b"}"
    _refused(_forge(tmp_path / "dup.bin", dup, data), "duplicate key")


def test_json_depth_ignores_brackets_in_strings():
    for obj in (1, [], {}, [[[]]], {"a": [1, {"b": []}]}, ["[[[", {"\\\"[{": ["]]", "\\"]}],
                {"k\\\\": "x\\\\\"]]]]"}):
        text = json.dumps(obj).encode()

        def depth(o):
            kids = o.values() if isinstance(o, dict) else o if isinstance(o, list) else None
            return 0 if kids is None else 1 + max((depth(v) for v in kids), default=0)
        assert container.json_depth(text, 10**9) == depth(obj), text


# -- histograms: counts past 2**53 ---------------------------------------------------------


def test_histogram_counts_summing_past_2_63_refused(tmp_path):
    from factorize.executor.data import load_histogram

    dom = Domain(["a"], [4])
    p = tmp_path / "h.npy"
    np.save(p, np.full(4, 2**62, dtype=np.int64))  # int64 sum wraps to 0
    for call in (lambda: histogram_from_npy(p, dom), lambda: load_histogram(p, dom)):
        with pytest.raises(DataError) as info:
            call()
        msg = str(info.value)
        assert "2**53" in msg and "empty" not in msg and str(2**62) not in msg, msg


@pytest.mark.parametrize("h,needle", [
    (np.array([2.0**53, 1.0, 0.0]), "one or more entries are at least 2**53"),  # one count (float file)
    (np.full(2048, 2**43, dtype=np.int64), "total count is at least 2**53"),  # total 2**54
    (np.array([2**52 + 1, 2**52], dtype=np.int64), "total count is at least 2**53"),
])
def test_histogram_totals_at_the_limit_refused(tmp_path, h, needle):
    p = tmp_path / "h.npy"
    np.save(p, h)
    with pytest.raises(DataError) as info:
        histogram_from_npy(p, h.size)
    assert needle in str(info.value) and str(2**43) not in str(info.value)


def test_histogram_just_below_the_limit_is_exact(tmp_path):
    h = np.ones(5000, dtype=np.int64)
    h[0] = 2**52  # max·len ≥ 2**53: the chunked (overflow-free) sum decides
    p = tmp_path / "h.npy"
    np.save(p, h)
    np.testing.assert_array_equal(histogram_from_npy(p, h.size), h)
    assert check_counts(h, "h") == 2**52 + 4999 < MAX_COUNT
    rng = np.random.default_rng(7)  # test-only fixed seed
    for _ in range(20):
        x = rng.integers(0, 2**44, size=int(rng.integers(1, 5000)), dtype=np.int64)
        total = sum(int(v) for v in x)
        if total < MAX_COUNT:
            assert check_counts(x, "x") == total
        else:
            with pytest.raises(DataError):
                check_counts(x, "x")


def test_npy_header_checked_before_its_data(tmp_path):
    """A sparse .npy declaring 2**29 float64 entries for a 4-cell domain: refused at once."""
    p = tmp_path / "big.npy"
    with open(p, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (2**29,)})
        fh.truncate(fh.tell() + 8 * 2**29)
    err, peak = peak_allocation(lambda: histogram_from_npy(p, 4))
    assert isinstance(err, DataError) and "has length 536870912, expected N=4" in str(err)
    assert peak < SMALL < 8 * 2**29, f"the header must be checked before the data ({peak} bytes)"
