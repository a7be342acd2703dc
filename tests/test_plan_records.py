"""The typed records of a plan's manifest (``factorize.plan.records``) and the one check the
readers make of them (``plan.files.require_record``).

* every record's annotations are ones the reader can check against JSON, and ``NotRequired``
  survives at run time (the module must not use string annotations);
* a plan of every kind whose manifest lacks a required key (``certificate.lower``, …) or
  states one with the wrong JSON type is refused when read, with a ``PlanFormatError`` naming
  the key — never a ``KeyError`` later, never a default;
* optional keys may be left out (files written before they existed), and keys a record does
  not declare are ignored;
* the verifiers index required values: a plan built in code without one is refused, not read
  as a default.
"""

from __future__ import annotations

import dataclasses
import types
import typing

import numpy as np
import pytest

from factorize.cli import main
from factorize.io import container
from factorize.kinds import load_plan, save_plan, verify_plan
from factorize.ledger import Ledger
from factorize.plan import records
from factorize.plan.files import PlanFormatError, plan_header, record_problem, write_plan_container
from tests.plan_fixtures import small_plan

_CONTAINER_KEYS = ("format", "schema_version", "arrays", "content_sha256", "compatibility")


def _records() -> list[type]:
    return [v for v in vars(records).values() if typing.is_typeddict(v)]


def _leaves(annotation):
    """The scalar annotations inside ``annotation`` (through unions, lists, dicts, records)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for a in args:
            yield from _leaves(a)
    elif origin is list:
        yield from _leaves(args[0])
    elif origin is dict:
        assert args[0] is str, annotation  # JSON object keys are strings
        yield from _leaves(args[1])
    elif typing.is_typeddict(annotation):
        for a in typing.get_type_hints(annotation).values():
            yield from _leaves(a)
    else:
        yield annotation


def test_every_record_is_checkable_json():
    assert len(_records()) >= 20
    for rec in _records():
        for annotation in typing.get_type_hints(rec).values():
            for leaf in _leaves(annotation):
                assert leaf in (str, int, float, bool, type(None), typing.Any), (rec, leaf)


def test_not_required_survives_at_run_time():
    assert records.CertificateRecord.__optional_keys__ == {"any_mechanism", "laplace_factorization"}
    assert {"upper", "lower", "gap", "residual", "residual_limit", "norm"} <= \
        records.CertificateRecord.__required_keys__
    assert records.Provenance.__required_keys__ == frozenset()


def test_record_problem_names_the_key():
    ok = {"norm": "gamma_f", "upper": 2.0, "lower": 1, "gap": 1.0, "residual": 0.0, "residual_limit": 1e-9}
    assert record_problem(ok, records.CertificateRecord, "certificate") is None
    assert record_problem({**ok, "extra": [1, "x"]}, records.CertificateRecord, "certificate") is None
    missing = {k: v for k, v in ok.items() if k != "lower"}
    assert record_problem(missing, records.CertificateRecord, "certificate") == \
        "certificate.lower is missing (required: a number)"
    assert record_problem({**ok, "upper": "2"}, records.CertificateRecord, "certificate") == \
        "certificate.upper must be a number, not '2'"
    assert "must be a number" in record_problem({**ok, "upper": True}, records.CertificateRecord, "c")
    witness = {"value": 1.0, "bound": "spectral", "measure": "rmse", "binds": "all",
               "witness": {"subset": [0, True], "anchor": None}}
    assert record_problem({**ok, "any_mechanism": witness}, records.CertificateRecord, "certificate") == \
        "certificate.any_mechanism.witness.subset[1] must be an integer, not 'True'"
    assert record_problem({**ok, "any_mechanism": None}, records.CertificateRecord, "certificate") is None


# ---------------------------------------------------------------------------------------
# plan files of every kind


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.structured.build import build_structured_plan

    d = tmp_path_factory.mktemp("records")
    built = {
        "dense": small_plan("prefix:8", "epsilon=0.5"),
        "least_squares": small_plan("prefix:8", "rho=0.1", mechanism="least-squares"),
        "structured": build_structured_plan("marginals:2x3x2:2", "epsilon=0.5,delta=1e-6", norm="gamma_2"),
        "projection": build_projection_plan("parity:4:2", "epsilon=0.5,delta=1e-6", "covariance", n=200),
        "local": build_local_plan("prefix:4", "epsilon=1", n=1000, eta=0.1, alpha=0.5),
    }
    paths = {}
    for name, plan in built.items():
        paths[name] = d / f"{name}.plan"
        save_plan(plan, paths[name])
    return paths


def _forge(src, dst, edit):
    """``src`` rewritten as ``dst`` after ``edit(body)``, with valid digests."""
    head = plan_header(src)
    manifest, arrays = container.read(src, head["format"], head["schema_version"])
    body = {k: v for k, v in manifest.items() if k not in _CONTAINER_KEYS}
    edit(body)
    write_plan_container(dst, head["format"], head["schema_version"], body, arrays)
    return dst


def _drop(section, key):
    def edit(body):
        del body[section][key]
    return edit


def _set(section, key, value):
    def edit(body):
        body[section][key] = value
    return edit


def test_genuine_plans_load_and_verify(plans):
    for name, path in plans.items():
        plan = load_plan(path)
        assert not verify_plan(plan).failures, name


@pytest.mark.parametrize(("kind", "section", "key"), [
    ("dense", "certificate", "lower"),
    ("dense", "certificate", "residual_limit"),
    ("dense", "expected_error", "rmse"),
    ("dense", "bias", "residual_bound"),
    ("dense", "workload", "fingerprint"),
    ("structured", "workload", "spec"),
    ("least_squares", "postprocess", "max_iter"),
    ("structured", "certificate", "lower"),
    ("structured", "certificate", "method"),
    ("structured", "expected_error", "noise_variance"),
    ("structured", "bias", "n_bound"),
    ("projection", "decoder", "gap_tol"),
    ("projection", "bounds", "upper_rmse"),
    ("projection", "expected_error", "rmse_bound"),
    ("local", "randomizer", "variance"),
    ("local", "bounds", "target_alpha"),
    ("local", "bounds", "gamma2_lower"),
])
def test_a_missing_required_key_is_refused_when_read(plans, tmp_path, kind, section, key):
    path = _forge(plans[kind], tmp_path / "f.plan", _drop(section, key))
    with pytest.raises(PlanFormatError, match=rf"{section}\.{key} is missing \(required: "):
        load_plan(path)


@pytest.mark.parametrize(("kind", "section", "key", "value", "expected"), [
    ("dense", "certificate", "upper", "1.5", "a number"),
    ("dense", "bias", "n_bound", 3, "a string"),
    ("dense", "provenance", "solve_seconds", "slow", "a number"),
    ("least_squares", "postprocess", "max_iter", True, "an integer"),
    ("structured", "certificate", "achieved", None, "a number"),
    ("projection", "decoder", "max_iter", 1.5, "an integer"),
    ("local", "bounds", "eta_grid", [0.0, "x"], "a number"),
])
def test_a_key_of_the_wrong_json_type_is_refused_when_read(plans, tmp_path, kind, section, key,
                                                           value, expected):
    path = _forge(plans[kind], tmp_path / "f.plan", _set(section, key, value))
    with pytest.raises(PlanFormatError, match=rf"{section}\.{key}.* must be {expected}"):
        load_plan(path)


def test_run_refuses_a_plan_without_certificate_lower_and_charges_nothing(plans, tmp_path):
    path = _forge(plans["dense"], tmp_path / "f.plan", _drop("certificate", "lower"))
    assert main(["verify", str(path)]) != 0
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "pure_dp", "epsilon": 5.0})
    np.save(tmp_path / "h.npy", np.arange(8))
    assert main(["run", str(path), "--data", str(tmp_path / "h.npy"), "--out", str(tmp_path / "a.csv"),
                 "--ledger", str(L), "--dataset", "d"]) != 0
    assert Ledger.open(L).history("d") == [] and not (tmp_path / "a.csv").exists()


def test_optional_and_unknown_keys(plans, tmp_path):
    def edit(body):
        del body["certificate"]["laplace_factorization"]  # written before the bound existed
        del body["provenance"]
        body["certificate"]["added_by_a_later_writer"] = {"any": ["thing"]}
    plan = load_plan(_forge(plans["dense"], tmp_path / "f.plan", edit))
    assert "laplace_factorization" not in plan.bounds and plan.provenance == {}
    assert not verify_plan(plan).failures
    local = load_plan(_forge(plans["local"], tmp_path / "l.plan", _drop("provenance", "created")))
    assert not verify_plan(local).failures


def test_verifiers_index_required_values(plans):
    """A plan made in code without a required value is refused, never read as a default."""
    dense = load_plan(plans["dense"])
    no_norm = dataclasses.replace(dense, bounds={k: v for k, v in dense.bounds.items() if k != "norm"})
    assert any(f.startswith("manifest") for f in verify_plan(no_norm).failures)
    no_bias = dataclasses.replace(dense, bias=None)  # only a schema-1 file states none
    assert any(f.startswith("bias") for f in verify_plan(no_bias).failures)
    local = load_plan(plans["local"])
    no_alpha = dataclasses.replace(local, bounds={k: v for k, v in local.bounds.items() if k != "target_alpha"})
    assert any(f.startswith("claims") for f in verify_plan(no_alpha).failures)
