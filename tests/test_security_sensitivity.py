"""Sound sensitivity and calibration arithmetic.

The attack: a verifier that computes a strategy's L2 sensitivity as √(Σa²) in float64
sees, for entries near 2⁻⁵³⁷, every square round to 0, so noise is calibrated to a sensitivity 70×
too small while A·h stays exact. Three variants of the attack are built here with the
project's own writer (valid digests, as anyone who can rewrite the file can) and must be refused;
then every sensitivity function is checked against exact rational arithmetic on matrices whose
magnitudes span the whole float range.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorize.factorization import Factorization
from factorize.kinds.factorization.codec import load_plan, save_plan
from factorize.kinds.factorization.plan import expected_error
from factorize.kinds.factorization.verify import verify_plan
from factorize.plan.rules import choose_grid
from factorize.planner.certificate import ApproxGamma2Witness, Certificate, GammaFWitness
from factorize.privacy import PrivacyError, calibrate, parse_guarantee
from factorize.privacy.sensitivity import add_remove_sensitivity, kron_sensitivity, replace_sensitivity
from tests.plan_fixtures import small_plan
from workloads import parse_workload

TINY = 2.0 ** -537
M_ROWS = 10_000


def underflow_strategy() -> np.ndarray:
    """m = 10⁴ rows; one entry per column equal to 2⁻⁵³⁷ (its square is the smallest subnormal)
    and the rest 0.7·2⁻⁵³⁷ (squares round to 0): float64 √(Σa²) = 2⁻⁵³⁷, exact ≈ 70·2⁻⁵³⁷."""
    A = np.full((M_ROWS, 2), 0.7 * TINY)
    A[:, 1] *= -1
    A[0, :] = TINY
    return A


def unsound_sensitivity(A: np.ndarray) -> float:
    """The float64 √(Σa²) without scaling (what a forger calibrates to)."""
    return float(np.sqrt(np.max(np.einsum("ij,ij->j", A, A))))


def exact_sensitivity(A: np.ndarray) -> Fraction:
    """max_x Σ_i a_ix² in exact rational arithmetic (squared)."""
    return max(sum((Fraction(float(a)) ** 2 for a in A[:, j]), Fraction(0)) for j in range(A.shape[1]))


def forge(workload, cert: Certificate, privacy: str = "epsilon=1,delta=1e-6"):
    """A structurally valid plan whose noise is calibrated to the unsound float64 sensitivity,
    every other field consistent with it (a forger's best effort)."""
    W = parse_workload(workload) if isinstance(workload, str) else workload
    from workloads.spec import embedded_files

    sens = unsound_sensitivity(cert.factorization.A_factors[0])
    m = cert.factorization.strategy_rows
    spec = calibrate(parse_guarantee(privacy), sensitivity_l2=sens, grid=choose_grid(sens, m, "l2"),
                     dim=m, relation="add_remove")
    return dataclasses.replace(
        small_plan("identity:2", privacy), certificate=cert,
        workload={"spec": W.spec, "fingerprint": W.fingerprint(), "shape": list(W.shape)},
        embedded=embedded_files(W), noise=spec, sensitivity_exact=True,
        bias={"residual_bound": 1.0, "n_bound": "cap", "note": ""}, n_weights=(),
        expected_error=expected_error(cert.factorization, spec, 1.0))


def _refused_for_noise(plan, tmp_path, certificate=False):
    save_plan(plan, tmp_path / "underflow.plan")
    check = verify_plan(load_plan(tmp_path / "underflow.plan"), certificate=certificate)
    assert not check.passed
    text = " ".join(check.failures)
    assert "UNDER-NOISED" in text and "sensitivity" in text, text
    # the certified sensitivity is the exact one, within the rounding allowance
    exact = math.sqrt(float(exact_sensitivity(underflow_strategy()) / Fraction(TINY) ** 2)) * TINY
    assert exact <= check.recomputed_sensitivity <= exact * (1 + 1e-12)
    assert check.recomputed_sensitivity / unsound_sensitivity(underflow_strategy()) > 69
    return check


def test_underflow_reproduced_by_the_old_arithmetic():
    """The premise: float64 √(Σa²) of the underflow strategy is 70× below the exact value."""
    A = underflow_strategy()
    exact = math.sqrt(float(exact_sensitivity(A) / Fraction(TINY) ** 2)) * TINY
    assert unsound_sensitivity(A) == TINY
    assert exact / unsound_sensitivity(A) > 69


def test_underflow_variant_approx_gamma_2_forged_eta_refused(tmp_path):
    """identity:2, forged η = 2 (so R·A ≈ 0 passes the residual check), R of ordinary size."""
    A = underflow_strategy()
    R = (A / TINY).T / M_ROWS
    cert = Certificate("approx_gamma_2", Factorization.dense(R, A),
                       ApproxGamma2Witness(U=np.eye(2), d=np.ones(4)), eta=2.0)
    check = _refused_for_noise(forge("identity:2", cert), tmp_path)
    assert any("η = 2" in f for f in check.failures)


def test_underflow_variant_file_workload_of_tiny_entries_refused(tmp_path):
    """A gamma_f plan whose workload is a custom matrix W = R·A of tiny entries (no η)."""
    A = underflow_strategy()
    R = (A / TINY).T / M_ROWS
    np.save(tmp_path / "W.npy", R @ A)
    W = parse_workload(f"file:{tmp_path / 'W.npy'}")
    cert = Certificate("gamma_f", Factorization.dense(R, A), GammaFWitness((np.ones(2),)))
    _refused_for_noise(forge(W, cert), tmp_path)


def test_underflow_variant_weak_witness_refused_even_by_verify_with_certificate(tmp_path):
    """The same with a weak dual witness: verify *with* the certificate refuses it too (the
    certificate's upper bound is certified as well, so lower ≤ upper is not faked either)."""
    A = underflow_strategy()
    R = (A / TINY).T / M_ROWS
    np.save(tmp_path / "W.npy", R @ A)
    W = parse_workload(f"file:{tmp_path / 'W.npy'}")
    cert = Certificate("gamma_f", Factorization.dense(R, A), GammaFWitness((np.array([1.0, 1e-300]),)))
    _refused_for_noise(forge(W, cert), tmp_path, certificate=True)


# ---------------------------------------------------------------------------------------
# adversarial magnitudes across the whole float range

_EXPONENTS = st.integers(min_value=-1074, max_value=1023)


def _matrix(draw, rows, cols):
    vals = []
    for _ in range(rows * cols):
        kind = draw(st.sampled_from(["zero", "normal", "any"]))
        if kind == "zero":
            vals.append(0.0)
            continue
        e = draw(_EXPONENTS) if kind == "any" else draw(st.integers(-30, 30))
        mant = draw(st.floats(0.5, 1.0, exclude_max=True))
        sign = draw(st.sampled_from([-1.0, 1.0]))
        vals.append(sign * math.ldexp(mant, e))
    return np.array(vals, dtype=np.float64).reshape(rows, cols)


@st.composite
def matrices(draw):
    return _matrix(draw, draw(st.integers(1, 4)), draw(st.integers(1, 4)))


def _exact_col(A, j, p):
    col = [Fraction(float(a)) for a in A[:, j]]
    return sum((abs(c) for c in col), Fraction(0)) if p == 1 else sum((c * c for c in col), Fraction(0))


def _exact_pair(A, x, y, p):
    d = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip(A[:, x], A[:, y], strict=True)]
    return sum((abs(c) for c in d), Fraction(0)) if p == 1 else sum((c * c for c in d), Fraction(0))


def _at_least(value: float, exact: Fraction, p: int) -> bool:
    """value ≥ the exact sensitivity (compared exactly: value^p ≥ exact p-th power)."""
    return Fraction(value) ** p >= exact


@settings(max_examples=300, deadline=None)
@given(A=matrices(), norm=st.sampled_from(["l1", "l2"]))
def test_sensitivities_are_upper_bounds_or_refused_across_the_float_range(A, norm):
    p = 1 if norm == "l1" else 2
    try:
        ar = add_remove_sensitivity(A, norm).value
    except PrivacyError as exc:
        assert "range" in str(exc) or "overflows" in str(exc)
        return
    exact_ar = max(_exact_col(A, j, p) for j in range(A.shape[1]))
    assert _at_least(ar, exact_ar, p)
    if exact_ar > Fraction(2.0 ** -1000) ** p:  # and tight: within 1e-12 relative (normal range)
        assert Fraction(ar) ** p <= exact_ar * Fraction(1 + 1e-12) ** p
    rp = replace_sensitivity(A, norm).value
    N = A.shape[1]
    exact_rp = max((_exact_pair(A, x, y, p) for x in range(N) for y in range(N) if x != y),
                   default=Fraction(0))
    assert _at_least(rp, exact_rp, p)


@settings(max_examples=150, deadline=None)
@given(A=matrices(), B=matrices(), norm=st.sampled_from(["l1", "l2"]),
       relation=st.sampled_from(["add_remove", "replace"]))
def test_kronecker_sensitivity_upper_bound_across_the_float_range(A, B, norm, relation):
    p = 1 if norm == "l1" else 2
    try:
        value = kron_sensitivity([A, B], norm, relation).value
    except PrivacyError as exc:
        assert "range" in str(exc) or "overflows" in str(exc)
        return
    # the exact Kronecker product, entry by entry in rationals
    FA = [[Fraction(float(v)) for v in row] for row in A]
    FB = [[Fraction(float(v)) for v in row] for row in B]
    K = [[a * b for a in ra for b in rb] for ra in FA for rb in FB]
    cols = list(zip(*K, strict=True))
    def pw(vec):
        return sum((abs(c) if p == 1 else c * c for c in vec), Fraction(0))
    if relation == "add_remove":
        exact = max(pw(c) for c in cols)
    else:
        exact = max((pw([u - v for u, v in zip(cols[x], cols[y], strict=True)]) for x in range(len(cols))
                     for y in range(len(cols)) if x != y), default=Fraction(0))
    assert _at_least(value, exact, p)


def test_certified_column_norms_on_subnormal_and_huge_entries():
    """Entries at the ends of the range: subnormal squares and squares that overflow are
    handled by scaling (or refused), never silently rounded to 0 or inf."""
    for scale in (2.0 ** -1060, 2.0 ** -1000, 2.0 ** -537, 2.0 ** 600, 2.0 ** 1000):
        A = np.full((50, 3), 0.75 * scale)
        v = add_remove_sensitivity(A, "l2").value
        exact = math.sqrt(50) * 0.75 * scale
        assert exact <= v <= max(exact * (1 + 1e-13), 2.0 ** -1021)  # subnormal results: ≤ 2^-1021
    with pytest.raises(PrivacyError, match="overflows"):
        add_remove_sensitivity(np.full((50, 3), 1.5 * 2.0 ** 1023), "l2")
    with pytest.raises(PrivacyError, match="below 2\\^-480"):
        add_remove_sensitivity(np.array([[1.0, 0.0], [2.0 ** -600, 1.0]]), "l2")
