"""Verification before any data is read: under-noised and inconsistent plans are refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from factorize.cli.plan import main
from factorize.kinds.factorization.codec import load_plan, save_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.plan.errors import PlanRefused
from tests.plan_fixtures import identity_certificate, small_plan


@pytest.mark.parametrize("privacy,family", [("epsilon=1,delta=1e-6", None), ("rho=0.5", None),
                                            ("epsilon=1", None), ("epsilon=1", "l2_knorm")])
def test_under_noised_plan_refused_with_both_numbers(tmp_path, privacy, family):
    plan = small_plan("prefix:8", privacy, noise_family=family)
    good = plan.noise.scale
    plan = dataclasses.replace(plan, noise=dataclasses.replace(plan.noise, scale=good * 0.97))
    path = tmp_path / "u.plan"
    save_plan(plan, path)  # a well-formed file: only verification can catch it
    with pytest.raises(PlanRefused) as exc:
        verify_plan(load_plan(path), raise_on_failure=True)
    msg = str(exc.value)
    assert "UNDER-NOISED" in msg
    assert f"{good * 0.97:.12g}" in msg and f"{good:.12g}" in msg
    # the CLI refuses it too, before touching the (non-existent) data
    assert main(["verify", str(path)]) == 2
    assert main(["run", str(path), "--data", str(tmp_path / "nope.npy"),
                 "--out", str(tmp_path / "a.csv")]) == 2
    assert not (tmp_path / "a.csv").exists()


def test_understated_sensitivity_refused(tmp_path):
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, noise=dataclasses.replace(plan.noise, base_sensitivity=0.5))
    save_plan(plan, tmp_path / "s.plan")
    check = verify_plan(load_plan(tmp_path / "s.plan"))
    assert not check.passed
    assert any("sensitivity" in f for f in check.failures)


def test_scaled_strategy_needs_more_noise(tmp_path):
    """Doubling A (and halving R) doubles the sensitivity: the old noise is refused."""
    from factorize.factorization import Factorization
    from factorize.planner.certificate import Certificate

    plan = small_plan("prefix:8")
    cert = identity_certificate("prefix:8")
    f = cert.factorization
    plan = dataclasses.replace(plan, certificate=Certificate(
        "gamma_f", Factorization((f.R_factors[0] / 2,), (f.A_factors[0] * 2,)), cert.witness))
    save_plan(plan, tmp_path / "d.plan")
    check = verify_plan(load_plan(tmp_path / "d.plan"))
    assert not check.passed and check.recomputed_sensitivity == pytest.approx(2.0)


def test_wrong_workload_refused(tmp_path):
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, workload=dict(plan.workload, spec="identity:8"))
    save_plan(plan, tmp_path / "w.plan")
    check = verify_plan(load_plan(tmp_path / "w.plan"))
    assert not check.passed and "fingerprint DIFFERS" in check.failures[0]


def test_residual_mismatch_refused(tmp_path):
    from factorize.factorization import Factorization
    from factorize.planner.certificate import Certificate

    plan = small_plan("prefix:8")
    R = plan.factorization.R_factors[0].copy()
    R[3, 2] += 1e-3
    plan = dataclasses.replace(plan, certificate=Certificate(
        "gamma_f", Factorization((R,), plan.factorization.A_factors), plan.certificate.witness))
    save_plan(plan, tmp_path / "r.plan")
    check = verify_plan(load_plan(tmp_path / "r.plan"))
    assert not check.passed and any("W = R·A" in f for f in check.failures)


def test_probe_residual_check_for_large_dense(monkeypatch):
    import factorize.kinds.factorization.verify as checks

    monkeypatch.setattr(checks, "EXACT_RESIDUAL_FLOPS", 0)
    plan = small_plan("prefix:16")  # its bias bound is then the probes' limit
    ok = verify_plan(plan)
    detail = next(c["detail"] for c in ok.checks if c["name"] == "W = R·A")
    assert ok.passed and "probes" in detail
    from factorize.factorization import Factorization
    from factorize.planner.certificate import Certificate

    R = plan.factorization.R_factors[0].copy()
    R[5, 1] += 1e-6
    plan = dataclasses.replace(plan, certificate=Certificate(
        "gamma_f", Factorization((R,), plan.factorization.A_factors), plan.certificate.witness))
    assert not verify_plan(plan).passed


def test_domain_size_must_match():
    from factorize.kinds.factorization.build import build_plan
    from factorize.plan.errors import PlanError
    from workloads import Domain

    with pytest.raises(PlanError, match="N=8"):
        build_plan("prefix:8", "rho=1", domain=Domain(["a", "b"], [2, 3]),
                   certificate=identity_certificate("prefix:8"))


def test_cli_plan_inspect_verify(tmp_path, capsys):
    out = tmp_path / "m.plan"
    assert main(["plan", "--workload", "marginals:2x3:1", "--privacy", "epsilon=1,delta=1e-6",
                 "--domain", "sex=2,race=3", "--postprocess", "nonneg", "--out", str(out)]) == 0
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sex=2, race=3" in text and "discrete_gaussian" in text and "postprocess nonneg" in text
    assert main(["verify", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["plan", "--workload", "prefix:8", "--privacy", "epsilon=1,delta=1e-6",
                 "--domain", "a=3", "--out", str(tmp_path / "x.plan")]) == 2
    assert "N=8" in capsys.readouterr().err
    assert main(["plan", "--workload", "prefix:8", "--privacy", "epsilon=-1",
                 "--out", str(tmp_path / "y.plan")]) == 2
    assert not (tmp_path / "x.plan").exists() and not (tmp_path / "y.plan").exists()


def test_domain_file_with_attributes(tmp_path):
    import json

    from factorize.cli.common import parse_domain

    f = tmp_path / "d.json"
    f.write_text(json.dumps({"a": 2, "b": 3, "c": 4}))
    dom = parse_domain(str(f), "c,a")
    assert dom.attributes == ("c", "a") and dom.sizes == (4, 2)
    assert np.prod(parse_domain("x=2,y=5", None).sizes) == 10
