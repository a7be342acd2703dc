"""The training plan kind (``factorize.kinds.training``): a long-horizon Toeplitz strategy for
DP training under multi-participation, planned, saved, loaded, verified, inspected and opened as
a charged noise stream.

* every claim against an independent truth: the error per unit σ² against the dense
  ``‖L_n C⁻¹‖_F²`` (and the worst row), the sensitivity against the dense Gram bound of
  ``privacy.participation``, σ against the closed form (zCDP) or the analytic Gaussian's
  condition ((ε, δ)), the lower bound below every strategy's error·Δ²;
* a forged plan — a tampered parameter, an understated sensitivity, an inflated lower bound, a
  false objective, a σ below the guarantee's — is refused, and opens no stream;
* the file at n = 10⁶ holds kilobytes;
* the stream opened from a plan charges the ledger once with the file's digest, and in test
  mode its noise is the dense ``σ·C⁻¹z``;
* the CLI end to end; verifying, inspecting and streaming import neither scipy.optimize nor
  scipy.signal.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from factorize import kinds
from factorize.cli.plan import main
from factorize.kinds.training.codec import TRAINING_FORMAT, TRAINING_SCHEMA_VERSION
from factorize.kinds.training.kind import KIND
from factorize.kinds.training.options import TrainingOptions
from factorize.kinds.training.plan import TrainingPlan, solve_banded_toeplitz
from factorize.kinds.training.stream import open_stream
from factorize.plan.errors import PlanError, PlanRefused
from factorize.plan.files import PlanFormatError, read_plan_container, write_plan_container
from factorize.privacy import ZCDP, ApproxDP
from factorize.privacy.gaussian import gaussian_approx_dp_holds
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation, participation_sensitivity
from factorize.training.stream import StreamRandom
from factorize.training.toeplitz import BandedToeplitz, dense_strategy

ROOT = Path(__file__).resolve().parents[1]
LEGACY = ROOT / "tests" / "data" / "legacy"


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, Path]:
    """One BLT (zCDP, epochs=4, total), one banded plan ((ε, δ), k=3,min_sep=16, max) and one
    momentum plan (banded, β = 0.9, single participation) at n = 128, built by ``KIND.build``
    and saved."""
    out = tmp_path_factory.mktemp("training")
    built = {
        "blt": KIND.build(TrainingOptions(n=128, guarantee="rho=0.5", participation="epochs=4",
                                          strategy="blt", buffers=3)),
        "banded": KIND.build(TrainingOptions(n=128, guarantee="epsilon=1,delta=1e-6",
                                             participation="k=3,min_sep=16", strategy="banded",
                                             bands=8, objective="max")),
        "momentum": KIND.build(TrainingOptions(n=128, guarantee="rho=0.5", strategy="banded",
                                               bands=8, momentum=0.9)),
    }
    paths = {}
    for name, plan in built.items():
        paths[name] = out / f"{name}.plan"
        KIND.save(plan, paths[name])
    return paths


def _dense_workload(plan: TrainingPlan) -> np.ndarray:
    """``L_n`` or ``L_n M_β`` (M_β: β^{i−j} below the diagonal), dense."""
    n = plan.n
    W = np.tril(np.ones((n, n)))
    if plan.workload != "prefix":
        beta = float(plan.workload.partition("=")[2])
        lag = np.subtract.outer(np.arange(n), np.arange(n))
        W = W @ np.where(lag >= 0, beta ** np.maximum(lag, 0), 0.0)
    return W


def _dense_truth(plan: TrainingPlan) -> tuple[float, float]:
    """(total, max) squared error per unit σ² of the dense ``W C⁻¹``."""
    B = _dense_workload(plan) @ np.linalg.inv(dense_strategy(plan.strategy))
    rows = np.sum(B * B, axis=1)
    return float(rows.sum()), float(rows.max())


@pytest.mark.parametrize("name", ["blt", "banded", "momentum"])
def test_round_trip_and_every_claim_against_a_dense_truth(plans, name):
    path = plans[name]
    plan = kinds.load_plan(path)
    assert isinstance(plan, TrainingPlan) and kinds.kind_of_file(path) is KIND
    check = kinds.verify_plan(plan)
    assert check.passed, check.failures
    again = path.with_suffix(".again")
    kinds.save_plan(plan, again)
    back = kinds.load_plan(again)
    assert back.manifest() == plan.manifest()
    assert all(np.array_equal(back.arrays()[k], v) for k, v in plan.arrays().items())

    total, worst = _dense_truth(plan)
    stated = plan.objective["error"]
    assert stated == pytest.approx(total if plan.objective["reduction"] == "total" else worst, rel=1e-10)
    # the sensitivity: the dense Gram bound (all patterns / the DP over patterns) of
    # privacy.participation, a second algorithm; the Toeplitz bound is at least as tight
    sens = plan.sensitivity
    C = dense_strategy(plan.strategy)
    if plan.participation is None:
        assert sens["value"] == pytest.approx(np.linalg.norm(C[:, 0]), rel=1e-13)  # column 0
    else:
        dense = participation_sensitivity(C, plan.participation)
        assert sens["value"] <= dense.value * (1 + 1e-12)
        assert sens["value"] >= dense.lower * (1 - 1e-12) and sens["lower"] <= sens["value"]
        if plan.participation.kind == "epochs":
            assert sens["value"] == pytest.approx(dense.value, rel=1e-12)
    assert plan.objective["normalised"] == pytest.approx(stated * sens["value"] ** 2, rel=1e-15)
    assert 0 < plan.lower_bound["value"] <= plan.objective["normalised"]
    if plan.participation is None:  # the SVD bound ‖W‖_tr²/n, dense, is at least the stated one
        svd = np.linalg.svd(_dense_workload(plan), compute_uv=False).sum() ** 2 / plan.n
        assert plan.lower_bound["value"] <= svd * (1 + 1e-12)
        if plan.workload == "prefix":
            assert plan.lower_bound["value"] == pytest.approx(svd, rel=1e-12)
    g = plan.guarantee
    if isinstance(g, ZCDP):
        assert plan.sigma == pytest.approx(sens["value"] / math.sqrt(2 * g.rho), rel=1e-15)
        assert plan.sigma >= sens["value"] / math.sqrt(2 * g.rho)
    else:
        assert isinstance(g, ApproxDP)
        assert gaussian_approx_dp_holds(g.epsilon, g.delta, plan.sigma, sens["value"], discrete=False)
        assert not gaussian_approx_dp_holds(g.epsilon, g.delta, plan.sigma * (1 - 1e-6),
                                            sens["value"], discrete=False)


@pytest.mark.parametrize(("bands", "n"), [(1, 10), (5, 600), (40, 300), (300, 700)])
def test_the_blocked_banded_solve_is_the_dense_solve(bands, n):
    rng = np.random.default_rng(bands)
    c = np.concatenate([[1.0], 0.3 * rng.random(bands - 1) / np.arange(1, bands)])
    C = dense_strategy(BandedToeplitz(c, n))
    for x in (np.eye(n)[:, 0], rng.standard_normal(n)):
        expect = np.linalg.solve(C, x)
        assert np.abs(solve_banded_toeplitz(c, x) - expect).max() <= 1e-12 * np.abs(expect).max()


def _rewrite(src: Path, dst: Path, edit_manifest=None, edit_arrays=None) -> None:
    """``src`` with its manifest or arrays edited, written whole (fresh digests): the forger
    rewrites the container, so only the verifier stands between the file and a release."""
    manifest, arrays = read_plan_container(src, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION)
    manifest = {k: v for k, v in manifest.items()
                if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    if edit_manifest:
        edit_manifest(manifest)
    arrays = {k: v.copy() for k, v in arrays.items()}
    if edit_arrays:
        edit_arrays(arrays)
    write_plan_container(dst, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION, manifest, arrays)


def _scale(section: str, key: str, factor: float):
    def edit(m):
        m[section][key] *= factor
    return edit


def _tamper(arrays):
    """The first parameter array (``coef`` or ``omega``) 2 % larger: C's sensitivity grows."""
    key = sorted(arrays)[0]
    arrays[key] = arrays[key] * 1.02


def _understate(m):
    """Δ and σ both 10 % lower (σ the calibration of the forged Δ), the objective recomputed."""
    m["sensitivity"]["value"] *= 0.9
    m["noise"]["sigma"] *= 0.9
    m["objective"]["normalised"] *= 0.81


FORGERIES = {
    "tampered parameter": (None, _tamper, ["UNDERSTATED", "UNDER-NOISED", "objective:"]),
    "understated sensitivity": (_understate, None, ["UNDERSTATED", "UNDER-NOISED"]),
    "inflated lower bound": (_scale("lower_bound", "value", 1.1), None, ["INFLATED"]),
    "false objective": (_scale("objective", "error", 0.9), None, ["FALSE ACCURACY CLAIM"]),
    "sigma below the guarantee": (_scale("noise", "sigma", 1 - 1e-6), None, ["UNDER-NOISED"]),
    "sigma not the calibration": (_scale("noise", "sigma", 1.01), None, ["is not the calibrated"]),
    "another participation": (lambda m: m.update(participation="epochs=2"), None, ["sensitivity:"]),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("name", ["blt", "banded", "momentum"])
def test_forged_plans_are_refused_and_open_no_stream(plans, tmp_path, name, forgery):
    from factorize.ledger import Ledger

    edit_m, edit_a, words = FORGERIES[forgery]
    forged = tmp_path / "forged.plan"
    _rewrite(plans[name], forged, edit_m, edit_a)
    check = kinds.verify_plan(kinds.load_plan(forged))
    assert not check.passed
    text = "; ".join(check.failures)
    assert all(w in text for w in words), text
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("users", {"type": "approx_dp", "epsilon": 100.0, "delta": 1e-3})
    with pytest.raises(PlanRefused):
        open_stream(forged, 4, ledger=L, dataset="users")
    assert Ledger.open(L).history("users") == []


def test_a_corrupt_file_and_another_kind_are_refused(plans, tmp_path):
    raw = bytearray(plans["blt"].read_bytes())
    raw[-3] ^= 1  # a parameter's byte: the array digest fails
    bad = tmp_path / "bad.plan"
    bad.write_bytes(bytes(raw))
    with pytest.raises(PlanFormatError):
        kinds.load_plan(bad)
    with pytest.raises(PlanFormatError, match="not a training plan"):
        open_stream(LEGACY / "factorization_prefix8.plan", 4)
    wrong = tmp_path / "wrong.plan"
    _rewrite(plans["blt"], wrong, lambda m: m.update(participation="epochs=04"))
    with pytest.raises(PlanFormatError, match="canonical"):
        kinds.load_plan(wrong)
    _rewrite(plans["momentum"], wrong, lambda m: m.update(workload="momentum=0.90"))
    with pytest.raises(PlanFormatError, match="training workload"):
        kinds.load_plan(wrong)
    # another workload's claims: the momentum plan's numbers stated for plain prefix sums
    _rewrite(plans["momentum"], wrong, lambda m: m.update(workload="prefix"))
    failures = "; ".join(kinds.verify_plan(kinds.load_plan(wrong)).failures)
    assert "objective:" in failures and "lower bound:" in failures


def test_pure_dp_and_a_weak_guarantee_are_refused(plans, tmp_path):
    with pytest.raises(PlanError, match="Gaussian"):
        KIND.build(TrainingOptions(n=16, guarantee="epsilon=1"))
    pure = tmp_path / "pure.plan"
    _rewrite(plans["blt"], pure, lambda m: m.update(guarantee={"type": "pure_dp", "epsilon": 1.0}))
    assert not kinds.verify_plan(kinds.load_plan(pure)).passed
    weak = tmp_path / "weak.plan"
    _rewrite(plans["blt"], weak, lambda m: m.update(guarantee={"type": "zcdp", "rho": 50.0}))
    check = kinds.verify_plan(kinds.load_plan(weak))
    assert not check.passed and any(f.startswith("guarantee:") for f in check.failures)


def test_the_plan_file_at_a_million_steps_is_kilobytes(tmp_path):
    """A BLT of 4 buffers at n = 10⁶ (the optimiser's interlaced start: positive decreasing
    coefficients), written directly: the file holds its 8 parameters and the claims."""
    from factorize.training.blt import blt_from_pair, initial_parameters

    n, b = 10**6, 4
    z = initial_parameters(n, b)
    strategy = blt_from_pair(1 - np.exp(z[:b]), 1 - np.exp(z[b:]), n)
    plan = TrainingPlan.from_strategy(strategy, Participation.parse("epochs=4"), ZCDP(0.5), "total")
    path = tmp_path / "big.plan"
    kinds.save_plan(plan, path)
    assert path.stat().st_size < 16 * 1024
    check = kinds.verify_plan(kinds.load_plan(path))
    assert check.passed, check.failures
    assert plan.lower_bound["value"] <= plan.objective["normalised"]


def test_the_stream_of_a_plan_charges_once_and_is_the_dense_noise(plans, tmp_path):
    from factorize.ledger import Ledger

    path = plans["banded"]
    plan = kinds.load_plan(path)
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("users", {"type": "approx_dp", "epsilon": 10.0, "delta": 1e-4})
    run = open_stream(path, 5, ledger=L, dataset="users")
    hist = Ledger.open(L).history("users")
    assert len(hist) == 1 and run.charge_id == hist[0]["id"]
    assert hist[0]["plan_sha256"] == run.record_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert hist[0]["guarantee"] == plan.guarantee.to_dict() and hist[0]["relation"] == "add_remove"
    assert run.sigma == plan.sigma and run.sensitivity.value == plan.sensitivity["value"]
    labels = [step.label for step in run.stream]
    assert len(labels) == plan.n and all(label.startswith("private") for label in labels)
    assert len(Ledger.open(L).history("users")) == 1
    with pytest.raises(PrivacyError, match="test-mode"):
        open_stream(path, 5, ledger=L, dataset="users", rng=StreamRandom.seeded(1))
    assert len(Ledger.open(L).history("users")) == 1

    for name in ("blt", "banded", "momentum"):
        plan = kinds.load_plan(plans[name])
        d = 3
        run = open_stream(plans[name], d, rng=StreamRandom.seeded(7))
        got = []
        for step in run.stream:
            assert step.test_mode and "TEST MODE" in step.label
            got.append(np.array(step))
        ref = StreamRandom.seeded(7)
        Z = np.empty((plan.n, d))
        for t in range(plan.n):
            ref.normals(t, Z[t])
        expect = plan.sigma * np.linalg.solve(dense_strategy(plan.strategy), Z)
        assert np.abs(np.stack(got) - expect).max() <= 1e-11 * np.abs(expect).max()


def test_cli_plan_inspect_verify_and_run(tmp_path, capsys):
    from factorize.ledger import Ledger

    out = tmp_path / "P.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", "--participation",
                 "epochs=4", "--privacy", "rho=0.5", "--buffers", "2", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    plan = kinds.load_plan(out)
    assert (plan.n, plan.participation.key, plan.strategy.buffers) == (64, "epochs=4", 2)
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("status      VERIFIED")
    assert f"σ = {plan.sigma:.12g}" in text and "epochs=4" in text and "open_stream" in text
    assert main(["inspect", str(out), "--json"]) == 0
    head = json.loads(capsys.readouterr().out)
    assert head["plan_kind"] == "training" and head["verification"] == "VERIFIED"
    assert main(["verify", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
    # run: a training plan is not a data pass — refused before anything is read or charged
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("users", {"type": "zcdp", "rho": 10.0})
    data = tmp_path / "h.npy"
    np.save(data, np.ones(4))
    for extra in (["--allow-float-noise"], []):  # the pointer first, not the float-noise refusal
        assert main(["run", str(out), "--data", str(data), "--out", str(tmp_path / "a.csv"),
                     *extra, "--ledger", str(L), "--dataset", "users"]) == 2
        err = capsys.readouterr().err
        assert "open_stream" in err and "--allow-float-noise" not in err
    assert Ledger.open(L).history("users") == [] and not (tmp_path / "a.csv").exists()
    mom = tmp_path / "M.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:32", "--momentum", "0.9",
                 "--strategy", "banded", "--bands", "4", "--norm", "gamma_2", "--privacy",
                 "epsilon=1,delta=1e-6", "--out", str(mom)]) == 0
    plan = kinds.load_plan(mom)
    assert (plan.workload, plan.strategy.bands, plan.objective["reduction"]) == ("momentum=0.9", 4, "max")
    assert "prefix sums of momentum-0.9 averages" in capsys.readouterr().out
    # the options of other mechanisms do not apply, nor these to them
    for argv in (["--workload", "identity:8", "--mechanism", "training"],
                 ["--workload", "prefix:64", "--mechanism", "training", "--public-n", "5"],
                 ["--workload", "prefix:64", "--mechanism", "training", "--norm", "approx_gamma_2"],
                 ["--workload", "prefix:64", "--mechanism", "training", "--participation", "epochs=3"],
                 ["--workload", "prefix:8", "--participation", "epochs=2"],
                 ["--workload", "prefix:8", "--strategy", "blt"],
                 ["--workload", "prefix:8", "--momentum", "0.5"],
                 ["--workload", "prefix:8", "--mechanism", "training", "--momentum", "1.5"]):
        assert main(["plan", *argv, "--privacy", "rho=0.5", "--out", str(tmp_path / "x.plan")]) == 2
    assert not (tmp_path / "x.plan").exists()


def test_verify_inspect_and_stream_import_no_optimiser(plans):
    """The trusted side at run time: no scipy.optimize, and not scipy.signal (which loads it)."""
    code = (
        "import sys, numpy as np\n"
        "from factorize.cli.plan import main\n"
        f"p = {str(plans['banded'])!r}\n"
        "assert main(['verify', p]) == 0 and main(['inspect', p]) == 0\n"
        f"assert main(['verify', {str(plans['blt'])!r}]) == 0\n"
        "from factorize.kinds.training.stream import open_stream\n"
        "from factorize.training.stream import StreamRandom\n"
        "next(iter(open_stream(p, 4, rng=StreamRandom.seeded(0)).stream))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.optimize', 'scipy.signal'))))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_plan_report_of_a_training_plan(tmp_path):
    """`factorize report` draws a training plan's own statements (it had crashed treating it as
    a factorization plan)."""
    from factorize.cli.app import main

    plan = tmp_path / "t.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", "--participation",
                 "epochs=4", "--privacy", "rho=0.5", "--out", str(plan)]) == 0
    for suffix in ("html", "md"):
        assert main(["report", str(plan), "--out", str(tmp_path / f"r.{suffix}")]) == 0
    text = (tmp_path / "r.md").read_text()
    loaded = kinds.load_plan(plan)
    assert f"{loaded.sensitivity['value']:.12g}" in text and "certified lower bound" in text


# ------------------------------------------------------------------ dense multi-epoch strategies


@pytest.fixture(scope="module")
def dense_plans(tmp_path_factory) -> dict[str, Path]:
    """The dense multi-epoch strategy for the prefix sums of n = 64 steps under epochs=4
    (``training.multi_epoch``), as planned (``dense``) and as its lower-triangular factor
    (``streaming``), built by ``KIND.build`` and saved."""
    out = tmp_path_factory.mktemp("dense")
    paths = {}
    for name, streaming in (("dense", False), ("streaming", True)):
        plan = KIND.build(TrainingOptions(n=64, guarantee="rho=0.5", participation="epochs=4",
                                          strategy="dense", streaming=streaming))
        paths[name] = out / f"{name}.plan"
        KIND.save(plan, paths[name])
    return paths


def test_dense_round_trip_and_claims_against_independent_truth(dense_plans):
    from factorize.kinds.training.plan import CLAIM_SLACK

    """Saved and loaded bit for bit; Δ against the pattern Gram sums of CᵀC formed directly,
    the error against ``‖L C⁻¹‖_F²`` by an explicit inverse, σ against the zCDP closed form,
    the certified gap ≤ 1e-6, and both forms (dense, lower-triangular) with one Gram matrix
    and one objective."""
    from factorize.kinds.training.dense import DenseStrategy

    values = {}
    for name, path in dense_plans.items():
        plan = kinds.load_plan(path)
        assert isinstance(plan.strategy, DenseStrategy)
        again = path.parent / f"{name}-again.plan"
        KIND.save(plan, again)
        assert kinds.load_plan(again).manifest() == plan.manifest()
        assert np.array_equal(kinds.load_plan(again).strategy.matrix, plan.strategy.matrix)
        assert kinds.verify_plan(plan).passed
        C, n = plan.strategy.matrix, plan.n
        assert plan.strategy.lower_triangular is (name == "streaming")
        X = C.T @ C
        delta2 = max(np.abs(X[np.ix_(np.arange(i, n, 16), np.arange(i, n, 16))]).sum()
                     for i in range(16))
        assert plan.sensitivity["value"] >= math.sqrt(delta2)
        assert plan.sensitivity["value"] == pytest.approx(math.sqrt(delta2), rel=CLAIM_SLACK + 1e-12)
        L = np.tril(np.ones((n, n)))
        error = float(np.sum((L @ np.linalg.inv(C)) ** 2))
        assert plan.objective["error"] >= error
        assert plan.objective["error"] == pytest.approx(error, rel=1e-9)
        assert plan.sigma == pytest.approx(plan.sensitivity["value"] / math.sqrt(2 * 0.5), rel=1e-12)
        gap = plan.objective["normalised"] / plan.lower_bound["value"] - 1.0
        assert 0.0 <= gap <= 1e-6
        values[name] = (X, plan.objective["normalised"])
    assert np.abs(values["dense"][0] - values["streaming"][0]).max() <= 1e-10 * np.abs(values["dense"][0]).max()
    assert values["dense"][1] == pytest.approx(values["streaming"][1], rel=1e-9)


def _forge_witness(arrays):
    """The dual witness replaced by another feasible one (identity blocks): a weaker bound."""
    arrays["witness"] = np.tile(np.eye(4), (16, 1))


def _shrink_matrix(arrays):
    """C 2 % smaller: its sensitivity falls below the stated one, its error grows."""
    arrays["matrix"] = arrays["matrix"] * 0.98


DENSE_FORGERIES = {
    "forged witness": (None, _forge_witness, ["lower bound:", "certified"]),
    "inflated lower bound": (_scale("lower_bound", "value", 1.0 + 1e-4), None, ["INFLATED"]),
    "false objective": (_scale("objective", "error", 0.999), None, ["FALSE ACCURACY CLAIM"]),
    "tampered matrix": (None, _shrink_matrix, ["sensitivity:", "objective:"]),
}


@pytest.mark.parametrize("forgery", sorted(DENSE_FORGERIES))
def test_forged_dense_plans_are_refused_and_open_no_stream(dense_plans, tmp_path, forgery):
    from factorize.ledger import Ledger

    edit_m, edit_a, words = DENSE_FORGERIES[forgery]
    forged = tmp_path / "forged.plan"
    _rewrite(dense_plans["streaming"], forged, edit_m, edit_a)
    check = kinds.verify_plan(kinds.load_plan(forged))
    assert not check.passed
    text = "; ".join(check.failures)
    assert all(w in text for w in words), text
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("users", {"type": "zcdp", "rho": 10.0})
    with pytest.raises(PlanRefused):
        open_stream(forged, 4, ledger=L, dataset="users")
    assert Ledger.open(L).history("users") == []


def test_a_dense_header_that_misstates_its_triangle_is_refused(dense_plans, tmp_path):
    forged = tmp_path / "forged.plan"
    _rewrite(dense_plans["dense"], forged,
             lambda m: m["strategy"].update(lower_triangular=True))
    with pytest.raises(PlanFormatError, match="lower_triangular"):
        kinds.load_plan(forged)


def test_the_dense_stream_is_forward_substitution_and_needs_streaming(dense_plans, tmp_path):
    """In test mode the lower-triangular plan's stream is ``σ·C⁻¹z`` (dense solve) for the same
    z; the non-triangular plan opens no stream and is not charged."""
    from factorize.ledger import Ledger

    plan = kinds.load_plan(dense_plans["streaming"])
    d = 3
    run = open_stream(dense_plans["streaming"], d, rng=StreamRandom.seeded(11))
    assert run.stream.state_nbytes == plan.n * d * 8
    got = np.stack([np.array(step) for step in run.stream])
    ref = StreamRandom.seeded(11)
    Z = np.empty((plan.n, d))
    for t in range(plan.n):
        ref.normals(t, Z[t])
    expect = plan.sigma * np.linalg.solve(plan.strategy.matrix, Z)
    assert np.abs(got - expect).max() <= 1e-10 * np.abs(expect).max()
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("users", {"type": "zcdp", "rho": 10.0})
    with pytest.raises(PlanRefused, match="--streaming"):
        open_stream(dense_plans["dense"], d, ledger=L, dataset="users")
    assert Ledger.open(L).history("users") == []


def test_cli_plans_verifies_and_inspects_a_dense_training_plan(tmp_path, capsys):
    out = tmp_path / "D.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", "--participation",
                 "epochs=4", "--strategy", "dense", "--streaming", "--privacy", "rho=0.5",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    gap = float(text.split("gap ")[1].split(")")[0])
    assert 0.0 <= gap <= 1e-6, text
    assert "lower-triangular (streamable by forward substitution" in text
    assert main(["verify", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["inspect", str(out)]) == 0
    assert "gap " in capsys.readouterr().out
    for argv in (["--strategy", "dense"],  # needs epochs=K
                 ["--strategy", "dense", "--participation", "k=2,min_sep=16", "--norm", "gamma_2"],
                 ["--strategy", "dense", "--participation", "epochs=4", "--momentum", "0.5"],
                 ["--strategy", "blt", "--participation", "epochs=4", "--streaming"]):
        assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", *argv,
                     "--privacy", "rho=0.5", "--out", str(tmp_path / "x.plan")]) == 2
    assert main(["plan", "--workload", "prefix:8", "--streaming", "--privacy", "rho=0.5",
                 "--out", str(tmp_path / "x.plan")]) == 2
    assert not (tmp_path / "x.plan").exists()


def test_dense_verify_and_stream_import_no_optimiser(dense_plans):
    """Verifying, inspecting and streaming a dense plan: no scipy.optimize, no scipy.signal."""
    p = str(dense_plans["streaming"])
    code = (
        "import sys\n"
        "from factorize.cli.plan import main\n"
        f"assert main(['verify', {p!r}]) == 0 and main(['inspect', {p!r}]) == 0\n"
        "from factorize.kinds.training.stream import open_stream\n"
        "from factorize.training.stream import StreamRandom\n"
        f"list(open_stream({p!r}, 2, rng=StreamRandom.seeded(0)).stream)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.optimize', 'scipy.signal'))))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert res.stdout.strip().splitlines()[-1] == "[]"
