"""Every reader of a plan refuses what ``verify`` refuses.

* ``local client`` / ``local simulate`` randomized with a local plan whose η (10⁶) ``local
  verify`` refuses: they now run the same verification;
* ``noise.sensitivity_exact`` (dense plans) and ``provenance.sensitivity_exact`` (structured
  plans) were accepted when flipped: the verifier re-derives it.
"""

from __future__ import annotations

import csv
import dataclasses

import pytest

from factorize import kinds
from factorize.cli import main
from factorize.kinds.local.build import build_local_plan
from factorize.kinds.local.plan import LocalPlan, save_local_plan, verify_local_plan


@pytest.fixture(scope="module")
def local_plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("local")
    good = build_local_plan("prefix:8", "epsilon=1", n=1000, eta=0.1)
    save_local_plan(good, d / "ok.lplan")
    save_local_plan(LocalPlan(**{**good.__dict__, "eta": 1e6}), d / "eta.lplan")
    with open(d / "r.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["x0"])
        w.writerows([[i % 8] for i in range(20)])
    return d


def test_verify_refuses_the_forged_eta(local_plans):
    failures = verify_local_plan(kinds.load_plan(local_plans / "eta.lplan"))
    assert any(f.startswith("eta:") for f in failures), failures
    assert main(["local", "verify", str(local_plans / "eta.lplan")]) == 2


def test_client_and_simulate_refuse_what_verify_refuses(local_plans, capsys):
    d = local_plans
    assert main(["local", "client", str(d / "eta.lplan"), "--record", "x0=1"]) == 2
    err = capsys.readouterr()
    assert "η = 1e+06" in err.err and '"message"' not in err.out
    out = d / "m.parquet"
    assert main(["local", "simulate", str(d / "eta.lplan"), "--data", str(d / "r.csv"),
                 "--out", str(out), "--seed", "1"]) == 2
    assert not out.exists()
    # the untampered plan still works
    assert main(["local", "client", str(d / "ok.lplan"), "--record", "x0=1"]) == 0
    assert main(["local", "simulate", str(d / "ok.lplan"), "--data", str(d / "r.csv"),
                 "--out", str(out), "--seed", "1"]) == 0 and out.exists()


def test_dense_plan_sensitivity_exact_flag_is_verified(tmp_path):
    from factorize import build_plan, save_plan
    from factorize.kinds.factorization.verify import verify_plan

    plan = build_plan("prefix:8", "epsilon=1,delta=1e-6")
    assert plan.sensitivity_exact is True and verify_plan(plan).passed
    plan = dataclasses.replace(plan, sensitivity_exact=False)
    save_plan(plan, tmp_path / "f.plan")
    check = verify_plan(kinds.load_plan(tmp_path / "f.plan"))
    assert not check.passed and any(f.startswith("sensitivity exact") for f in check.failures)
    assert main(["verify", str(tmp_path / "f.plan")]) == 2


def test_structured_plan_sensitivity_exact_flag_is_verified(tmp_path):
    from factorize import build_structured_plan, kinds
    from factorize.kinds.structured.plan import save_structured_plan

    plan = build_structured_plan("marginals:3x4x2:1", "epsilon=1,delta=1e-6")
    exact = plan.provenance["sensitivity_exact"]
    assert kinds.kind_of_plan(plan).verify(plan).passed
    plan = dataclasses.replace(plan, provenance={**plan.provenance, "sensitivity_exact": not exact})
    save_structured_plan(plan, tmp_path / "s.plan")
    assert main(["verify", str(tmp_path / "s.plan")]) == 2
    check = kinds.kind_of_plan(plan).verify(kinds.load_plan(tmp_path / "s.plan"))
    assert any(f.startswith("sensitivity exact") for f in check.failures), check.failures
