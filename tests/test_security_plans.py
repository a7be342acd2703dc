"""Claims re-derived, no file oracle, nothing charged that is not
released, safe inputs and outputs. Every forged plan here has valid digests (written by the
project's own writer, as anyone who can rewrite the file can), so only verification can catch
it."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from factorize.cli import main
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import load_plan, save_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.ledger import Ledger
from factorize.plan.files import PlanFormatError
from factorize.privacy import ApproxDP
from tests.allocation import SMALL, peak_allocation
from tests.plan_fixtures import identity_certificate, small_plan

SECRET = "SECRET-VALUE-42"


def _saved(plan, path):
    save_plan(plan, path)
    return path


def _failures(plan, tmp_path, **kw):
    path = _saved(plan, tmp_path / "f.plan")
    return verify_plan(load_plan(path), **kw).failures


@pytest.fixture(scope="module")
def approx_plan():
    """A central approximate-γ₂ plan on prefix:16, η = 0.1 (the planner, certified)."""
    return build_plan("prefix:16", "epsilon=1,delta=1e-6", norm="approx_gamma_2", eta=0.1)


# ---------------------------------------------------------------------------------------
# η bounded, every claim re-derived


def test_eta_bounded_and_zero_reconstruction_refused(tmp_path, approx_plan):
    """η = 10⁶ with R = 0 on prefix:16 released sixteen zeros with [0, 0] intervals."""
    from factorize.factorization import Factorization
    from factorize.planner.certificate import Certificate

    f = approx_plan.factorization
    plan = dataclasses.replace(approx_plan, certificate=Certificate(
        "approx_gamma_2", Factorization((np.zeros_like(f.R_factors[0]),), f.A_factors),
        approx_plan.certificate.witness, eta=1e6))
    text = " ".join(_failures(plan, tmp_path))
    assert "η = 1e+06 exceeds 0.5·max|W| = 0.5" in text
    # at the plan's own η the zero reconstruction misses W by 1 > 0.1
    plan = dataclasses.replace(plan, certificate=Certificate(
        "approx_gamma_2", plan.certificate.factorization, plan.certificate.witness, eta=0.1))
    assert any(f.startswith("W = R·A") for f in _failures(plan, tmp_path))
    with pytest.raises(Exception, match="η"):
        build_plan("prefix:16", "epsilon=1,delta=1e-6", norm="approx_gamma_2", eta=1e6)


def test_approx_plan_verifies_and_states_its_bias(tmp_path, approx_plan):
    check = verify_plan(load_plan(_saved(approx_plan, tmp_path / "a.plan")))
    assert check.passed, check.failures
    assert 0.09 <= approx_plan.bias["residual_bound"] <= 0.1 + 1e-9  # the certified residual ≤ η
    assert approx_plan.expected_error["bias_per_record"] == approx_plan.bias["residual_bound"]
    assert approx_plan.bias["n_bound"] == "weights"


@pytest.mark.parametrize("key,factor", [("per_query_std_max", 0.5), ("rmse", 0.01),
                                        ("expected_max_bound", 0.9), ("rounding_bias_max", 0.0),
                                        ("bias_per_record", 0.0), ("ci_multiplier", 0.5)])
def test_understated_error_refused(tmp_path, key, factor):
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, expected_error={**plan.expected_error,
                                                     key: plan.expected_error[key] * factor})
    assert any("expected error" in f and key in f for f in _failures(plan, tmp_path))


def test_understated_bias_refused(tmp_path, approx_plan):
    plan = dataclasses.replace(approx_plan, bias={**approx_plan.bias, "residual_bound": 1e-3},
                               expected_error=dict(approx_plan.expected_error, bias_per_record=1e-3))
    assert any("below the certified residual" in f for f in _failures(plan, tmp_path))


def test_certificate_claims_refused(tmp_path):
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, bounds={**plan.bounds, "lower": plan.bounds["lower"] * 1.5})
    assert any(f.startswith("certificate") for f in _failures(plan, tmp_path))
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, bounds={**plan.bounds, "upper": plan.bounds["upper"] / 2})
    assert any(f.startswith("certificate") for f in _failures(plan, tmp_path))


def test_relaxed_projection_bound_divided_by_100_refused(tmp_path):
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.codec import load_projection_plan, save_projection_plan
    from factorize.kinds.projection.verify import verify_projection_plan

    plan = build_projection_plan("marginals:2x2x2x2:2", "epsilon=1,delta=1e-6", "relaxed-projection",
                                 n=500)
    save_projection_plan(plan, tmp_path / "ok.plan")
    assert verify_projection_plan(load_projection_plan(tmp_path / "ok.plan")).passed
    for section, key, value in (("bounds", "upper_rmse", plan.bounds["upper_rmse"] / 100),
                                ("expected_error", "rmse_bound", plan.expected_error["rmse_bound"] / 100),
                                ("decoder", "gap_tol", -1.0), ("decoder", "max_iter", 10 ** 12)):
        forged = dataclasses.replace(plan, **{section: {**getattr(plan, section), key: value}})
        save_projection_plan(forged, tmp_path / "f.plan")
        check = verify_projection_plan(load_projection_plan(tmp_path / "f.plan"))
        assert not check.passed and any(f"{section}.{key}" in f for f in check.failures), check.failures


@pytest.mark.parametrize("post", [{"method": "nonneg", "max_iter": 10 ** 12, "tol": 1e-8},
                                  {"method": "nonneg", "max_iter": 2000, "tol": -1.0},
                                  {"method": "nonneg", "max_iter": 2000},
                                  {"method": "nonneg", "max_iter": True, "tol": 1e-8}])
def test_postprocess_parameters_refused_at_verify(tmp_path, post):
    """A plan with tol = −1 and max_iter = 10¹² hung `run` forever, after the charge."""
    plan = small_plan("prefix:8", postprocess="nonneg")
    plan = dataclasses.replace(plan, postprocess=post)
    path = _saved(plan, tmp_path / "p.plan")
    try:
        failures = verify_plan(load_plan(path)).failures
    except PlanFormatError as e:  # a mistyped field is refused when the file is read
        failures = [str(e)]
    assert any("postprocess" in f for f in failures), failures
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "approx_dp", "epsilon": 5.0, "delta": 1e-5})
    np.save(tmp_path / "h.npy", np.arange(8))
    assert main(["run", str(path), "--data", str(tmp_path / "h.npy"), "--out",
                 str(tmp_path / "a.csv"), "--ledger", str(L), "--dataset", "d"]) == 2
    assert Ledger.open(L).history("d") == []  # nothing charged


def test_local_plan_eta_and_claims(tmp_path):
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.plan import load_local_plan, save_local_plan, verify_local_plan

    plan = build_local_plan("prefix:8", "epsilon=1", n=10_000, eta=0.1, alpha=0.2)
    save_local_plan(plan, tmp_path / "l.plan")
    assert verify_local_plan(load_local_plan(tmp_path / "l.plan")) == []
    for forged in (dataclasses.replace(plan, eta=1e6),
                   dataclasses.replace(plan, bounds={**plan.bounds, "predicted_max_error":
                                                     plan.bounds["predicted_max_error"] / 10}),
                   dataclasses.replace(plan, bounds={**plan.bounds, "n_needed_predicted": 1.0})):
        save_local_plan(forged, tmp_path / "f.plan")
        assert verify_local_plan(load_local_plan(tmp_path / "f.plan"))


# ---------------------------------------------------------------------------------------
# no executor-side file oracle


def test_plan_naming_a_path_is_refused_without_reading_it(tmp_path, capsys):
    secret = tmp_path / "private.csv"
    secret.write_text(f"1,2\n3,{SECRET}\n")
    plan = small_plan("prefix:2")
    plan = dataclasses.replace(plan, workload=dict(plan.workload, spec=f"file:{secret}"))
    path = _saved(plan, tmp_path / "oracle.plan")
    before = os.stat(secret).st_atime_ns
    for argv in (["verify", str(path)], ["inspect", str(path)],
                 ["run", str(path), "--data", str(tmp_path / "h.npy"), "--out", str(tmp_path / "a.csv")]):
        np.save(tmp_path / "h.npy", np.array([1, 2]))
        main(argv)
        text = capsys.readouterr()
        blob = text.out + text.err
        assert SECRET not in blob and "(2, 2)" not in blob and "shape (2" not in blob
        assert "file path is refused" in blob or "REFUSED" in blob or "refused" in blob
    assert os.stat(secret).st_atime_ns == before  # never opened
    assert not (tmp_path / "a.csv").exists()


def test_custom_matrix_travels_inside_the_plan(tmp_path):
    W = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    np.save(tmp_path / "W.npy", W)
    plan = build_plan(f"file:{tmp_path / 'W.npy'}", "rho=0.5",
                      certificate=identity_certificate(f"file:{tmp_path / 'W.npy'}"))
    assert plan.workload["spec"].startswith("file:sha256=")
    path = _saved(plan, tmp_path / "custom.plan")
    (tmp_path / "W.npy").unlink()  # the plan no longer needs the file
    assert verify_plan(load_plan(path)).passed
    # the matrix inside the plan, swapped (digests recomputed by the writer): refused
    forged = load_plan(path)
    (digest, w), = forged.embedded.items()
    from workloads import DenseWorkload

    forged = dataclasses.replace(forged, embedded={digest: DenseWorkload(w.matrix * 2)})
    with pytest.raises(Exception, match="does not match its digest"):
        load_plan(_saved(forged, tmp_path / "swapped.plan"))


def test_workload_file_errors_never_quote_contents(tmp_path):
    from workloads import parse_workload

    bad = tmp_path / "w.csv"
    bad.write_text(f"1,2\n3,{SECRET}\n")
    with pytest.raises(Exception) as exc:
        parse_workload(f"file:{bad}")
    assert SECRET not in str(exc.value)


# ---------------------------------------------------------------------------------------
# the release frame


@pytest.fixture()
def ready(tmp_path):
    plan = small_plan("prefix:8", "epsilon=0.5,delta=1e-6")
    path = _saved(plan, tmp_path / "p.plan")
    np.save(tmp_path / "h.npy", np.array([5, 0, 3, 7, 1, 0, 2, 4], dtype=np.int64))
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "approx_dp", "epsilon": 5.0, "delta": 1e-5})
    return path, tmp_path / "h.npy", L


def _run(path, data, out, *extra):
    return main(["run", str(path), "--data", str(data), "--out", str(out), *extra])


def test_seed_with_ledger_refused(ready, tmp_path):
    path, data, L = ready
    assert _run(path, data, tmp_path / "a.csv", "--seed", "1", "--ledger", str(L), "--dataset", "d") == 2
    assert Ledger.open(L).history("d") == [] and not (tmp_path / "a.csv").exists()


def test_unwritable_output_refused_before_the_charge(ready, tmp_path):
    path, data, L = ready
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root): no read-only folder")
        assert _run(path, data, locked / "a.csv", "--ledger", str(L), "--dataset", "d") == 2
    finally:
        locked.chmod(0o700)
    assert Ledger.open(L).history("d") == []


def test_unwritable_output_as_root_refused_before_the_charge(ready, tmp_path):
    """An output path whose parent is a file cannot be created by anyone, root included."""
    path, data, L = ready
    (tmp_path / "afile").write_text("x")
    assert _run(path, data, tmp_path / "afile" / "a.csv", "--ledger", str(L), "--dataset", "d") == 2
    assert Ledger.open(L).history("d") == []


@pytest.mark.parametrize("target", ["data", "plan", "ledger", "anchor"])
def test_out_must_not_be_an_input(tmp_path, target, capsys):
    plan = small_plan("marginals:2x3:1", "epsilon=0.5,delta=1e-6")
    from workloads import Domain

    plan = dataclasses.replace(plan, domain=Domain(["a", "b"], [2, 3]))
    path = _saved(plan, tmp_path / "p.plan")
    data = tmp_path / "records.csv"
    data.write_text("a,b\n0,1\n1,2\n1,0\n")
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "approx_dp", "epsilon": 5.0, "delta": 1e-5})
    out = {"data": data, "plan": path, "ledger": L, "anchor": tmp_path / "L.db.head"}[target]
    before = out.read_bytes()
    rc = _run(path, data, out if out.suffix in (".csv",) else out, "--ledger", str(L), "--dataset", "d")
    assert rc == 2
    assert out.read_bytes() == before
    assert Ledger.open(L).history("d") == []
    del Domain


def test_guarantees_that_protect_nothing(tmp_path, capsys):
    for privacy in ("epsilon=1e300", "epsilon=1,delta=0.99", "rho=1e6"):
        assert main(["plan", "--workload", "prefix:4", "--privacy", privacy,
                     "--out", str(tmp_path / "w.plan")]) == 2
        assert "protects too little" in capsys.readouterr().err
    plan = small_plan("prefix:4", "epsilon=30,delta=1e-6", allow_weak_guarantee=True)
    path = _saved(plan, tmp_path / "w.plan")
    assert not verify_plan(load_plan(path)).passed
    assert verify_plan(load_plan(path), allow_weak_guarantee=True).passed
    # δ ≥ 1/n for the data at hand: refused at run time, before any charge
    plan = small_plan("prefix:4", "epsilon=1,delta=1e-3")
    path = _saved(plan, tmp_path / "d.plan")
    np.save(tmp_path / "h.npy", np.array([100, 200, 300, 400]))  # n = 1000: δ = 1/n, refused
    assert _run(path, tmp_path / "h.npy", tmp_path / "a.csv") == 2
    assert "not below 1/n" in capsys.readouterr().err
    assert not (tmp_path / "a.csv").exists()
    np.save(tmp_path / "h.npy", np.array([100, 200, 300, 399]))  # n = 999: δ < 1/n
    assert _run(path, tmp_path / "h.npy", tmp_path / "a.csv") == 0
    assert _run(path, tmp_path / "h.npy", tmp_path / "b.csv", "--allow-weak-guarantee") == 0


def test_domain_must_agree_with_workload_axes(tmp_path):
    from workloads import Domain

    with pytest.raises(Exception, match="do not line up"):
        build_plan("kron(prefix:4,identity:4)", "rho=0.5", domain=Domain(["a", "b"], [2, 8]),
                   certificate=identity_certificate("kron(prefix:4,identity:4)"))
    plan = small_plan("kron(prefix:4,identity:4)", "rho=0.5")
    plan = dataclasses.replace(plan, domain=Domain(["a", "b"], [2, 8]))
    assert any(f.startswith("domain") for f in _failures(plan, tmp_path))


def test_manifest_contradicting_itself_refused(tmp_path):
    plan = small_plan("prefix:8")
    plan = dataclasses.replace(plan, noise=dataclasses.replace(plan.noise, guarantee=ApproxDP(0.1, 1e-9)))
    assert any(f.startswith("manifest") for f in _failures(plan, tmp_path))


def test_local_client_shows_epsilon_and_guards_it(tmp_path, capsys):
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.plan import save_local_plan

    plan = build_local_plan("identity:4", "epsilon=1", n=1000, eta=0.0, allow_weak_guarantee=True)
    save_local_plan(plan, tmp_path / "ok.lplan")
    assert main(["local", "client", str(tmp_path / "ok.lplan"), "--record", "x0=2"]) == 0
    captured = capsys.readouterr()
    assert "ε=1" in captured.err and "message" in captured.out
    weak = build_local_plan("identity:4", "epsilon=30", n=1000, eta=0.0, allow_weak_guarantee=True)
    save_local_plan(weak, tmp_path / "weak.lplan")
    assert main(["local", "client", str(tmp_path / "weak.lplan"), "--record", "x0=2"]) == 2
    captured = capsys.readouterr()
    assert "ε=30" in captured.err and "exceeds --max-epsilon 10" in captured.err
    assert "message" not in captured.out
    assert main(["local", "client", str(tmp_path / "weak.lplan"), "--record", "x0=2",
                 "--max-epsilon", "30"]) == 0


def test_spec_total_size_limit_and_shared_leaves():

    from workloads import WorkloadSpecError, parse_workload

    W, peak = peak_allocation(lambda: parse_workload("vstack(" + ",".join(["prefix:4096"] * 2000) + ")"))
    # one leaf, built once and shared: a few copies of one 4096² leaf, not 2,000 of them
    assert W.shape == (2000 * 4096, 4096) and peak < 4 * 4096 * 4096 * 8, peak
    assert len({id(b) for b in W.blocks}) == 1
    err, peak = peak_allocation(lambda: parse_workload("vstack(allrange:700,allrange:701)"))
    assert isinstance(err, WorkloadSpecError) and "more than" in str(err)
    assert peak < SMALL  # refused from the declared sizes, before any block is built


def test_memory_and_recursion_errors_are_exit_2(tmp_path, monkeypatch, capsys):
    import factorize.kinds.factorization.codec as pf

    path = _saved(small_plan("prefix:4"), tmp_path / "p.plan")

    def boom(*_a, **_k):
        raise MemoryError

    monkeypatch.setattr(pf, "_load", boom)
    assert main(["inspect", str(path)]) == 2
    assert "out of memory" in capsys.readouterr().err

    def deep(*_a, **_k):
        raise RecursionError

    monkeypatch.setattr(pf, "_load", deep)
    assert main(["verify", str(path)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_postprocessing_is_bounded_in_time_after_the_charge(ready, tmp_path):
    """The charge is followed by bounded work only: post-processing stops at the wall-clock
    limit and the answers are released (and recorded) with the state it reached."""

    from factorize.executor.output import read_answers

    plan = small_plan("prefix:8", "epsilon=0.5,delta=1e-6", postprocess="nonneg")
    path = _saved(plan, tmp_path / "n.plan")
    _, data, L = ready
    out = tmp_path / "a.json"
    assert _run(path, data, out, "--ledger", str(L), "--dataset", "d",
                "--postprocess-time-limit", "0.000001") == 0
    cols, meta = read_answers(out)
    assert meta["postprocess"]["iterations"] <= 10 and "estimate_postprocessed" in cols
    (c,) = Ledger.open(L).history("d")
    assert c["status"] == "released"
