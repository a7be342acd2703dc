"""Measurement records of a structured release (``structured.measurement_records``), their files
(``io.measurement_files``), ``factorize run --measurements-out`` and private-pgm (``io.mbi_export``).

Independent truths, on small random schemas where the strategy A and reconstruction R are
dense: the records are computed from the released estimate e = R ỹ alone; as a linear map of
the noise they must have covariance exactly σ²I (independent, the plan's σ), as a function of
the data exactly Q·m_clique (unbiased), and they must carry all of the release (R's rows in
their span; the least-squares estimate from the records reproduces the release's answers).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from factorize.io.measurement_files import (
    MeasurementFileError,
    MeasurementSet,
    read_measurements,
    write_files,
)
from factorize.kinds.structured.build import build_structured_plan
from factorize.privacy import sampled_variance
from factorize.structured.measurement_records import MeasurementExportError, exporter
from workloads.spec import parse_workload

SIZES = tuple(int(n) for n in np.random.default_rng(29).integers(2, 5, size=4))  # a random schema
MARGINALS = "marginals:" + "x".join(map(str, SIZES)) + ":2"
CDFS = (f"vstack(kron(prefix:{SIZES[0]},identity:{SIZES[1]},total:{SIZES[2]}),"
        f"kron(total:{SIZES[0]},prefix:{SIZES[1]},identity:{SIZES[2]}),"
        f"kron(identity:{SIZES[0]},total:{SIZES[1]},identity:{SIZES[2]}))")
#: marginal_weights measures the blocks (0,1), (0,2), (0,3), (1,2,3) here: overlapping cliques
OVERLAP = "marginals:6x5x6x5:2"
CASES = [("residual", MARGINALS, "orthogonal blocks"),
         ("marginal_weights", MARGINALS, "marginal blocks"),
         ("marginal_weights", OVERLAP, "marginal blocks"),
         ("subset_algebra", MARGINALS, "orthogonal blocks"),
         ("symmetric", MARGINALS, "orthogonal blocks"),
         ("union", MARGINALS, "separate blocks"),
         pytest.param(("marginal_weights", CDFS, "marginal blocks"), marks=pytest.mark.slow),  # 4 s plan
         ("subset_algebra", CDFS, "orthogonal blocks"),
         ("union", CDFS, "separate blocks")]
TOL = 1e-9


def _marginal(h: np.ndarray, sizes, attrs) -> np.ndarray:
    return h.reshape(sizes).sum(axis=tuple(j for j in range(len(sizes)) if j not in attrs))


def _lift(rec, sizes) -> np.ndarray:
    """The record's query as a matrix on the full histogram: Q·marginal_attrs (column of cell c:
    Q's column of c's clique cell)."""
    cells = np.unravel_index(np.arange(math.prod(sizes)), sizes)
    clique = np.ravel_multi_index(tuple(cells[j] for j in rec.attrs), tuple(sizes[j] for j in rec.attrs)) \
        if rec.attrs else np.zeros(math.prod(sizes), dtype=np.int64)
    return rec.matrix()[:, clique]


@functools.cache
def _plan(family: str, spec: str):
    return build_structured_plan(spec, "rho=0.5", strategy=family, gap_tol=1e-2)  # any certificate


def _flat(records) -> np.ndarray:
    return np.concatenate([r.values for r in records])


def _id(case) -> str:
    family, spec, _ = case.values[0] if hasattr(case, "values") else case
    return f"{family}-{ {CDFS: 'cdf', OVERLAP: 'overlap'}.get(spec, 'marginals')}"


@pytest.fixture(scope="module", params=CASES, ids=[_id(c) for c in CASES])
def case(request):
    family, spec, form = request.param
    plan = _plan(family, spec)
    W = parse_workload(spec)
    s = plan.strategy.measured()
    return plan, W, s.dense(), plan.reconstruction.rebased(s).dense(), form


def test_records_are_exact_independent_statements_of_the_release(case):
    plan, W, A, R, form = case
    ex = exporter(plan, W)
    assert ex.form == form
    sizes = tuple(plan.domain.sizes)
    sd = math.sqrt(sampled_variance(plan.noise))
    k = R.shape[0]
    assert all(r.stddev == sd for r in ex.records(np.zeros(k)))  # the release's own σ
    # the records as a linear map J of the released estimate (zero estimate, zero records)
    J = np.column_stack([_flat(ex.records(np.eye(k)[i])) for i in range(k)])
    N = J @ R  # ... and of the measurement noise z: records = J R (A h + z)
    np.testing.assert_allclose(N @ N.T, np.eye(N.shape[0]), rtol=0, atol=TOL)
    # unbiased: without noise every record is exactly Q·m_clique(h)
    h = np.random.default_rng(3).integers(0, 50, size=A.shape[1]).astype(float)
    for rec in ex.records(R @ A @ h):
        want = rec.apply(_marginal(h, sizes, rec.attrs))
        np.testing.assert_allclose(rec.values, want, rtol=0, atol=TOL * max(1.0, np.abs(want).max()))
    # the lattice: the exact measurement γ·round(Ã m/γ) puts each record within its stated
    # rounding bias of Q·m
    s = plan.strategy.measured()
    hi = h.astype(np.int64)
    q = s.measure({S: _marginal(hi, sizes, S).reshape(-1) for S in s.supports()}, plan.noise.grid)
    for rec in ex.records(R @ (plan.noise.grid * q.astype(np.float64))):
        gap = np.abs(rec.values - rec.apply(_marginal(h, sizes, rec.attrs))).max()
        assert rec.rounding_bias > 0 and gap <= rec.rounding_bias * (1 + 1e-9) + TOL * np.abs(rec.values).max()
    # sufficient: every answer is a linear function of the records (R's rows in N's span)
    C = np.linalg.lstsq(N.T, R.T, rcond=None)[0].T
    assert np.abs(C @ N - R).max() <= TOL * np.abs(R).max()


def test_least_squares_from_the_records_reproduces_the_release(case):
    """A noisy release e = R(A h + z): the least-squares estimate from the records gives back
    the release's answers — all of them under one estimate, each block's from its own record
    for separately estimated blocks."""
    plan, W, A, R, form = case
    ex = exporter(plan, W)
    sizes = tuple(plan.domain.sizes)
    rng = np.random.default_rng(5)
    h = rng.integers(0, 50, size=A.shape[1]).astype(float)
    e = R @ (A @ h + rng.normal(0.0, 10.0, size=A.shape[0]))
    recs = ex.records(e)
    Wd = W.dense()
    if form == "separate blocks":
        lay = ex.layout
        for o, rec in enumerate(recs):
            L = _lift(rec, sizes)
            x = np.linalg.lstsq(L, rec.values, rcond=None)[0]
            lo, hi = lay.offsets[o], lay.offsets[o + 1]
            np.testing.assert_allclose(Wd[lo:hi] @ x, e[lo:hi], rtol=0, atol=TOL * np.abs(e).max())
        return
    L = np.vstack([_lift(r, sizes) for r in recs])
    x = np.linalg.lstsq(L, _flat(recs), rcond=None)[0]
    np.testing.assert_allclose(Wd @ x, e, rtol=0, atol=TOL * np.abs(e).max())
    assert ex.total(e) == pytest.approx(float(x.sum()), rel=TOL)  # the tables' common total


def test_files_round_trip_and_refuse_what_they_cannot_state(tmp_path, case):
    plan, W, A, R, _ = case
    ex = exporter(plan, W)
    e = np.random.default_rng(7).normal(size=R.shape[0])
    mset = MeasurementSet(tuple(plan.domain.attributes), ex.sizes, tuple(ex.records(e)), ex.total(e),
                          {"form": ex.form})
    write_files(tmp_path, mset)
    back = read_measurements(tmp_path)
    assert back.names == mset.names and back.sizes == mset.sizes and back.total == mset.total
    assert back.meta["form"] == ex.form
    for a, b in zip(mset.records, back.records, strict=True):
        assert a.attrs == b.attrs and a.scale == b.scale and a.stddev == b.stddev
        assert a.rounding_bias == b.rounding_bias
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.matrix(), b.matrix())
    doc = json.loads((tmp_path / "measurements.json").read_text())
    assert doc["format"] == "factorize.measurements" and doc["version"] == 1
    doc["version"] = 2
    (tmp_path / "measurements.json").write_text(json.dumps(doc))
    with pytest.raises(MeasurementFileError, match="version 2"):
        read_measurements(tmp_path)
    doc["version"] = 1
    doc["records"][-1]["rows"] += 1
    (tmp_path / "measurements.json").write_text(json.dumps(doc))
    with pytest.raises(MeasurementFileError, match="rows"):
        read_measurements(tmp_path)


def test_overlapping_marginal_blocks_are_combined_per_residual():
    """The marginal-blocks form on overlapping cliques: one record per set U of the released
    tables' downward closure, of precision λ_U = Σ_{S⊇U} s_S²/Π_{S∖U} n_j."""
    plan = _plan("marginal_weights", OVERLAP)
    blocks = plan.strategy.measured().blocks
    assert sorted(b.support for b in blocks) == [(0, 1), (0, 2), (0, 3), (1, 2, 3)]
    recs = exporter(plan, parse_workload(OVERLAP)).records(np.zeros(181))
    assert [r.attrs for r in recs] == [(), (0,), (1,), (2,), (3,), (0, 1), (0, 2), (0, 3), (1, 2),
                                       (1, 3), (2, 3)]
    sizes = (6, 5, 6, 5)
    lam = sum(b.scale ** 2 / math.prod(sizes[j] for j in b.support if j != 0) for b in blocks
              if 0 in b.support)
    assert recs[1].scale == pytest.approx(math.sqrt(lam), rel=1e-15)


def test_a_release_that_is_not_the_least_squares_estimate_is_refused():
    """The probe (``measurement_records.probe``): the same residual plan with one
    reconstruction term scaled by 1.001 still has RA ≠ W only slightly, but its answers are no
    longer the least-squares estimate the records state — refused, naming the record."""
    import dataclasses

    from factorize.structured.reconstruction import StructuredReconstruction

    plan = _plan("residual", MARGINALS)
    rec = plan.reconstruction
    terms = list(rec.terms)
    terms[-1] = dataclasses.replace(terms[-1], scale=terms[-1].scale * 1.001)
    bad = dataclasses.replace(plan, reconstruction=StructuredReconstruction(
        rec.out_rows, terms, rec.arrays, rec.strategy))
    exporter(plan, parse_workload(MARGINALS))
    with pytest.raises(MeasurementExportError, match="not the least-squares estimate"):
        exporter(bad, parse_workload(MARGINALS))


def test_plans_without_such_a_statement_are_refused():
    W = parse_workload(MARGINALS)
    kron = build_structured_plan(MARGINALS, "rho=0.5", strategy="kron")
    with pytest.raises(MeasurementExportError, match="no released table contains them"):
        exporter(kron, W)
    laplace = build_structured_plan(MARGINALS, "epsilon=1", strategy="residual")
    assert laplace.noise.family == "laplace"
    with pytest.raises(MeasurementExportError, match="laplace"):
        exporter(laplace, W)
    spec = "vstack(kron(identity:2,identity:3),kron(total:2,width:3:2))"
    ranges = build_structured_plan(spec, "rho=0.5", strategy="union")
    with pytest.raises(MeasurementExportError, match="do not determine marginal tables"):
        exporter(ranges, parse_workload(spec))


# ------------------------------------------------------------------------------ factorize run


def _data(tmp_path: Path, sizes, n: int = 400) -> Path:
    rng = np.random.default_rng(11)
    path = tmp_path / "data.csv"
    cols = [f"x{j}" for j in range(len(sizes))]
    rows = rng.integers(0, sizes, size=(n, len(sizes)))
    path.write_text(",".join(cols) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


def _answers(path: Path) -> np.ndarray:
    from factorize.executor.output import read_answers

    return np.asarray(read_answers(path)[0]["estimate"], dtype=np.float64)


def test_run_writes_the_measurements_with_the_answers(tmp_path):
    from factorize.cli import main

    plan = tmp_path / "p.plan"
    assert main(["plan", "--workload", MARGINALS, "--privacy", "rho=0.5", "--strategy",
                 "marginal_weights", "--out", str(plan)]) == 0
    data = _data(tmp_path, SIZES)
    out, meas = tmp_path / "a.csv", tmp_path / "meas"
    assert main(["run", str(plan), "--data", str(data), "--out", str(out), "--seed", "3",
                 "--measurements-out", str(meas)]) == 0
    mset = read_measurements(meas)
    assert mset.meta["test_mode"] is True and "NOT PRIVATE" in mset.meta["warning"]
    assert mset.meta["plan_sha256"] and mset.meta["family"] == "marginal_weights"
    e = _answers(out)
    L = np.vstack([_lift(r, SIZES) for r in mset.records])
    x = np.linalg.lstsq(L, _flat(mset.records), rcond=None)[0]
    np.testing.assert_allclose(parse_workload(MARGINALS).dense() @ x, e, rtol=0, atol=TOL * np.abs(e).max())
    # an existing folder: refused before anything is read (no answers file), unless --overwrite
    out2 = tmp_path / "b.csv"
    assert main(["run", str(plan), "--data", str(data), "--out", str(out2), "--seed", "4",
                 "--measurements-out", str(meas)]) == 2
    assert not out2.exists()
    assert main(["run", str(plan), "--data", str(data), "--out", str(out2), "--seed", "4",
                 "--measurements-out", str(meas), "--overwrite"]) == 0
    assert not np.array_equal(_flat(read_measurements(meas).records), _flat(mset.records))
    other = tmp_path / "other"  # --overwrite never removes a folder that is not measurements
    other.mkdir()
    (other / "keep.txt").write_text("x")
    assert main(["run", str(plan), "--data", str(data), "--out", str(out2), "--seed", "4",
                 "--measurements-out", str(other), "--overwrite"]) == 2
    assert (other / "keep.txt").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_run_refuses_an_unexportable_plan_before_anything_is_written(tmp_path):
    from factorize.cli import main

    plan = tmp_path / "k.plan"
    assert main(["plan", "--workload", MARGINALS, "--privacy", "rho=0.5", "--strategy", "kron",
                 "--out", str(plan)]) == 0
    out, meas = tmp_path / "a.csv", tmp_path / "meas"
    assert main(["run", str(plan), "--data", str(_data(tmp_path, SIZES)), "--out", str(out),
                 "--seed", "3", "--measurements-out", str(meas)]) == 2
    assert not out.exists() and not meas.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---------------------------------------------------------------------------------- private-pgm

ADULT_ATTRS = ("workclass", "education-num", "marital-status", "race", "sex", "income>50K")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mbi") is None,
                    reason="private-pgm (mbi, with jax) is not installed in this environment")
def test_mbi_fits_and_samples_from_adult_measurements(tmp_path, adult, capsys):
    """Adult, all 2-way marginals of six attributes (residual plan, ρ = 0.05, seeded): mbi's loss
    from the records is zero at the release's own tables (its queries read the cliques as
    factorize does), the fitted model's marginals are at least as close to the truth as the raw
    release, and it draws synthetic records of the release's size."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import mbi

    from factorize.executor.pipeline import run
    from factorize.io.mbi_export import load_mbi

    csv, domain_json = adult
    sizes_all = json.loads(Path(domain_json).read_text())
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({a: sizes_all[a] for a in ADULT_ATTRS}))
    from factorize.cli import main

    plan = tmp_path / "adult.plan"
    assert main(["plan", "--workload", "marginals:" + "x".join(str(sizes_all[a]) for a in ADULT_ATTRS) + ":2",
                 "--domain", str(domain), "--privacy", "rho=0.05", "--strategy", "residual",
                 "--out", str(plan)]) == 0
    rel = run(str(plan), str(csv), str(tmp_path / "a.csv"), seed=1, allow_extra_columns=True,
              measurements=str(tmp_path / "meas"))
    m = load_mbi(tmp_path / "meas")
    names = ADULT_ATTRS
    header = Path(csv).read_text().split("\n", 1)[0].split(",")
    coded = np.loadtxt(csv, delimiter=",", skiprows=1, dtype=np.int64,
                       usecols=[header.index(a) for a in names])
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    true = {}
    for c in pairs:
        shape = tuple(sizes_all[a] for a in c)
        idx = np.ravel_multi_index(tuple(coded[:, names.index(a)] for a in c), shape)
        true[c] = np.bincount(idx, minlength=math.prod(shape)).astype(np.float64)
    # the release's own tables, per pair (its answers are one consistent estimate)
    e = np.asarray(rel.estimate)
    from factorize.postprocess.tables import marginal_layout

    lay = marginal_layout(parse_workload(rel.metadata["workload"]), [sizes_all[a] for a in names])
    tables = dict(zip([tuple(names[j] for j in T) for T in lay.tables], lay.targets(e)[0], strict=True))
    cv = mbi.CliqueVector.from_projectable(_Tables(tables, m.domain), list(tables))
    loss = mbi.marginal_loss.from_linear_measurements(m.measurements, domain=m.domain)
    assert float(loss(cv)) <= 1e-12 * m.total
    model = mbi.estimation.MirrorDescent().estimate(m.domain, m.measurements, known_total=m.total,
                                                    iters=1000)
    err_model = sum(float(np.sum((np.asarray(model.project(c).datavector()) - t) ** 2)) for c, t in true.items())
    err_release = sum(float(np.sum((tables[c].reshape(-1) - t) ** 2)) for c, t in true.items())
    synth = model.synthetic_data()
    assert tuple(synth.domain.attributes) == names
    assert abs(synth.records - m.total) <= 1.0
    with capsys.disabled():
        print(f"\nmbi on Adult ({len(true)} pairs): total squared error of the model's 2-way marginals "
              f"{err_model:.6g}, of the raw release {err_release:.6g}; n̂ = {m.total:.1f}, "
              f"synthetic records {synth.records}")
    assert err_model <= 1.05 * err_release


class _Tables:
    """The release's consistent tables as an mbi Projectable (tests only)."""

    def __init__(self, tables, domain) -> None:
        self.tables, self.domain = tables, domain

    def project(self, attrs):
        import mbi

        attrs = tuple(attrs)
        for c, t in self.tables.items():
            if set(attrs) <= set(c):
                f = mbi.Factor(self.domain.project(c), np.asarray(t).reshape(self.domain.project(c).shape))
                return f.project(attrs)
        raise KeyError(attrs)

    def supports(self, attrs) -> bool:
        return any(set(attrs) <= set(c) for c in self.tables)


def test_the_folder_appears_whole_or_not_at_all(tmp_path):
    """Staged, then aborted: nothing; a staging folder of a dead process is removed by the
    next export to the same destination; committed: the two files, readable."""
    import os

    from factorize.io.measurement_files import MeasurementsOutput

    plan = _plan("residual", MARGINALS)
    ex = exporter(plan, parse_workload(MARGINALS))
    e = np.random.default_rng(2).normal(size=ex.layout.k)
    mset = MeasurementSet(tuple(plan.domain.attributes), ex.sizes, tuple(ex.records(e)), ex.total(e))
    target = tmp_path / "m"
    out = MeasurementsOutput(target)
    out.stage(mset)
    out.abort()
    assert list(tmp_path.iterdir()) == []
    dead = next(p for p in range(4_000_000, 4_100_000) if not Path(f"/proc/{p}").exists())
    stale = tmp_path / f".m.partial.{dead}.abc.tmp"
    stale.mkdir()
    live = tmp_path / f".m.partial.{os.getpid()}.abc.tmp"  # this process: kept
    live.mkdir()
    out = MeasurementsOutput(target)
    assert not stale.exists() and live.exists()
    out.stage(mset)
    out.commit()
    assert sorted(p.name for p in target.iterdir()) == ["arrays.npz", "measurements.json"]
    assert len(read_measurements(target).records) == len(mset.records)
