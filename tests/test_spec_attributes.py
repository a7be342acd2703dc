"""Workloads named by the domain's attributes: ``marginals[sex,race]:2``,
``kron(prefix[age],identity[sex])`` … equal the size-typed specs (normalized spec, matrix
fingerprint), project the domain onto the named attributes, and refuse what cannot be
resolved with messages naming the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workloads import Domain, WorkloadSpecError, parse_workload
from workloads.schema import DomainSchema, read_domain
from workloads.spec import resolve_workload_spec

ADULT = Domain(["age", "workclass", "sex", "race", "relationship", "income>50K", "hours-per-week"],
               [85, 9, 2, 5, 6, 2, 99])


@pytest.mark.parametrize("named,sized,attributes", [
    ("marginals[sex,race,relationship,income>50K]:2", "marginals:2x5x6x2:2",
     ("sex", "race", "relationship", "income>50K")),
    ("marginals_upto[ sex , race ]:1", "marginals_upto:2x5:1", ("sex", "race")),
    ("kron(prefix[age],identity[sex])", "kron(prefix:85,identity:2)", ("age", "sex")),
    ("prefix[age,hours-per-week]", "prefix:85x99", ("age", "hours-per-week")),
    ("identity[race]", "identity:5", ("race",)),
    ("total[race]", "total:5", ("race",)),
    ("allrange[relationship]", "allrange:6", ("relationship",)),
    ("width[age]:5", "width:85:5", ("age",)),
    ("vstack(kron(prefix[age],total[sex]),kron(identity[age],identity[sex]))",
     "vstack(kron(prefix:85,total:2),kron(identity:85,identity:2))", ("age", "sex")),
    ("scale(2.5,marginals[sex,race]:1)", "scale(2.5,marginals:2x5:1)", ("sex", "race")),
    ('kron(identity["income>50K"],total[race])', "kron(identity:2,total:5)", ("income>50K", "race")),
    ("kron(marginals[sex,race]:1,prefix[age])", "kron(marginals:2x5:1,prefix:85)", ("sex", "race", "age")),
])
def test_named_specs_equal_sized_specs(named, sized, attributes):
    spec, dom = resolve_workload_spec(named, ADULT)
    assert spec == parse_workload(sized).spec
    assert dom.attributes == attributes and dom == ADULT.project(list(attributes))
    a, b = parse_workload(named, domain=ADULT), parse_workload(sized)
    assert a.shape == b.shape and a.fingerprint() == b.fingerprint()


def test_unnamed_specs_pass_unchanged():
    for spec in ("prefix:8", "kron(prefix:4,identity:2)", " marginals:2x3:1 "):
        assert resolve_workload_spec(spec, ADULT) == (spec, ADULT)
        assert resolve_workload_spec(spec, None) == (spec, None)


def test_schema_travels_with_the_projected_domain(tmp_path):
    schema = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "age", "kind": "integer", "min": 17, "max": 101},
        {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
        {"name": "race", "kind": "categorical", "values": ["a", "b", "c", "d", "e"]}]})
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema.to_dict()))
    spec, dom = resolve_workload_spec("kron(prefix[age],identity[sex])", read_domain(path))
    assert spec == "kron(prefix:85,identity:2)"
    assert dom.schema == schema.project(["age", "sex"]) and dom.labels("sex") == ["Female", "Male"]


def test_named_plan_equals_sized_plan():
    from factorize.kinds.factorization.build import build_plan

    spec, dom = resolve_workload_spec("kron(prefix[sex],identity[race])", ADULT)
    a = build_plan(spec, "epsilon=1,delta=1e-6", domain=dom)
    b = build_plan("kron(prefix:2,identity:5)", "epsilon=1,delta=1e-6", domain=Domain(["sex", "race"], [2, 5]))
    ma, mb = a.manifest(), b.manifest()
    for key in ("workload", "domain", "noise", "certificate", "expected_error"):
        assert ma[key] == mb[key], key
    for Ra, Rb in zip(a.certificate.factorization.R_factors, b.certificate.factorization.R_factors, strict=True):
        np.testing.assert_array_equal(Ra, Rb)


@pytest.mark.parametrize("spec,needle", [
    ("prefix[agee]", "unknown attribute(s) ['agee']; the domain (--domain) has age, workclass"),
    ("kron(prefix[age],identity:2)", "name every part's attributes"),
    ("vstack(prefix[age],identity[sex])", "every part must name the same attributes"),
    ("kron(prefix[age],identity[age])", "in more than one factor"),
    ("identity[sex,sex]", "names an attribute twice"),
    ("width[age,sex]:2", "width[ATTR]:W takes one attribute"),
    ("prefix[age", "expected ',' or ']'"),
    ("prefix[]", "expected an attribute name"),
    ('prefix["age]', "unterminated quoted attribute name"),
    ("hadamard[age]", "expected ':' after 'hadamard'"),
    ("marginals[sex,race]:3", "marginal way 3 exceeds the number of attributes"),
])
def test_bad_named_specs(spec, needle):
    with pytest.raises(WorkloadSpecError) as info:
        resolve_workload_spec(spec, ADULT)
    assert needle in str(info.value), str(info.value)


def test_named_spec_without_a_domain_names_the_flag():
    for call in (lambda: parse_workload("marginals[sex,race]:2"),
                 lambda: resolve_workload_spec("marginals[sex,race]:2", None)):
        with pytest.raises(WorkloadSpecError) as info:
            call()
        assert "--domain" in str(info.value) and "marginals:N" not in str(info.value).splitlines()[0][:20]
