"""A solve that fails, stalls, times out or is inaccurate raises an error saying which."""

from __future__ import annotations

import pytest

from factorize.planner.routes import solve
from solvers import (
    BackendUnavailableError,
    CertificateGapError,
    SolverInaccurateError,
    SolverOptions,
    SolverTimeLimitError,
    mosek_available,
)


def test_iteration_cap_raises_inaccurate():
    with pytest.raises(SolverInaccurateError, match="iteration cap of 5"):
        solve("prefix:32", "gamma_2", method="sdp",
              options=SolverOptions(backend="scs", eps=1e-10, max_iters=5))


def test_time_limit_raises():
    with pytest.raises(SolverTimeLimitError, match="time limit"):
        solve("allrange:24", "gamma_2", method="sdp",
              options=SolverOptions(backend="scs", eps=1e-12, time_limit=0.05))


def test_dual_time_limit_raises():
    with pytest.raises(SolverTimeLimitError, match=r"dual solver reached the [0-9.]+ s limit"):
        solve("allrange:24", "gamma_2", method="dual", options=SolverOptions(time_limit=0.05))


def test_unreachable_gap_raises_with_numbers():
    with pytest.raises(CertificateGapError, match=r"certified relative gap .* exceeds the requested 1e-14"):
        solve("prefix:16", "gamma_2", gap_tol=1e-14)


def test_loose_tolerance_is_refused_not_returned():
    """A loose explicit eps yields a loose certificate, which the planner refuses."""
    with pytest.raises(CertificateGapError):
        solve("allrange:16", "gamma_2", method="sdp", options=SolverOptions(backend="scs", eps=1e-2))


@pytest.mark.skipif(mosek_available(), reason="MOSEK is licensed here; the refusal path cannot be shown")
def test_mosek_without_license_is_a_clear_error():
    with pytest.raises(BackendUnavailableError, match="MOSEK"):
        solve("prefix:4", "gamma_f", options=SolverOptions(backend="mosek"))


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="back-end"):
        SolverOptions(backend="cplex")
    with pytest.raises(ValueError, match="eps"):
        SolverOptions(eps=2.0)
    with pytest.raises(ValueError, match="eta"):
        solve("prefix:4", "approx_gamma_2")
    with pytest.raises(ValueError, match="eta"):
        solve("prefix:4", "gamma_f", eta=0.1)
    with pytest.raises(ValueError, match="unknown norm"):
        solve("prefix:4", "gamma_3")
    with pytest.raises(ValueError, match="unknown method"):
        solve("prefix:4", "gamma_f", method="newton")
    with pytest.raises(ValueError, match="approximate γ₂ uses"):
        solve("prefix:4", "approx_gamma_2", eta=0.1, method="dual")


def test_stall_at_first_tolerance_falls_back_to_looser_ones(monkeypatch):
    """Clarabel stalling at the schedule's first tolerance: the planner tries LOOSER_ON_STALL in
    turn and keeps the first solve (its certificate re-checked); a stall at every tolerance, or
    at an explicit --eps, still raises."""
    pytest.importorskip("clarabel")
    from factorize.planner import routes

    real = routes._solve_dense_once
    tried: list[float] = []

    def stall_below_1e7(W, norm, eta, opts, residual_tol):
        tried.append(opts.eps)
        if opts.eps < 1e-7:
            raise SolverInaccurateError("stalled (test)")
        return real(W, norm, eta, opts, residual_tol)

    monkeypatch.setattr(routes, "_solve_dense_once", stall_below_1e7)
    r = solve("prefix:6", "gamma_f", method="sdp", options=SolverOptions("clarabel"), gap_tol=1e-4)
    assert tried == [1e-8, 1e-7] and r.solves[0].eps == 1e-7 and r.verification.passed

    def always_stall(W, norm, eta, opts, residual_tol):
        raise SolverInaccurateError("stalled (test)")

    monkeypatch.setattr(routes, "_solve_dense_once", always_stall)
    with pytest.raises(SolverInaccurateError):
        solve("prefix:6", "gamma_f", method="sdp", options=SolverOptions("clarabel"))
    with pytest.raises(SolverInaccurateError):
        solve("prefix:6", "gamma_f", method="sdp", options=SolverOptions("clarabel", eps=1e-8))
