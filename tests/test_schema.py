"""``workloads.schema``: the public domain schema -- parsing every kind of attribute, codes and
labels, bad schemas refused with messages naming the field to fix, the version check, drafts
refused until reviewed, and the Domain it produces (``docs/schema.md``)."""

from __future__ import annotations

import copy
import json

import pytest

from workloads import Domain, DomainError
from workloads.schema import (
    MISSING,
    OUTSIDE,
    UNPARSED,
    DomainSchema,
    SchemaError,
    SchemaTypeError,
    load_schema,
    read_domain,
)


def doc(*attributes, **top):
    return {"format": "factorize-domain-schema", "version": 1, "attributes": list(attributes), **top}


SEX = {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]}
AGE = {"name": "age", "kind": "integer", "min": 17, "max": 90, "outside": "clamp"}
EDU = {"name": "education", "kind": "categorical", "values": [1, 2, 5, 10]}
RICH = {"name": "income>50K", "kind": "categorical", "values": [False, True]}
INCOME = {"name": "income", "kind": "numeric", "edges": [0, 20000, 50000.5, 1e6], "closed": "left",
          "outside": "catch_all", "catch_all_label": "unknown"}
LOSS = {"name": "loss", "kind": "numeric", "edges": [-1.5, 0, 2.25], "closed": "right"}
COUNTRY = {"name": "country", "kind": "categorical", "values": ["US", "FR"], "outside": "catch_all"}


def full() -> DomainSchema:
    return DomainSchema.from_dict(doc(SEX, AGE, EDU, RICH, INCOME, LOSS, COUNTRY))


# -- every kind ---------------------------------------------------------------------------------


def test_every_kind_sizes_and_labels():
    s = full()
    assert s.names == ("sex", "age", "education", "income>50K", "income", "loss", "country")
    assert s.sizes == (2, 74, 4, 2, 4, 2, 3)
    assert s.labels("sex") == ["Female", "Male"]
    age = s.labels("age")
    assert age[0] == "<=17" and age[1] == "18" and age[-2] == "89" and age[-1] == ">=90"  # clamped ends
    assert s.labels("education") == ["1", "2", "5", "10"]
    assert s.labels("income>50K") == ["false", "true"]
    assert s.labels("income") == ["[0, 20000)", "[20000, 50000.5)", "[50000.5, 1000000)", "unknown"]
    assert s.labels("loss") == ["(-1.5, 0]", "(0, 2.25]"]
    assert s.labels("country") == ["US", "FR", "other"]  # default catch-all label


def test_domain_from_schema_is_the_planner_domain():
    s = full()
    d = s.domain()
    assert isinstance(d, Domain) and d.schema is s
    assert d.attributes == s.names and d.sizes == s.sizes
    assert d.labels("income") == s.labels("income")
    p = d.project(["loss", "sex"])
    assert p.attributes == ("loss", "sex") and p.sizes == (2, 2)
    assert p.schema.names == ("loss", "sex") and p.labels("loss") == s.labels("loss")
    # equal names and sizes but no schema: a different domain (records are codes there)
    assert Domain(d.attributes, d.sizes) != d and Domain(d.attributes, d.sizes).schema is None
    assert Domain(d.attributes, d.sizes).labels("sex") == ["0", "1"]
    assert DomainSchema.from_dict(doc(SEX, AGE, EDU, RICH, INCOME, LOSS, COUNTRY)).domain() == d


def test_round_trip_and_files(tmp_path):
    s = full()
    again = DomainSchema.from_dict(json.loads(s.to_json()))
    assert again == s and again.digest() == s.digest()
    path = tmp_path / "schema.json"
    s.to_json(path)
    assert load_schema(path) == s
    d = read_domain(path)  # the --domain path: a schema file gives the domain of its codes
    assert d.schema == s and d.sizes == s.sizes
    with pytest.raises(DomainError, match="read_domain"):  # Domain.from_json reads {name: size} only
        Domain.from_json(path)
    # the {name: size} form keeps working
    sizes = tmp_path / "sizes.json"
    sizes.write_text('{"a": 2, "b": 5}')
    assert Domain.from_json(sizes) == Domain(["a", "b"], [2, 5]) and Domain.from_json(sizes).schema is None
    sizes.write_text('{"format": 3, "version": 2}')  # attributes that happen to share a schema's field names
    assert Domain.from_json(sizes) == Domain(["format", "version"], [3, 2])


def test_one_value_and_one_bin_clamped():
    s = DomainSchema.from_dict(doc({"name": "x", "kind": "integer", "min": 3, "max": 3, "outside": "clamp"},
                                   {"name": "y", "kind": "numeric", "edges": [0, 1], "closed": "left",
                                    "outside": "clamp"}))
    assert s.labels("x") == ["all integers"] and s.labels("y") == ["(-inf, inf)"]
    assert s["x"].encode("-7", "text") == 0 and s["y"].encode(1e300, "float") == 0


# -- the reference mapping ----------------------------------------------------------------------


def test_reference_mapping_rules():
    s = full()
    sex, age, edu, rich, inc, loss, ctry = (s[n] for n in s.names)
    assert sex.encode(" Male ", "text") == 1 and sex.encode("male", "text") == OUTSIDE
    assert sex.encode("", "text") == MISSING and sex.encode(None, "text") == MISSING
    assert age.encode("40", "text") == 23 and age.encode("40.00", "text") == 23 and age.encode("+40", "text") == 23
    assert age.encode("4e1", "text") == UNPARSED and age.encode("40.5", "text") == UNPARSED
    assert age.encode("3", "text") == 0 and age.encode("900", "text") == 73  # clamped
    assert age.encode("-" + "9" * 30, "text") == 0 and age.encode("9" * 30, "text") == 73
    assert age.encode(40.0, "float") == 23 and age.encode(float("inf"), "float") == UNPARSED
    assert age.encode(float("nan"), "float") == MISSING
    assert edu.encode(5, "integer") == 2 and edu.encode(3, "integer") == OUTSIDE and edu.encode("10", "text") == 3
    assert rich.encode("TRUE", "text") == 1 and rich.encode("yes", "text") == UNPARSED
    assert rich.encode(False, "boolean") == 0
    assert inc.encode("20000", "text") == 1 and inc.encode(19999.99, "float") == 0
    assert inc.encode(1e6, "float") == 3 and inc.encode("abc", "text") == 3 and inc.encode(None, "float") == 3
    assert loss.encode(0, "integer") == 0 and loss.encode(1e-300, "float") == 1
    assert loss.encode(-1.5, "float") == OUTSIDE and loss.encode(2.25, "float") == 1
    assert ctry.encode("DE", "text") == 2 and ctry.encode(None, "text") == 2  # catch-all takes missing too


@pytest.mark.parametrize("attr,type_class,needle", [
    (SEX, "float", "store the column as text"),
    (RICH, "integer", "list integer values [0, 1]"),
    (LOSS, "boolean", "holds booleans"),
    (SEX, "date", "text, integers"),
])
def test_column_types_that_cannot_hold_the_values(attr, type_class, needle):
    a = DomainSchema.from_dict(doc(attr)).attributes[0]
    with pytest.raises(SchemaTypeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        a.encode("1", type_class)


# -- bad schemas --------------------------------------------------------------------------------


def bad(**changes):
    attr = copy.deepcopy(changes.pop("attr", AGE))
    for k, v in changes.items():
        if v is None:
            attr.pop(k, None)
        else:
            attr[k] = v
    return doc(attr)


@pytest.mark.parametrize("document,needle", [
    ([1, 2], "must be a JSON object"),
    ({"version": 1, "attributes": [AGE]}, '"format" must be'),
    (doc(AGE, version=2), "version 2 is not supported; this factorize reads version 1"),
    (doc(AGE, version="1"), "version '1' is not supported"),
    (doc(AGE, extra=1), "unknown field(s) ['extra']"),
    (doc(), '"attributes" must be a non-empty list'),
    (doc(AGE, AGE), "more than once"),
    (bad(name=""), '"name" must be a non-empty string'),
    (bad(kind="ordinal"), '"kind" must be one of'),
    (bad(minimum=3), "unknown field(s) ['minimum']"),
    (bad(min=None), '"min" must be an integer'),
    (bad(min=1.5), '"min" must be an integer'),
    (bad(max=10), '"max" (10) is below "min" (17)'),
    (bad(max=2**40), "bin it as a numeric attribute"),
    (bad(outside="ignore"), '"outside" must be one of'),
    (bad(attr=SEX, outside="clamp"), "needs an ordered attribute"),
    (bad(catch_all_label="x", outside="refuse"), '"outside" is not "catch_all"'),
    (bad(attr=SEX, values=[]), '"values" must be a non-empty list'),
    (bad(attr=SEX, values=["a", 1]), "mixes integer and string"),
    (bad(attr=SEX, values=[1.5]), "strings, integers or booleans only"),
    (bad(attr=SEX, values=[None]), "strings, integers or booleans only"),
    (bad(attr=SEX, values=["a", "a"]), "more than once"),
    (bad(attr=SEX, values=[" a"]), "leading/trailing spaces"),
    (bad(attr=SEX, values=[""]), "empty"),
    (bad(attr=COUNTRY, catch_all_label="US"), "also the label of a value"),
    (bad(attr=INCOME, edges=[0]), "at least two numbers"),
    (bad(attr=INCOME, edges=[0, 5, 5]), "strictly increasing"),
    (bad(attr=INCOME, edges=[0, "5"]), "finite number"),
    (bad(attr=INCOME, edges=[0, 2**60]), "magnitude at most 2**53"),
    (bad(attr=INCOME, closed=None), '"closed" must be stated'),
    (bad(attr=INCOME, closed="both"), '"closed" must be stated'),
])
def test_bad_schemas_are_refused_with_the_field_to_fix(document, needle):
    with pytest.raises(SchemaError) as info:
        DomainSchema.from_dict(document)
    assert needle in str(info.value), str(info.value)
    assert "Error" not in str(info.value) and "kwarg" not in str(info.value)


def test_bad_files(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"format": "factorize-domain-schema", "format": "x"}')
    with pytest.raises(SchemaError, match="repeats a key"):
        load_schema(p)
    p.write_text('{"format": "factorize-domain-schema", "version": 1, "attributes": [{"name": "x", '
                 '"kind": "numeric", "edges": [0, Infinity], "closed": "left"}]}')
    with pytest.raises(SchemaError, match="Infinity is not valid JSON"):
        load_schema(p)
    p.write_text("{")
    with pytest.raises(DomainError, match="not valid JSON"):
        read_domain(p)
    # a {name: {...}} file is neither form: say what a schema needs
    p.write_text('{"a": {"kind": "integer"}}')
    with pytest.raises(DomainError, match='"format": "factorize-domain-schema"'):
        read_domain(p)
    # a schema document missing its format is refused as a schema, not read as sizes
    p.write_text(json.dumps({"version": 1, "attributes": [AGE]}))
    with pytest.raises(SchemaError, match='"format" must be'):
        read_domain(p)


def test_a_draft_is_refused_until_reviewed(tmp_path):
    d = doc(AGE, drafted_from_data={"file": "people.csv", "warning": "NOT PUBLIC"})
    with pytest.raises(SchemaError) as info:
        DomainSchema.from_dict(d)
    msg = str(info.value)
    assert "people.csv" in msg and "NOT protected" in msg and "delete the \"drafted_from_data\" field" in msg
    assert DomainSchema.from_dict(d, allow_draft=True).sizes == (74,)
    p = tmp_path / "draft.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match="--domain"):
        read_domain(p)
    del d["drafted_from_data"]
    p.write_text(json.dumps(d))
    assert read_domain(p).sizes == (74,)


def test_domain_checks_the_schema_it_carries():
    s = full()
    with pytest.raises(DomainError, match="differ from the domain's"):
        Domain(s.names, [2] * len(s), schema=s)
    with pytest.raises(DomainError, match="must be a DomainSchema"):
        Domain(["a"], [2], schema={"a": 2})
