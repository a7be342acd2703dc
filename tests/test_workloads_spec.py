"""``workloads.parse_workload``: every accepted form and the malformed ones."""

from __future__ import annotations

import numpy as np
import pytest

from workloads import (
    ACCEPTED_FORMS,
    KronWorkload,
    VStackWorkload,
    WorkloadError,
    WorkloadSpecError,
    allrange,
    hadamard,
    identity,
    marginals,
    marginals_upto,
    parity,
    parse_workload,
    prefix,
    random,
    total,
    width,
)


def kron_dense(*mats):
    out = mats[0]
    for m in mats[1:]:
        out = np.kron(out, m)
    return out


CASES = [
    ("identity:16", lambda: np.eye(16)),
    ("total:16", lambda: np.ones((1, 16))),
    ("prefix:64", lambda: prefix(64).dense()),
    ("allrange:32", lambda: allrange(32).dense()),
    ("hadamard:16", lambda: hadamard(16).dense()),
    ("marginals:2x2x2x2x2x2x2x2:2", lambda: marginals([2] * 8, 2).dense()),
    ("kron(prefix:8,prefix:8)", lambda: kron_dense(prefix(8).dense(), prefix(8).dense())),
    ("kron(prefix:4,kron(identity:2,total:3))", lambda: kron_dense(prefix(4).dense(), np.eye(2), np.ones((1, 3)))),
    ("width:32:4", lambda: width(32, 4).dense()),
    ("marginals_upto:3x4x5:2", lambda: marginals_upto([3, 4, 5], 2).dense()),
    ("parity:8:2", lambda: parity(8, 2).dense()),
    ("random:64x32:seed=7", lambda: random(64, 32, seed=7).dense()),
    ("vstack(prefix:8,identity:8)", lambda: np.vstack([prefix(8).dense(), np.eye(8)])),
    ("prefix:8x8", lambda: kron_dense(prefix(8).dense(), prefix(8).dense())),
    ("allrange:8x8", lambda: kron_dense(allrange(8).dense(), allrange(8).dense())),
    ("kron(prefix:2,identity:3,total:2)", lambda: kron_dense(prefix(2).dense(), np.eye(3), np.ones((1, 2)))),
    ("identity:2x3", lambda: np.eye(6)),
    ("marginals:3x4:0", lambda: np.ones((1, 12))),
]


@pytest.mark.parametrize("spec, truth", CASES, ids=[c[0] for c in CASES])
def test_every_form(spec, truth):
    w = parse_workload(spec)
    expected = truth()
    assert w.shape == expected.shape
    np.testing.assert_array_equal(w.dense(), expected)
    assert w.spec == spec


def test_structure_of_results():
    assert isinstance(parse_workload("prefix:8x8"), KronWorkload)
    assert isinstance(parse_workload("vstack(prefix:8,identity:8)"), VStackWorkload)
    w = parse_workload("kron(prefix:4,kron(identity:2,total:3))")
    assert [f.spec for f in w.factors] == ["prefix:4", "kron(identity:2,total:3)"]
    assert w.factors[1].factors[1].spec == "total:3"
    assert parse_workload("marginals:2x2x2x2x2x2x2x2:2").shape == (28 * 4, 256)


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("  prefix : 8 ", "prefix:8"),
        (" kron ( prefix:8 ,\tprefix : 8 ) ", "kron(prefix:8,prefix:8)"),
        ("PREFIX:8X8", "prefix:8x8"),
        ("marginals : 2 x 3 : 1", "marginals:2x3:1"),
        ("random: 4 x 3 : seed = 07", "random:4x3:seed=7"),
        ("prefix:008", "prefix:8"),
        ("vstack(kron(total:2,identity:3), kron(identity:2,total:3))", "vstack(kron(total:2,identity:3),kron(identity:2,total:3))"),
    ],
)
def test_whitespace_case_and_normalization(text, normalized):
    w = parse_workload(text)
    assert w.spec == normalized
    assert parse_workload(normalized).fingerprint() == w.fingerprint()


def test_file_forms(tmp_path, monkeypatch):
    m = np.arange(6.0).reshape(2, 3)
    np.save(tmp_path / "W.npy", m)
    w = parse_workload(f"file:{tmp_path / 'W.npy'}")
    np.testing.assert_array_equal(w.dense(), m)
    assert w.spec == f"file:sha256={w.fingerprint()}"  # content-addressed, not the path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "path" / "to").mkdir(parents=True)
    np.save(tmp_path / "path" / "to" / "W.npy", m)
    np.testing.assert_array_equal(parse_workload("file:path/to/W.npy").dense(), m)
    np.savetxt(tmp_path / "v.csv", np.ones((1, 2)), delimiter=",")
    k = parse_workload("kron( file:path/to/W.npy , file:v.csv )")
    np.testing.assert_array_equal(k.dense(), np.kron(m, np.ones((1, 2))))
    fa, fb = (f.fingerprint() for f in k.factors)
    assert k.spec == f"kron(file:sha256={fa},file:sha256={fb})"
    # the content address resolves only from carried matrices, never from a path
    again = parse_workload(k.spec, embedded={fa: k.factors[0], fb: k.factors[1]}, read_files=False)
    assert again.fingerprint() == k.fingerprint()
    with pytest.raises(WorkloadSpecError, match="not among the matrices"):
        parse_workload(k.spec, read_files=False)
    with pytest.raises(WorkloadSpecError, match="file path is refused"):
        parse_workload("file:path/to/W.npy", read_files=False)


MALFORMED = [
    ("prefix", 6, "':'"),
    ("prefix:", 7, "positive integer"),
    ("prefix:0", 7, "positive integer"),
    ("prefix:-3", 7, "positive integer"),
    ("prefix:abc", 7, "positive integer"),
    ("kron(prefix:8", 13, "',' or ')'"),
    ("kron()", 5, "argument 1"),
    ("kron(prefix:8,)", 14, "argument 2"),
    ("kron", 4, "'('"),
    ("marginals:2x2:3", 14, "exceeds"),
    ("unknown:4", 0, "unknown workload 'unknown'"),
    ("file:/nonexistent.npy", 0, "does not exist"),
    ("prefix:8 junk", 9, "unexpected"),
    ("prefix:8x", 9, "positive integer"),
    ("random:4x4", 10, "explicit seed"),
    ("random:4x4:7", 11, "seed"),
    ("random:4:seed=1", 7, "KxN"),
    ("hadamard:6", 9, "power of 2"),
    ("parity:3:4", 9, "exceeds"),
    ("width:4:5", 0, "exceeds"),
    ("vstack(prefix:8,identity:4)", 0, "domain size"),
    ("file:", 5, "file path"),
    ("kron(prefix:2 prefix:2)", 14, "',' or ')'"),
    (":8", 0, "workload name"),
    ("prefix:99999999999", 0, "entries"),
]


@pytest.mark.parametrize("spec, position, fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed(spec, position, fragment):
    with pytest.raises(WorkloadSpecError) as info:
        parse_workload(spec)
    err = info.value
    msg = str(err)
    assert isinstance(err, WorkloadError) and isinstance(err, ValueError)
    assert repr(spec) in msg
    assert fragment in msg
    assert "accepted forms" in msg and "kron(SPEC,SPEC,...)" in msg
    assert err.spec == spec and err.position == position
    caret_line = msg.splitlines()[3]
    assert caret_line.index("^") - 4 == position


@pytest.mark.parametrize("spec", ["", "   "])
def test_empty(spec):
    with pytest.raises(WorkloadSpecError, match="empty"):
        parse_workload(spec)


def test_not_a_string():
    with pytest.raises(WorkloadSpecError, match="string"):
        parse_workload(16)  # type: ignore[arg-type]


def test_deep_nesting_is_refused():
    spec = "kron(" * 100 + "prefix:2" + ")" * 100
    with pytest.raises(WorkloadSpecError, match="nesting"):
        parse_workload(spec)
    ok = "kron(" * 10 + "prefix:2" + ")" * 10
    assert parse_workload(ok).shape == (2, 2)


def test_accepted_forms_listed():
    for form in ("identity:N[xN...]", "marginals:N1xN2x...:WAY", "random:KxN:seed=S", "file:PATH (.npy, .csv or .mtx)"):
        assert form in ACCEPTED_FORMS


def test_builders_equal_spec_fingerprints():
    assert parse_workload("identity:5").fingerprint() == identity(5).fingerprint()
    assert parse_workload("total:5").fingerprint() == total(5).fingerprint()
    assert parse_workload("hadamard:8").fingerprint() == hadamard(8).fingerprint()
    assert parse_workload("marginals:2x3:1").fingerprint() == marginals([2, 3], 1).fingerprint()
    assert parse_workload("prefix:5").fingerprint() != parse_workload("prefix:6").fingerprint()


def test_as_workload():
    import scipy.sparse as sp

    from workloads import DenseWorkload, SparseWorkload, as_workload

    p = prefix(3)
    assert as_workload(p) is p
    assert as_workload("prefix:3").fingerprint() == p.fingerprint()
    assert isinstance(as_workload(np.eye(2)), DenseWorkload)
    assert isinstance(as_workload([[1, 2]]), DenseWorkload)
    assert isinstance(as_workload(sp.identity(2)), SparseWorkload)
    with pytest.raises(WorkloadError):
        as_workload(None)
    with pytest.raises(WorkloadSpecError):
        as_workload("prefix:")
