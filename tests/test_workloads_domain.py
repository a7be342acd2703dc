"""``workloads.Domain``: construction, cell indexing (vs np.ravel_multi_index), privacy of messages."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.raw_adult import ADULT_DOMAIN
from workloads import Domain, DomainError, KronWorkload, marginals, prefix, total


def test_basic_properties():
    d = Domain(["a", "b", "c"], [2, 3, 4])
    assert d.attributes == ("a", "b", "c")
    assert d.sizes == d.shape == (2, 3, 4)
    assert d.size == 24 and type(d.size) is int
    assert len(d) == 3 and d["b"] == 3 and "c" in d and "z" not in d
    assert d.to_dict() == {"a": 2, "b": 3, "c": 4}
    assert repr(d) == "Domain({'a': 2, 'b': 3, 'c': 4})"
    assert d.axes(["c", "a"]) == (2, 0)


def test_from_dict_preserves_order_and_equality():
    d = Domain.from_dict({"z": 5, "a": 2})
    assert d.attributes == ("z", "a")
    assert d == Domain(["z", "a"], [5, 2])
    assert d != Domain(["a", "z"], [2, 5])
    assert hash(d) == hash(Domain(["z", "a"], [np.int64(5), 2]))
    assert d != "not a domain"


def test_huge_size_is_exact():
    d = Domain([f"x{i}" for i in range(20)], [10] * 20)
    assert d.size == 10**20


def test_from_json(tmp_path):
    p = tmp_path / "dom.json"
    p.write_text(json.dumps({"age": 85, "sex": 2, "race": 5}))
    d = Domain.from_json(p)
    assert d.attributes == ("age", "sex", "race") and d.sizes == (85, 2, 5)
    p.write_text('{"a": 2, "a": 3}')
    with pytest.raises(DomainError, match="repeats"):
        Domain.from_json(p)
    p.write_text("[1, 2]")
    with pytest.raises(DomainError, match="JSON object"):
        Domain.from_json(p)
    p.write_text("{not json")
    with pytest.raises(DomainError, match="not valid JSON"):
        Domain.from_json(p)
    p.write_text('{"a": 2.5}')
    with pytest.raises(DomainError):
        Domain.from_json(p)
    with pytest.raises(DomainError, match="cannot read"):
        Domain.from_json(tmp_path / "missing.json")


@pytest.mark.skipif(not os.path.exists(ADULT_DOMAIN), reason="shared adult data not present")
def test_adult_domain():
    d = Domain.from_json(ADULT_DOMAIN)
    assert d.attributes[0] == "age" and d.attributes[-1] == "income>50K"
    assert len(d) == 14 and d.size == int(np.prod(np.array(d.sizes, dtype=object)))


@pytest.mark.parametrize(
    "attrs, sizes, fragment",
    [
        (["a", "a"], [2, 2], "duplicate"),
        (["a", "b"], [2], "sizes"),
        ([], [], "at least one"),
        (["a"], [0], "positive"),
        (["a"], [-2], "positive"),
        (["a"], [2.0], "integer"),
        (["a"], [True], "integer"),
        ([""], [2], "non-empty"),
        ([3], [2], "strings"),
        ("ab", [2, 2], "single string"),
    ],
)
def test_invalid_domains(attrs, sizes, fragment):
    with pytest.raises(DomainError, match=fragment):
        Domain(attrs, sizes)


def test_index_matches_ravel_multi_index_and_round_trips():
    rng = np.random.default_rng(0)
    d = Domain(["a", "b", "c", "d"], [3, 1, 5, 4])
    records = np.column_stack([rng.integers(0, s, size=200) for s in d.sizes])
    cells = d.index(records)
    assert cells.dtype == np.int64 and cells.shape == (200,)
    np.testing.assert_array_equal(cells, np.ravel_multi_index(records.T, d.sizes))
    np.testing.assert_array_equal(d.unindex(cells), records)
    all_cells = np.arange(d.size)
    np.testing.assert_array_equal(d.index(d.unindex(all_cells)), all_cells)
    assert d.index(np.zeros((0, 4), dtype=np.int64)).shape == (0,)


def test_index_accepts_integral_floats_and_unsigned():
    d = Domain(["a", "b"], [3, 4])
    np.testing.assert_array_equal(d.index(np.array([[2.0, 3.0], [0.0, 1.0]])), [11, 1])
    np.testing.assert_array_equal(d.index(np.array([[2, 3]], dtype=np.uint8)), [11])


def test_index_consistent_with_kron_ordering():
    rng = np.random.default_rng(1)
    d = Domain(["a", "b"], [3, 4])
    records = np.column_stack([rng.integers(0, s, size=50) for s in d.sizes])
    h = d.histogram(records)
    assert h.sum() == 50
    table = np.zeros(d.shape)
    for r in records:
        table[tuple(r)] += 1
    np.testing.assert_array_equal(h, table.ravel())
    # marginal over attribute "a" via Kron(I_3, 1ᵀ_4) equals counts of attribute a
    w_a = marginals(d, 1).blocks[0]
    np.testing.assert_array_equal(w_a.matvec(h), np.bincount(records[:, 0], minlength=3))
    # prefix along b, total along a
    w = KronWorkload([total(3), prefix(4)])
    np.testing.assert_array_equal(w.matvec(h), np.cumsum(np.bincount(records[:, 1], minlength=4)))


def test_huge_domain_index_object_dtype():
    d = Domain([f"x{i}" for i in range(20)], [10] * 20)  # N = 10**20 > 2**63
    records = np.array([[9] * 20, [0] * 19 + [7], [1] + [0] * 19])
    cells = d.index(records)
    assert cells.dtype == object
    assert list(cells) == [10**20 - 1, 7, 10**19]
    np.testing.assert_array_equal(d.unindex(cells), records)


def test_record_errors_never_leak_values():
    d = Domain(["age", "sex"], [85, 2])
    secret = 987654
    records = np.array([[secret, 0], [30, 1], [secret, 5], [-1, 1]])
    with pytest.raises(DomainError) as info:
        d.index(records)
    msg = str(info.value)
    assert str(secret) not in msg and "-1" not in msg
    assert "'age'" in msg and "2 rows" not in msg and "3 rows" in msg
    assert "'sex'" in msg and "1 row" in msg
    with pytest.raises(DomainError) as info:
        d.index(np.array([[12.5, 0.0], [3.0, 1.0]]))
    assert "12.5" not in str(info.value) and "'age'" in str(info.value) and "1 row" in str(info.value)
    with pytest.raises(DomainError, match="3 columns"):
        d.index(np.zeros((4, 3), dtype=int))
    with pytest.raises(DomainError, match="2-D"):
        d.index(np.zeros(2, dtype=int))
    with pytest.raises(DomainError, match="integer"):
        d.index(np.array([["a", "b"]]))


def test_unindex_errors():
    d = Domain(["a", "b"], [3, 4])
    with pytest.raises(DomainError, match="1 of 2 cells"):
        d.unindex(np.array([3, 12]))
    with pytest.raises(DomainError, match="integers"):
        d.unindex(np.array([0.5]))
    with pytest.raises(DomainError, match="1-D"):
        d.unindex(np.zeros((2, 2), dtype=int))


def test_project():
    d = Domain(["a", "b", "c"], [2, 3, 4])
    assert d.project(["c", "a"]) == Domain(["c", "a"], [4, 2])
    assert d.project("b") == Domain(["b"], [3])
    with pytest.raises(DomainError, match="unknown"):
        d.project(["a", "zz"])
    with pytest.raises(DomainError, match="duplicate"):
        d.project(["a", "a"])
    with pytest.raises(DomainError):
        d.project([])


@pytest.mark.parametrize("name", ["a\nb", "a\rb", "a\tb", "a\x00b", "a\u2028b", "a\u2029b", "\x7f"])
def test_attribute_names_with_control_characters_or_line_breaks_are_refused(name: str) -> None:
    # a CSV header cannot carry them faithfully (found by the surface fuzzer: a schema accepted
    # "a\nb", then a correctly quoted header with that name was read as no records)
    from workloads import Domain, DomainError

    with pytest.raises(DomainError, match="control character or line break"):
        Domain([name, "c"], [2, 3])
    Domain(["a b", "é", "=x"], [2, 3, 4])  # spaces, letters and formula characters stay allowed
