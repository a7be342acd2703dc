"""Banded inverse square root (BISR) strategies (``training.bisr``, ``training.series``,
``training.toeplitz.BandedInverse``) against independent truths:

* the closed-form bands against the binomial series of ``(1 − x)^{1/2}``, and the untruncated
  BISR against the square-root factorization itself (``C·C = L``, dense);
* the series reciprocal and its certified entrywise error against exact rational arithmetic;
* the error ``‖W C⁻¹‖_F²`` (and the max row) and the certified sensitivity under single,
  ``epochs`` and ``min_sep`` participation against the dense n × n C⁻¹ (from the bands), C (its
  inverse by LAPACK) and ``privacy.participation.participation_sensitivity``, rel 1e-10;
* the optimiser's gradient against finite differences; optimised ≤ closed form (certified);
* the plan: built, saved (bands only), loaded, verified; a tampered band or inflated claim is
  refused; the test-mode stream is the dense ``σ·C⁻¹z``; the CLI end to end.
"""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.special import binom

from factorize import kinds
from factorize.cli.plan import main
from factorize.kinds.training.kind import KIND
from factorize.kinds.training.options import TrainingOptions
from factorize.kinds.training.plan import TrainingPlan
from factorize.kinds.training.stream import open_stream
from factorize.numerics import NumericRangeError
from factorize.privacy import ZCDP
from factorize.privacy.participation import Participation, participation_sensitivity
from factorize.training.bisr import (
    bisr_coefficients,
    bisr_objective,
    certified_objective,
    closed_form_bisr,
    optimize_bisr,
)
from factorize.training.series import certified_inverse_series, inverse_series
from factorize.training.stream import CorrelatedNoise, StreamRandom
from factorize.training.toeplitz import (
    BandedInverse,
    ToeplitzWorkload,
    certified_sensitivity,
    strategy_error,
    strategy_from_dict,
)
from tests.test_training_kind import FORGERIES, _rewrite

PARTICIPATIONS = [None, Participation.parse("epochs=4"), Participation.parse("k=4,min_sep=32"),
                  Participation.parse("k=3,min_sep=5"), Participation.parse("k=2,min_sep=3")]


def _strategies(n: int) -> list[BandedInverse]:
    return [closed_form_bisr(n, 8),
            BandedInverse(np.array([1.3, -0.5, 0.2, -0.1, 0.05]), n),  # signs mixed (D = 0.45)
            BandedInverse(np.array([2.0, -0.3, -0.9]), n),             # C's column oscillates
            closed_form_bisr(n, 1)]                                   # C = I


def _dense_inverse(s: BandedInverse) -> np.ndarray:
    """The n × n banded C⁻¹ from its bands (independent of the series code)."""
    n = s.n
    lag = np.subtract.outer(np.arange(n), np.arange(n))
    r = np.concatenate([s.coef, np.zeros(n)])
    return np.where((lag >= 0) & (lag < s.bands), r[np.clip(lag, 0, None)], 0.0)


def test_closed_form_is_the_truncated_square_root():
    p = 40
    j = np.arange(p)
    assert np.allclose(bisr_coefficients(p), binom(0.5, j) * (-1.0) ** j, rtol=1e-14, atol=0)
    n = 50  # untruncated (p = n): C = L^{1/2}, and C·C is the prefix-sum matrix exactly
    s = closed_form_bisr(n, n)
    C = np.linalg.inv(_dense_inverse(s))
    assert np.abs(C @ C - np.tril(np.ones((n, n)))).max() <= 1e-12
    with pytest.raises(Exception, match="bands"):
        bisr_coefficients(0)


@pytest.mark.parametrize(("coef", "n"), [(bisr_coefficients(6), 80), ([1.5, -0.5, 0.25, -0.125], 60),
                                         ([0.75, 0.25, -0.125, 0.0625, 0.03125], 300)])
def test_series_and_its_certificate_against_exact_rationals(coef, n):
    r = np.asarray(coef, dtype=np.float64)
    c, err = certified_inverse_series(r, n)
    exact = [Fraction(0)] * n
    rf = [Fraction(float(v)) for v in r]
    exact[0] = 1 / rf[0]
    for t in range(1, n):
        exact[t] = -sum(rf[j] * exact[t - j] for j in range(1, min(t, len(rf) - 1) + 1)) / rf[0]
    gap = np.array([abs(Fraction(float(c[k])) - exact[k]) for k in range(n)], dtype=object)
    assert all(gap[k] <= Fraction(float(err[k])) for k in range(n))
    assert float(err.max()) <= 1e-12  # the bound is small, not vacuous
    # the blocked solve past one block (n > 256) agrees with the recurrence to rounding
    assert np.abs(c - np.array([float(x) for x in exact])).max() <= 1e-14


def test_series_refuses_what_it_cannot_certify():
    with pytest.raises(NumericRangeError, match="Σ"):
        certified_inverse_series(np.array([1.0, -0.6, -0.5]), 50)  # D = −0.1: 1/r grows
    with pytest.raises(NumericRangeError):
        inverse_series(np.array([0.0, 1.0]), 5)
    with pytest.raises(Exception, match="coef"):
        BandedInverse(np.array([0.0, 1.0]), 5)


@pytest.mark.parametrize("n", [64, 512])
def test_objective_matches_dense(n):
    """‖W C⁻¹‖_F² and the max row norm² from the bands equal the dense ones (rel 1e-10), prefix
    and momentum workloads."""
    for s in _strategies(n):
        Cinv = _dense_inverse(s)
        for w in (ToeplitzWorkload.prefix(), ToeplitzWorkload.momentum(0.9)):
            B = w.dense(n) @ Cinv
            rows = np.sum(B * B, axis=1)
            assert strategy_error(s, w, "total") == pytest.approx(rows.sum(), rel=1e-10)
            assert strategy_error(s, w, "max") == pytest.approx(rows.max(), rel=1e-10)


@pytest.mark.parametrize("n", [128, 256])
def test_sensitivity_matches_dense(n):
    """Single participation: C's largest column norm (rel 1e-10). Under participation: never
    below the dense attained value, never above the dense bound, and equal to it where the dense
    value is exact (rel 1e-10) — always under epochs for the non-negative C of the closed form."""
    for s in _strategies(n):
        C = np.linalg.inv(_dense_inverse(s))
        assert np.abs(C[:, 0] - s.certified_column().value).max() <= 1e-12
        for p in PARTICIPATIONS:
            mine = certified_sensitivity(s, p)
            assert mine.lower <= mine.value
            if p is None:
                ref = float(np.sqrt((C ** 2).sum(axis=0).max()))
                assert mine.exact and mine.value >= ref * (1 - 1e-15)
                assert mine.value == pytest.approx(ref, rel=1e-10)
                continue
            dense = participation_sensitivity(C, p)
            assert mine.value >= dense.lower * (1 - 1e-12)
            assert mine.lower <= dense.value * (1 + 1e-12)
            if dense.exact:
                assert mine.value == pytest.approx(dense.value, rel=1e-10)
        if np.all(s.certified_column().value >= 0):
            epochs = certified_sensitivity(s, PARTICIPATIONS[1])
            assert epochs.exact


@pytest.mark.parametrize("participation", [None, "epochs=4", "k=3,min_sep=40"])
def test_gradient_matches_finite_differences(participation):
    n, p = 200, 6
    part = None if participation is None else Participation.parse(participation)
    impulse = np.eye(n)[0]
    w = ToeplitzWorkload.prefix()
    r = bisr_coefficients(p) * (1 + 0.05 * np.random.default_rng(1).standard_normal(p))
    _, grad, _ = bisr_objective(r, n, w, "total", part, impulse)
    h = 1e-6
    for m in range(p):
        e = np.zeros(p)
        e[m] = h
        fd = (bisr_objective(r + e, n, w, "total", part, impulse)[0]
              - bisr_objective(r - e, n, w, "total", part, impulse)[0]) / (2 * h)
        assert grad[m] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize(("participation", "reduction"),
                         [(None, "total"), ("epochs=4", "total"), ("k=4,min_sep=250", "total"),
                          (None, "max")])
def test_optimised_is_no_worse_than_the_closed_form(participation, reduction):
    n, p = 1000, 8
    part = None if participation is None else Participation.parse(participation)
    w = ToeplitzWorkload.prefix()
    closed, _ = certified_objective(closed_form_bisr(n, p), w, reduction, part)
    opt = optimize_bisr(n, p, participation=part, reduction=reduction)
    again, E = certified_objective(opt.strategy, w, reduction, part)
    assert opt.objective == pytest.approx(again, rel=1e-12) and opt.error == pytest.approx(E, rel=1e-12)
    assert opt.objective <= closed
    assert opt.strategy.coef[0] == 1.0 and np.all(opt.strategy.coef[1:] <= 0)
    if reduction == "total":  # the truncation's error is far from optimal at p ≪ n
        assert opt.objective < 0.8 * closed


# ------------------------------------------------------------------------------------ the plan


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("bisr") / "bisr.plan"
    plan = KIND.build(TrainingOptions(n=128, guarantee="rho=0.5", participation="epochs=4",
                                      strategy="bisr", bands=8))
    KIND.save(plan, out)
    return out


def test_plan_round_trip_stores_the_bands_and_verifies(plan_path):
    plan = kinds.load_plan(plan_path)
    assert isinstance(plan.strategy, BandedInverse) and plan.strategy.bands == 8
    assert set(plan.arrays()) == {"coef"} and plan.strategy_header() == {"kind": "banded_inverse",
                                                                          "bands": 8}
    check = kinds.verify_plan(plan)
    assert check.passed, check.failures
    Cinv = _dense_inverse(plan.strategy)
    B = np.tril(np.ones((plan.n, plan.n))) @ Cinv
    assert plan.objective["error"] == pytest.approx(float(np.sum(B * B)), rel=1e-10)
    dense = participation_sensitivity(np.linalg.inv(Cinv), plan.participation)
    assert dense.exact and plan.sensitivity["value"] == pytest.approx(dense.value, rel=1e-10)
    assert plan.sensitivity["exact"]
    assert plan.sigma == pytest.approx(plan.sensitivity["value"] / math.sqrt(2 * 0.5), rel=1e-15)
    back = strategy_from_dict(plan.strategy.to_dict())
    assert isinstance(back, BandedInverse) and back.n == plan.n
    assert np.array_equal(back.coef, plan.strategy.coef)


def _scale_bands(factor: float, index: int | None = None):
    def edit(arrays):
        if index is None:
            arrays["coef"] = arrays["coef"] * factor
        else:
            arrays["coef"][index] *= factor
    return edit


BISR_FORGERIES = {
    # C⁻¹ smaller: C (and Δ) larger than the plan states
    "bands shrunk": (None, _scale_bands(0.98), ["UNDERSTATED", "UNDER-NOISED"]),
    # C⁻¹ larger: the stated error is below the re-derived one
    "bands grown": (None, _scale_bands(1.02), ["FALSE ACCURACY CLAIM"]),
    "one band changed": (None, _scale_bands(1.5, 3), ["sensitivity:", "objective:"]),
    # Σ_{j≥1}|r_j| ≥ r_0: C's column cannot be certified (it need not even be bounded)
    "uncertifiable bands": (None, _scale_bands(0.5, 0), ["strategy: cannot check", "Σ"]),
    **{k: FORGERIES[k] for k in ("understated sensitivity", "inflated lower bound",
                                 "false objective", "another participation")},
}


def test_a_min_sep_plan_with_momentum_verifies_against_the_dense_truth(tmp_path):
    """The other participation form, the max objective and the momentum workload: every claim
    re-derived by the verifier, against the dense ``W C⁻¹`` and ``participation_sensitivity``."""
    plan = KIND.build(TrainingOptions(n=96, guarantee="epsilon=1,delta=1e-6", strategy="bisr",
                                      participation="k=3,min_sep=16", bands=6, objective="max",
                                      momentum=0.5))
    path = tmp_path / "m.plan"
    KIND.save(plan, path)
    back = kinds.load_plan(path)
    check = kinds.verify_plan(back)
    assert check.passed, check.failures
    Cinv = _dense_inverse(back.strategy)
    B = ToeplitzWorkload.momentum(0.5).dense(96) @ Cinv
    assert back.objective["error"] == pytest.approx(float(np.sum(B * B, axis=1).max()), rel=1e-10)
    dense = participation_sensitivity(np.linalg.inv(Cinv), back.participation)
    assert dense.lower * (1 - 1e-12) <= back.sensitivity["value"] <= dense.value * (1 + 1e-12)
    # exact here: attained (Y = 𝟙𝟙ᵀ) at the pattern 0, 16, 32 of the dense Gram matrix
    assert back.sensitivity["exact"]
    X = np.linalg.inv(Cinv).T @ np.linalg.inv(Cinv)
    attained = math.sqrt(float(X[np.ix_([0, 16, 32], [0, 16, 32])].sum()))
    assert back.sensitivity["value"] == pytest.approx(attained, rel=1e-10)


@pytest.mark.parametrize("forgery", sorted(BISR_FORGERIES))
def test_forged_bisr_plans_are_refused(plan_path, tmp_path, forgery):
    edit_m, edit_a, words = BISR_FORGERIES[forgery]
    forged = tmp_path / "forged.plan"
    _rewrite(plan_path, forged, edit_m, edit_a)
    check = kinds.verify_plan(kinds.load_plan(forged))
    assert not check.passed
    text = "; ".join(check.failures)
    assert all(word in text for word in words), text


def test_the_plan_file_at_a_million_steps_is_kilobytes(tmp_path):
    n = 10 ** 6
    plan = TrainingPlan.from_strategy(closed_form_bisr(n, 64), Participation.parse("epochs=4"),
                                      ZCDP(0.5), "total")
    path = tmp_path / "big.plan"
    kinds.save_plan(plan, path)
    assert path.stat().st_size < 16 * 1024
    check = kinds.verify_plan(kinds.load_plan(path))
    assert check.passed, check.failures
    assert plan.sensitivity["exact"]


def test_the_stream_is_the_dense_noise(plan_path):
    plan = kinds.load_plan(plan_path)
    d = 3
    run = open_stream(plan_path, d, rng=StreamRandom.seeded(5))
    got = []
    for step in run.stream:
        assert step.test_mode and "TEST MODE" in step.label
        got.append(np.array(step))
    ref = StreamRandom.seeded(5)
    Z = np.empty((plan.n, d))
    for t in range(plan.n):
        ref.normals(t, Z[t])
    expect = plan.sigma * _dense_inverse(plan.strategy) @ Z
    assert np.abs(np.stack(got) - expect).max() <= 1e-12 * np.abs(expect).max()
    assert run.stream.state_nbytes == (plan.strategy.bands - 1) * d * 8
    # r_0 ≠ 1, mixed signs, and a model wider than one block of the recurrence
    s = BandedInverse(np.array([1.3, -0.5, 0.2, -0.1]), 9)
    Z = np.random.default_rng(0).standard_normal((9, 40000))
    for threads in (1, 3):
        rec = CorrelatedNoise(s, 40000, threads=threads)
        out = np.stack([rec.push(z.copy()).copy() for z in Z])
        assert np.abs(out - _dense_inverse(s) @ Z).max() <= 1e-14
        with pytest.raises(Exception, match="steps"):
            rec.push(Z[0].copy())


def test_cli_plan_verify_inspect(tmp_path, capsys):
    out = tmp_path / "B.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", "--participation",
                 "epochs=4", "--strategy", "bisr", "--bands", "6", "--privacy", "rho=0.5",
                 "--out", str(out)]) == 0
    assert "banded inverse (BISR), C⁻¹ of 6 bands" in capsys.readouterr().out
    plan = kinds.load_plan(out)
    assert isinstance(plan.strategy, BandedInverse) and plan.strategy.bands == 6
    assert main(["verify", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["inspect", str(out)]) == 0
    assert capsys.readouterr().out.startswith("status      VERIFIED")
    assert main(["plan", "--workload", "prefix:8", "--strategy", "bisr", "--privacy", "rho=0.5",
                 "--out", str(tmp_path / "x.plan")]) == 2
    assert not (tmp_path / "x.plan").exists()


def test_verify_inspect_and_stream_import_no_optimiser(plan_path):
    """The trusted side of a BISR plan at run time: no scipy.optimize, nor scipy.signal."""
    code = (
        "import sys\n"
        "from factorize.cli.plan import main\n"
        f"p = {str(plan_path)!r}\n"
        "assert main(['verify', p]) == 0 and main(['inspect', p]) == 0\n"
        "from factorize.kinds.training.stream import open_stream\n"
        "from factorize.training.stream import StreamRandom\n"
        "next(iter(open_stream(p, 4, rng=StreamRandom.seeded(0)).stream))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.optimize', 'scipy.signal'))))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], check=True)
    assert res.stdout.strip().splitlines()[-1] == "[]"
