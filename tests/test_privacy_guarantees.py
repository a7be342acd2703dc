"""Tests for factorize.privacy.guarantees."""

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from factorize.privacy.guarantees import (
    ZCDP,
    ApproxDP,
    Neighbouring,
    PrivacyError,
    PureDP,
    guarantee_from_dict,
    parse_guarantee,
)


def test_privacy_error_is_value_error():
    assert issubclass(PrivacyError, ValueError)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ApproxDP(0, 1e-6),
        lambda: ApproxDP(-1, 1e-6),
        lambda: ApproxDP(math.inf, 1e-6),
        lambda: ApproxDP(math.nan, 1e-6),
        lambda: ApproxDP(1, 0),
        lambda: ApproxDP(1, 1),
        lambda: ApproxDP(1, 1.5),
        lambda: ApproxDP(1, -1e-9),
        lambda: ApproxDP(1, math.nan),
        lambda: ApproxDP(True, 1e-6),
        lambda: ApproxDP("1", 1e-6),
        lambda: ZCDP(0),
        lambda: ZCDP(-0.1),
        lambda: ZCDP(math.inf),
        lambda: PureDP(0),
        lambda: PureDP(math.nan),
        lambda: PureDP(None),
    ],
)
def test_invalid_parameters_raise(make):
    with pytest.raises(PrivacyError):
        make()


def test_valid_parameters_are_floats_and_frozen():
    g = ApproxDP(np.float64(0.5), Fraction(1, 1000))
    assert g.epsilon == 0.5 and g.delta == 0.001
    assert type(g.epsilon) is float and type(g.delta) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 2.0  # frozen
    assert ZCDP(2).rho == 2.0
    assert PureDP(3).epsilon == 3.0
    assert hash(ApproxDP(1, 1e-6)) == hash(ApproxDP(1.0, 1e-6))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("epsilon=1,delta=1e-6", ApproxDP(1, 1e-6)),
        ("  epsilon = 1 ,  delta = 1e-6 ", ApproxDP(1, 1e-6)),
        ("delta=1e-6;epsilon=0.5", ApproxDP(0.5, 1e-6)),
        ("eps=2 delta=.001", ApproxDP(2, 0.001)),
        ("EPSILON=1,DELTA=1E-9", ApproxDP(1, 1e-9)),
        ("ε=1, δ=1e-5", ApproxDP(1, 1e-5)),
        ("rho=0.5", ZCDP(0.5)),
        (" rho = 2 ", ZCDP(2)),
        ("ρ=0.1", ZCDP(0.1)),
        ("epsilon=1", PureDP(1)),
        ("eps=0.25", PureDP(0.25)),
    ],
)
def test_parse_guarantee(text, expected):
    assert parse_guarantee(text) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("epsilon", "key=value"),
        ("epsilon=1,delta", "key=value"),
        ("epsilon=1=2", "key=value"),
        ("foo=1", "unknown key"),
        ("epsilon=1,epsilon=2", "twice"),
        ("epsilon=abc", "not a finite number"),
        ("epsilon=nan", "not a finite number"),
        ("epsilon=inf", "not a finite number"),
        ("epsilon=1e999", "finite"),
        ("epsilon=1,rho=0.5", "expected"),
        ("delta=1e-6", "expected"),
        ("epsilon=1,delta=0", "0 < delta < 1"),
        ("epsilon=-1", "> 0"),
        ("rho=0", "> 0"),
    ],
)
def test_parse_guarantee_errors(text, fragment):
    with pytest.raises(PrivacyError, match=fragment):
        parse_guarantee(text)


def test_parse_guarantee_rejects_non_string():
    with pytest.raises(PrivacyError):
        parse_guarantee(1.0)


@pytest.mark.parametrize("g", [ApproxDP(1.5, 1e-7), ZCDP(0.3), PureDP(0.1)])
def test_dict_round_trip_through_json(g):
    d = json.loads(json.dumps(g.to_dict()))
    assert guarantee_from_dict(d) == g
    assert type(g).from_dict(d) == g
    assert parse_guarantee(str(g)) == g


def test_from_dict_errors():
    with pytest.raises(PrivacyError, match="unknown guarantee type"):
        guarantee_from_dict({"type": "renyi", "alpha": 2})
    with pytest.raises(PrivacyError, match="missing"):
        guarantee_from_dict({"type": "approx_dp", "epsilon": 1})
    with pytest.raises(PrivacyError, match="unexpected"):
        guarantee_from_dict({"type": "zcdp", "rho": 1, "delta": 0.1})
    with pytest.raises(PrivacyError, match="expected 'pure_dp'"):
        PureDP.from_dict({"type": "zcdp", "rho": 1})
    with pytest.raises(PrivacyError):
        guarantee_from_dict([("type", "zcdp")])


def test_neighbouring():
    assert Neighbouring.ADD_REMOVE.value == "add/remove one record"
    assert Neighbouring.REPLACE.value == "replace one record"
    for text in ["add_remove", "ADD/REMOVE", "add-remove", "add/remove one record", " Add Remove "]:
        assert Neighbouring.parse(text) is Neighbouring.ADD_REMOVE
    for text in ["replace", "REPLACE", "replace one record", "substitution"]:
        assert Neighbouring.parse(text) is Neighbouring.REPLACE
    assert Neighbouring.parse(Neighbouring.REPLACE) is Neighbouring.REPLACE
    assert Neighbouring.ADD_REMOVE.key == "add_remove"
    with pytest.raises(PrivacyError):
        Neighbouring.parse("swap two")
    with pytest.raises(PrivacyError):
        Neighbouring.parse(3)
