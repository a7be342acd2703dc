"""One shared Kronecker strategy for a union of Kronecker products: the structured
``kron`` family (``structured.shared_kron``) verifies, its stated error is the dense truth,
the Laplace auto route keeps the best family, and forged factors are refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.pure_dp.kron import factor_trace, gram_inverse
from factorize.pure_dp.p_identity import p_identity_strategy
from tests.plan_fixtures import forge_structured_plan, structured_refusal
from workloads import parse_workload

#: a union with a summed-out attribute in some blocks and matrix factors on both attributes
UNION = "vstack(kron(prefix:8,total:4),kron(identity:8,prefix:4),kron(total:8,identity:4))"
#: every block sums attribute 2 out: the shared strategy measures it summed out
SUMMED = "vstack(kron(prefix:4,total:3,total:2),kron(total:4,allrange:3,total:2))"
SPECS = [UNION, SUMMED, "kron(allrange:8,prefix:8)",
         "vstack(kron(allrange:8,identity:4),kron(identity:8,allrange:4))"]


def _dense_rmse(spec: str, A: np.ndarray, epsilon: float = 1.0) -> float:
    """``sqrt(‖W A⁺‖_F² · 2b² / k)``, ``b = Δ₁/ε`` with Δ₁ the largest column L1 norm of the
    dense strategy: computed from the dense matrices only."""
    W = parse_workload(spec).dense()
    b = float(np.abs(A).sum(axis=0).max()) / epsilon
    RA = W @ np.linalg.pinv(A)
    return math.sqrt(float(np.sum(RA * RA)) * 2.0 * b * b / W.shape[0])


@pytest.mark.parametrize("spec", SPECS)
def test_shared_kron_plan_verifies_and_states_the_dense_error(spec):
    plan = build_structured_plan(spec, "epsilon=1", strategy="kron")
    assert plan.family == "kron" and len(plan.strategy.blocks) == 1
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    A = plan.strategy.measured().dense()
    assert A.shape[1] <= 1024
    truth = _dense_rmse(spec, A)
    stated = plan.provenance["strategy_choice"]["rmse_at_epsilon_1"]
    assert abs(stated - truth) <= 1e-9 * truth, (stated, truth)
    # the released error: the same at the calibrated noise (its scale rounded up to the lattice)
    from factorize.privacy import sampled_variance

    W = parse_workload(spec).dense()
    R = plan.reconstruction.dense()
    np.testing.assert_allclose(R @ A, W, atol=1e-12)
    rmse = math.sqrt(sampled_variance(plan.noise) * float(np.sum(R * R)) / W.shape[0])
    assert abs(plan.expected_error["rmse"] - rmse) <= 1e-9 * rmse


def test_summed_out_attribute_is_not_measured():
    plan = build_structured_plan(SUMMED, "epsilon=1", strategy="kron")
    assert plan.strategy.blocks[0].support == (0, 1)
    assert verify_structured_plan(plan).passed


def test_plan_factors_are_the_optimiser_s_and_its_objective_is_the_plan_s():
    """The plan measures ``⊗ A_j`` with the p-Identity factors ``optimize_kron`` found (its
    objective Σ_b w_b² Π_j t_bj is the plan's ‖R‖_F² at Δ₁ = 1)."""
    plan = build_structured_plan(UNION, "epsilon=1", strategy="kron")
    search = plan.provenance["strategy_choice"]["search"]
    R = plan.reconstruction.dense()
    assert abs(float(np.sum(R * R)) - search["objective"]) <= 1e-9 * search["objective"]


def test_gram_inverse_of_a_p_identity_factor_is_the_pseudo_inverse():
    rng = np.random.default_rng(5)
    theta = rng.random((3, 11))
    A = p_identity_strategy(theta, 11)
    want = np.linalg.pinv(A.T @ A)
    np.testing.assert_allclose(gram_inverse(A, theta), want, rtol=1e-10, atol=1e-12)
    G = rng.random((4, 11))
    G = G.T @ G
    assert abs(float(np.sum(G * gram_inverse(A, theta))) - factor_trace(G, A)) <= 1e-10 * factor_trace(G, A)
    for F in (np.eye(6), np.ones((1, 6))):
        np.testing.assert_allclose(gram_inverse(F), np.linalg.pinv(F.T @ F), atol=1e-14)


@pytest.mark.parametrize("spec", [UNION, "kron(prefix:16,prefix:8)",
                                  "vstack(kron(identity:4,total:4),kron(total:4,identity:4),"
                                  "kron(identity:4,identity:4))"])
def test_laplace_auto_route_keeps_the_best_family(spec):
    plan = build_structured_plan(spec, "epsilon=1")
    search = plan.provenance["strategy_search"]
    tried = {r["family"]: r["score"] for r in search["tried"]}
    assert "kron" in tried and "union" in tried
    assert all(isinstance(r["seconds"], float) for r in search["tried"])
    scored = {k: v for k, v in tried.items() if v is not None}
    assert search["chosen"] == plan.family == min(scored, key=scored.get)
    # never worse than the union plan alone (the route before the kron family)
    union = build_structured_plan(spec, "epsilon=1", strategy="union")
    assert plan.expected_error["rmse"] <= union.expected_error["rmse"] * (1 + 1e-12)
    assert verify_structured_plan(plan).passed


def test_kron_wins_where_the_union_pays_per_block():
    """Two prefix blocks over the other attribute's total: one shared Kronecker product
    answers both from one measurement (the union splits ε between them)."""
    plan = build_structured_plan("vstack(kron(prefix:16,total:8),kron(total:16,prefix:8))", "epsilon=1")
    scores = {r["family"]: r["score"] for r in plan.provenance["strategy_search"]["tried"]}
    assert scores["kron"] < 0.7 * scores["union"]
    assert plan.family in ("kron", "marginal_weights")


# ---------------------------------------------------------------------------------------
# forgeries




def _factor_name(arrays) -> str:
    return sorted(k for k in arrays if k.startswith("A."))[0]


def _alter_factor(body, arrays):
    """One entry of a strategy factor changed, the reconstruction left as it was."""
    name = _factor_name(arrays)
    a = arrays[name].copy()
    a[0, 0] *= 0.5
    arrays[name] = a


@pytest.mark.parametrize("edit,words", [
    (_alter_factor, "W = R·A"),
])
def test_forged_factor_is_refused(tmp_path, edit, words):
    plan = build_structured_plan(UNION, "epsilon=1", strategy="kron")
    src = tmp_path / "plan.fzp"
    save_structured_plan(plan, src)
    assert verify_structured_plan(load_structured_plan(src)).passed
    dst = tmp_path / "forged.fzp"
    forge_structured_plan(src, dst, edit)
    assert words in structured_refusal(dst)


def test_forged_consistent_factor_is_refused_as_under_noised(tmp_path):
    plan = build_structured_plan(UNION, "epsilon=1", strategy="kron")
    src = tmp_path / "plan.fzp"
    save_structured_plan(plan, src)
    dst = tmp_path / "forged.fzp"

    def edit(body, arrays):
        name = _factor_name(arrays)
        j = int(name.split(".")[1])
        pos = body["strategy"]["blocks"][0]["support"].index(j)
        arrays[name] = arrays[name] * 2.0
        for r in {t["factors"][pos] for t in body["strategy"]["terms"]}:
            arrays[r] = arrays[r] * 0.5

    forge_structured_plan(src, dst, edit)
    text = structured_refusal(dst)
    assert "noise" in text or "sensitivity" in text, text


def test_cli_strategy_kron(tmp_path, capsys):
    from factorize.cli import main

    out = tmp_path / "p.fzp"
    code = main(["plan", "--workload", UNION, "--privacy", "epsilon=1", "--strategy", "kron",
                 "--out", str(out), "--json"])
    assert code == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["strategy"]["family"] == "kron"
    assert verify_structured_plan(load_structured_plan(out)).passed


def test_too_many_measurements_is_refused_before_the_search_and_recorded(monkeypatch):
    """The shared strategy measures every cell over the attributes some block keeps: past
    ``MAX_MEASUREMENTS`` the kron family is not applicable (stated, the union plan kept)."""
    from factorize.structured import shared_kron

    monkeypatch.setattr(shared_kron, "MAX_MEASUREMENTS", 31)  # UNION keeps 8×4 = 32 cells
    from factorize.structured.blocks import StructureError

    with pytest.raises(StructureError, match="measure at least 32"):
        build_structured_plan(UNION, "epsilon=1", strategy="kron")
    plan = build_structured_plan(UNION, "epsilon=1")
    search = plan.provenance["strategy_search"]
    assert plan.family != "kron"
    kron = [r for r in search["tried"] if r["family"] == "kron"][0]
    assert kron["score"] is None and "measure at least 32" in kron["failed"]
    assert verify_structured_plan(plan).passed
