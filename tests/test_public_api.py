"""The curated public API: ``factorize.<name>`` for the handful of names a
user needs, loaded on first use — ``import factorize`` loads neither numpy nor a solver, and
the executor's names load no solver."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import factorize


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_import_is_light_and_executor_names_load_no_solver():
    mods = _modules_after("import factorize")
    assert "numpy" not in mods and "cvxpy" not in mods
    mods = _modules_after("import factorize; factorize.run; factorize.load_plan; factorize.verify_plan; "
                          "factorize.parse_workload; factorize.Domain")
    assert not {"cvxpy", "scs", "clarabel", "mosek"} & mods


def test_every_public_name_resolves_and_nothing_else():
    for name in factorize.__all__:
        assert getattr(factorize, name) is not None
    try:
        factorize.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("an unknown attribute resolved")


def test_plan_save_load_verify_run_with_public_names_only(tmp_path):
    dom = factorize.Domain(["a", "b"], [3, 4])
    plan = factorize.build_structured_plan("marginals:3x4:1", factorize.parse_guarantee("rho=0.5"),
                                           domain=dom)
    factorize.save_plan(plan, tmp_path / "p.plan")
    again = factorize.load_plan(tmp_path / "p.plan")
    assert factorize.verify_plan(again).passed
    rng = np.random.default_rng(0)
    rows = np.column_stack([rng.integers(0, 3, 200), rng.integers(0, 4, 200)])
    (tmp_path / "d.csv").write_text("a,b\n" + "\n".join(f"{x},{y}" for x, y in rows) + "\n")
    rel = factorize.run(str(tmp_path / "p.plan"), str(tmp_path / "d.csv"), str(tmp_path / "o.csv"), seed=1)
    assert rel.estimate.size == 7 and rel.metadata["test_mode"] is True


def test_errors_have_one_root():
    """Every error the project raises on purpose derives from factorize.FactorizeError and keeps
    its built-in base (so ``except ValueError`` code keeps working)."""
    import factorize
    from factorize.engines.errors import DataError
    from factorize.ledger import LedgerTampered
    from factorize.plan.errors import PlanError
    from factorize.privacy import PrivacyError
    from solvers.errors import CertificateGapError
    from workloads.errors import WorkloadSpecError

    for cls in (DataError, LedgerTampered, PlanError, PrivacyError, WorkloadSpecError):
        assert issubclass(cls, factorize.InputError) and issubclass(cls, ValueError), cls
    assert issubclass(CertificateGapError, factorize.SolverError)
    assert issubclass(CertificateGapError, RuntimeError)
    assert factorize.SolverError.exit_code == 3 and factorize.InputError.exit_code == 2
    assert issubclass(factorize.InputError, factorize.FactorizeError)
