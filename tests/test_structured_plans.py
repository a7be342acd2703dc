"""Structured plans end to end: plan, save, verify and run marginal
and union-of-Kronecker plans without forming the domain; forged plans refused with the numbers;
the released variances are the certified optimum's; Monte Carlo over the executor.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.plan.errors import PlanError
from tests.plan_fixtures import forge_structured_plan, structured_refusal
from workloads import Domain

SIZES = (3, 2, 4, 2)
DOMAIN = Domain(["a", "b", "c", "d"], list(SIZES))


def _records(path: Path, n: int = 500, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, s, n) for s in SIZES])
    codes[: n // 3, 1] = codes[: n // 3, 0] % 2  # some correlation
    lines = ["a,b,c,d"] + [",".join(str(int(v)) for v in row) for row in codes]
    path.write_text("\n".join(lines) + "\n")
    return codes


def _hist(codes: np.ndarray) -> np.ndarray:
    idx = np.ravel_multi_index(codes.T, SIZES)
    return np.bincount(idx, minlength=math.prod(SIZES))


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("structured")
    out = {}
    for name, spec, norm, priv in (
            ("gf", "marginals:3x2x4x2:2", "gamma_f", "rho=0.5"),
            ("g2", "marginals_upto:3x2x4x2:2", "gamma_2", "epsilon=1,delta=1e-6"),
            ("union", "vstack(kron(prefix:3,identity:2,total:4,total:2),"
                      "kron(total:3,total:2,allrange:4,identity:2))", "gamma_f", "rho=0.5")):
        plan = build_structured_plan(spec, priv, norm=norm, domain=DOMAIN,
                                     strategy="union" if name == "union" else None)
        save_structured_plan(plan, d / f"{name}.plan")
        out[name] = d / f"{name}.plan"
    codes = _records(d / "data.csv")
    return out, d / "data.csv", codes


def test_plans_verify_and_state_the_certified_optimum(plans):
    paths, _, _ = plans
    for name, p in paths.items():
        plan = load_structured_plan(p)
        check = verify_structured_plan(plan)
        assert check.passed, (name, check.failures)
        c = plan.certificate
        assert c["lower"] <= c["achieved"] * (1 + 1e-9)
        if name != "union":  # the residual plan attains the certified optimum
            assert c["achieved"] == pytest.approx(c["upper"], rel=1e-9)
            assert c["gap"] <= 1e-6
            assert plan.bias["n_bound"] == "total"  # n bounded by the total's measurement
        else:  # n bounded by weights on one block's answers (Wᵀb ≥ μ > β‖b‖₁)
            assert plan.bias["n_bound"] == "weights" and plan.n_weights


def test_released_variances_are_the_optimum(plans):
    """Total variance k·γ_F²·σ̃² (γ_F plan) and worst cell γ₂²·σ̃² (γ₂ plan), σ̃² the variance
    of the noise per unit of sensitivity."""
    paths, _, _ = plans
    for name, norm in (("gf", "gamma_f"), ("g2", "gamma_2")):
        plan = load_structured_plan(paths[name])
        e = plan.expected_error
        k = plan.shape[0]
        unit = e["noise_variance"] / plan.noise.base_sensitivity ** 2  # variance per unit Δ²
        g = plan.certificate["upper"]
        if norm == "gamma_f":
            assert e["total_variance"] == pytest.approx(k * g * g * unit, rel=1e-9)
        else:
            assert e["max_variance"] == pytest.approx(g * g * unit, rel=1e-9)


def test_run_end_to_end_matches_the_dense_computation(plans, tmp_path):
    from factorize.executor.output import read_answers
    from factorize.executor.pipeline import run
    from factorize.privacy import TestRandom, sample_lattice

    paths, data, codes = plans
    h = _hist(codes)
    for name, p in paths.items():
        out = tmp_path / f"{name}.csv"
        rel = run(str(p), str(data), str(out), seed=7)
        plan = load_structured_plan(p)
        A = plan.strategy.measured().dense()
        R = plan.reconstruction.dense()
        grid = plan.noise.grid
        q = np.rint(A @ h / grid)  # the exact measurement, away from ties at this grid
        Y = sample_lattice(np.zeros(q.size, dtype=np.int64), plan.noise, TestRandom(7))
        dense = R @ (grid * q + Y)
        assert np.abs(rel.estimate - dense).max() <= 1e-9 * max(1.0, np.abs(dense).max())
        cols, meta = read_answers(out)
        assert meta["test_mode"] is True and "NOT PRIVATE" in meta["warning"]
        assert np.array_equal(cols["estimate"], rel.estimate)
        if name != "union":
            # every answer labeled with its table and cell, in W's row order: the count the
            # cell names, taken from the records directly, is W's row on the histogram
            names = list(DOMAIN.attributes)
            Wh = (plan.reconstruction.dense() @ plan.strategy.dense()) @ h
            for i in range(len(cols["table"])):
                lab = cols["table"][i]
                attrs = [] if lab == "total" else [names.index(a) for a in lab.split(",")]
                values = [int(cols[names[j]][i]) for j in attrs]
                count = int(np.sum(np.all(codes[:, attrs] == values, axis=1))) if attrs else len(codes)
                assert abs(Wh[i] - count) < 1e-6, (i, lab, values)
        else:
            assert set(cols["table"]) == {"cdf(a) by b", "range(c) by d"}
        # the intervals hold the true answers (95% each; the noise is small here)
        W = plan.reconstruction.dense() @ plan.strategy.dense()
        truth = W @ h
        inside = np.mean((cols["ci_low"] <= truth) & (truth <= cols["ci_high"]))
        assert inside >= 0.8
        # the bias term is negligible: n⁺ is bounded from the release, not by 2^53
        assert meta["ci"]["n_upper"] < 10 * codes.shape[0]


def test_monte_carlo_per_cell_variance_matches_the_claim(plans):
    """Empirical variance of every released cell over 1,000 runs of the executor's release
    (test-mode noise) against the plan's std_error², each within a 99%/k chi-square band."""
    from factorize.executor.structured import measure as structured_measure
    from factorize.executor.structured import release
    from factorize.privacy import TestRandom
    from factorize.structured.strategy import marginal_of

    paths, _, codes = plans
    plan = load_structured_plan(paths["g2"])
    check = verify_structured_plan(plan)
    h = _hist(codes)

    class Tables(dict):
        n_records = int(h.sum())

    tables = Tables({T: marginal_of(h, SIZES, T) for T in plan.strategy.supports()})
    q = structured_measure(plan, tables)
    runs = 1000
    est = np.empty((runs, plan.shape[0]))
    for r in range(runs):
        est[r] = release(plan, check, q, TestRandom(1000 + r)).estimate
    se = release(plan, check, q, TestRandom(0)).std_error
    var = est.var(axis=0, ddof=1)
    k = se.size
    lo = stats.chi2.ppf(0.005 / k, runs - 1) / (runs - 1)
    hi = stats.chi2.ppf(1 - 0.005 / k, runs - 1) / (runs - 1)
    ratio = var / se ** 2
    assert np.all((lo <= ratio) & (ratio <= hi)), (ratio.min(), ratio.max(), lo, hi)


# ---------------------------------------------------------------------------------------
# forgeries: written with valid digests, refused by verification with the numbers




def _scale_block(body, arrays):
    a = arrays["strategy.scale"].copy()
    a[-1] *= 2.0
    arrays["strategy.scale"] = a


def _scale_block_and_reconstruction(body, arrays):
    _scale_block(body, arrays)
    inv = arrays["recon.inverse"].copy()
    inv[-1] /= 2.0
    arrays["recon.inverse"] = inv


def _drop_residual(body, arrays):
    keep = np.arange(arrays["strategy.scale"].size) != 2
    for k in ("strategy.support", "strategy.scale", "recon.inverse"):
        arrays[k] = arrays[k][keep]
    body["strategy"]["blocks"] -= 1
    body["strategy"]["measurements"] -= 1


def _duplicate_residual(body, arrays):
    for k in ("strategy.support", "strategy.scale", "recon.inverse"):
        arrays[k] = np.concatenate([arrays[k], arrays[k][-1:]])
    body["strategy"]["blocks"] += 1


def _foreign_subset(body, arrays):
    sup = arrays["strategy.support"]
    sup = np.hstack([sup, np.full((sup.shape[0], 1), -1.0)])  # room for a 3-way subset
    arrays["strategy.support"] = np.vstack([sup, [[0.0, 1.0, 2.0]]])
    arrays["strategy.scale"] = np.append(arrays["strategy.scale"], 0.01)
    arrays["recon.inverse"] = np.append(arrays["recon.inverse"], 100.0)
    body["strategy"]["blocks"] += 1


def _wrong_weight(body, arrays):
    w = arrays["recon.weight"].copy()
    w[0] = 2.0
    arrays["recon.weight"] = w


def _wrong_witness(body, arrays):
    x = arrays["cert.x"].copy()
    x[0] *= 0.5
    arrays["cert.x"] = x


def _divided_claim(body, arrays):
    body["expected_error"]["rmse"] /= 100.0


def _under_noised(body, arrays):
    body["noise"]["scale"] *= 0.7


def _wide_basis(body, arrays):
    name = next(k for k in arrays if k.startswith("U."))
    arrays[name] = arrays[name] * 2.0


FORGERIES = {
    "scaled block": (_scale_block, "W = R·A|sensitivity|noise"),
    "scaled block and reconstruction": (_scale_block_and_reconstruction, "noise|sensitivity|claims"),
    "dropped residual": (_drop_residual, "closure|full product|structure|load"),
    "duplicated residual": (_duplicate_residual, "twice|listed twice|load"),
    "subset outside the closure": (_foreign_subset, "outside the workload's closure|load"),
    "wrong workload weight": (_wrong_weight, "weight|structure"),
    "certificate coefficients": (_wrong_witness, "certificate"),
    "accuracy claim divided by 100": (_divided_claim, "expected_error.rmse"),
    "under-noised": (_under_noised, "UNDER-NOISED"),
    "n bound claimed without a total": (
        lambda body, arrays: body["bias"].update(n_bound="weights", n_block=0), "n bound|bias|claims"),
    "scaled basis": (_wide_basis, "W = R·A|sensitivity|noise"),
}


@pytest.mark.parametrize("what", sorted(FORGERIES))
def test_forged_structured_plans_are_refused(plans, tmp_path, what):
    import re

    paths, _, _ = plans
    edit, pattern = FORGERIES[what]
    src = paths["g2"] if what == "subset outside the closure" else paths["gf"]
    dst = tmp_path / "forged.plan"
    forge_structured_plan(src, dst, edit)
    why = structured_refusal(dst)
    assert re.search(pattern, why), why


def test_forged_plan_is_not_run_and_nothing_is_charged(plans, tmp_path):
    from factorize.executor.pipeline import run
    from factorize.ledger import Ledger

    paths, data, _ = plans
    dst = tmp_path / "forged.plan"
    forge_structured_plan(paths["gf"], dst, _under_noised)
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "zcdp", "rho": 10.0})
    with pytest.raises(PlanError, match="UNDER-NOISED"):
        run(str(dst), str(data), str(tmp_path / "out.csv"), ledger=str(L), dataset="d")
    assert not (tmp_path / "out.csv").exists()
    assert Ledger.open(L).history("d") == []


def test_marginal_plan_of_a_domain_too_large_to_form(tmp_path):
    """40 binary attributes (2^40 cells, beyond a dense histogram's reach here): plan, verify,
    run from records, all 2-way (the benchmark goes to 100 attributes)."""
    from factorize.executor.pipeline import run

    d = 40
    spec = "marginals:" + "x".join(["2"] * d) + ":2"
    plan = build_structured_plan(spec, "rho=1", norm="gamma_2")
    p = tmp_path / "p.plan"
    save_structured_plan(plan, p)
    assert p.stat().st_size < 2_000_000
    assert verify_structured_plan(load_structured_plan(p)).passed
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 2, (300, d))
    (tmp_path / "r.csv").write_text(",".join(f"x{j}" for j in range(d)) + "\n"
                                    + "\n".join(",".join(map(str, r)) for r in codes) + "\n")
    rel = run(str(p), str(tmp_path / "r.csv"), str(tmp_path / "o.parquet"), seed=1)
    assert rel.estimate.size == 4 * d * (d - 1) // 2
    # the first block is the (x0, x1) table: its truth within 6 standard errors
    truth = np.bincount(codes[:, 0] * 2 + codes[:, 1], minlength=4)
    assert np.all(np.abs(rel.estimate[:4] - truth) <= 6 * rel.std_error[:4] + 1e-6)


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_weighted_marginals_plan_at_the_optimum(norm):
    """Weighted blocks (``scale``): the residual plan attains the weighted optimum, and a
    forged weight is refused."""
    import numpy as np

    from workloads import parse_workload

    spec = "vstack(scale(2.5,marginals:2x3x4:1),marginals:2x3x4:2)"
    plan = build_structured_plan(spec, "rho=0.5", norm=norm)
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    assert plan.certificate["achieved"] == pytest.approx(plan.certificate["upper"], rel=1e-9)
    W = parse_workload(spec).dense()
    assert np.abs(plan.reconstruction.dense() @ plan.strategy.dense() - W).max() <= 1e-13 * 2.5


def test_union_plan_measured_from_distinct_records_without_forming_the_domain(tmp_path):
    """A Kronecker block whose support has 4.8·10⁷ cells (> engines.DENSE_TABLE_CELLS): the
    engine returns the records' distinct cells (a SparseTable), the exact lattice measurement
    is taken from them (privacy.lattice.lattice_image_sparse) and equals the exact rational
    value computed record by record; the run releases answers within their intervals."""
    from fractions import Fraction

    from factorize.engines.marginal_tables import SparseTable
    from factorize.executor.data import load_marginals
    from factorize.executor.pipeline import run
    from factorize.executor.structured import measure
    from factorize.privacy.lattice import quantize

    sizes = (400, 400, 300)
    dom = Domain(["x", "y", "z"], list(sizes))
    spec = "kron(width:400:398,width:400:398,width:300:298)"
    plan = build_structured_plan(spec, "rho=0.5", norm="gamma_f", domain=dom, strategy="union")
    p = tmp_path / "u.plan"
    save_structured_plan(plan, p)
    plan = load_structured_plan(p)
    assert verify_structured_plan(plan).passed
    rng = np.random.default_rng(11)
    codes = np.column_stack([rng.integers(0, s, 600) for s in sizes])
    codes[:100] = codes[0]  # repeated records: one distinct cell with count 100
    (tmp_path / "r.csv").write_text("x,y,z\n" + "\n".join(",".join(map(str, r)) for r in codes) + "\n")
    tables = load_marginals(str(tmp_path / "r.csv"), dom, plan.strategy.supports())
    (support,) = plan.strategy.supports()
    assert isinstance(tables[support], SparseTable) and tables[support].cells.size <= 501
    q = measure(plan, tables)
    # exact truth: Σ_records ⊗_j Ã_j[:, x_j], divided by the grid, rounded half to even
    strat = plan.strategy.measured()
    (blk,) = strat.blocks
    Fs = [quantize(strat.arrays[n]).measured for n in blk.names]
    rows = [F.shape[0] for F in Fs]
    for i in range(math.prod(rows)):
        ri = np.unravel_index(i, rows)
        total = Fraction(0)
        for rec in codes:
            v = Fraction(blk.scale)
            for F, a, x in zip(Fs, ri, rec, strict=True):
                v *= Fraction(float(F[a, x]))
            total += v
        assert int(q[i]) == round(total / Fraction(plan.noise.grid))
    rel = run(str(p), str(tmp_path / "r.csv"), str(tmp_path / "o.parquet"), seed=5)
    W = [np.array([[1.0 if i <= x < i + w else 0.0 for x in range(n)] for i in range(n - w + 1)])
         for n, w in zip(sizes, (398, 398, 298), strict=True)]
    truth = np.zeros(27)
    for rec in codes:
        truth += np.kron(np.kron(W[0][:, rec[0]], W[1][:, rec[1]]), W[2][:, rec[2]])
    inside = (rel.ci_low <= truth) & (truth <= rel.ci_high)
    assert inside.sum() >= 24, inside  # 95% intervals; 27 answers
