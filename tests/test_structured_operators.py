"""Structured strategies and reconstructions against their dense counterparts: every operation
of ``factorize.structured`` on small domains equals the same operation on the dense matrices,
to stated tolerances.

Independent truth: dense ``np.kron`` products of the blocks, the projectors ``P_T`` of the
subset algebra (``marginal_algebra.projector_dense``), ``privacy.sensitivity`` on the dense
strategy, exact rational arithmetic (``fractions``) for the lattice measurement.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from factorize.planner.marginal_algebra import projector_dense
from factorize.privacy.sensitivity import sensitivity
from factorize.structured import residual, union, union_build
from factorize.structured import sensitivity as ssens
from factorize.structured.blocks import StructureError
from factorize.structured.identity import reconstruction_residual
from factorize.structured.reconstruction import StructuredReconstruction
from factorize.structured.strategy import marginal_of
from factorize.structured.workload_blocks import AxisFactor, WorkloadBlock, workload_blocks

CASES = [
    ((3, 2, 4), [(0, 1), (1, 2), (0,)], [1.0, 2.0, 0.5]),
    ((2, 2, 2, 2), [(0, 1), (2, 3), (0, 3), (0, 1)], [1.0, 1.0, 1.0, 3.0]),
    ((5, 1, 3), [(0, 2), (0,), ()], [1.0, 1.0, 1.0]),
    ((4, 3), [(0, 1)], [1.0]),
]


def _marginal_blocks(sizes, subsets, weights):
    return [WorkloadBlock(w, tuple(AxisFactor("identity" if j in S else "total", n)
                                   for j, n in enumerate(sizes))) for S, w in zip(subsets, weights, strict=True)]


def _dense_workload(wblocks):
    rows = []
    for wb in wblocks:
        M = np.array([[wb.weight]])
        for f in wb.factors:
            M = np.kron(M, f.dense())
        rows.append(M)
    return np.vstack(rows)


def _closure(sizes, subsets):
    eff = [tuple(j for j in S if sizes[j] > 1) for S in subsets]
    out = {T for S in eff for r in range(len(S) + 1) for T in itertools.combinations(S, r)}
    return sorted(out, key=lambda T: (len(T), T))


def _residual_case(case, seed=0):
    sizes, subsets, weights = case
    wb = _marginal_blocks(sizes, subsets, weights)
    closure = _closure(sizes, subsets)
    rng = np.random.default_rng(seed)
    x = {T: float(rng.uniform(0.3, 3.0)) for T in closure}
    strat, recon, enc = residual.build(sizes, closure, x, wb)
    return sizes, wb, closure, x, strat, recon, enc


@pytest.mark.parametrize("case", CASES)
def test_residual_strategy_is_the_algebra_plan(case):
    sizes, wb, closure, x, strat, recon, _ = _residual_case(case)
    A = strat.dense()
    X = sum(x[T] * projector_dense(sizes, T) for T in closure)
    assert np.abs(A.T @ A - X).max() <= 1e-12 * np.abs(X).max()  # AᵀA = Σ x_T P_T
    W = _dense_workload(wb)
    R = recon.dense()
    assert np.abs(R @ A - W).max() <= 1e-13 * np.abs(W).max()  # W = R·A
    beta = reconstruction_residual(recon, wb)
    assert np.abs(R @ A - W).max() <= beta <= 1e-12  # the certified residual covers it
    # R = W A⁺ (least squares): same rows as the pseudo-inverse reconstruction
    assert np.abs(R - W @ np.linalg.pinv(A)).max() <= 1e-10


@pytest.mark.parametrize("case", CASES)
def test_products_equal_their_dense_counterparts(case):
    sizes, wb, _, _, strat, recon, _ = _residual_case(case, seed=1)
    A, R = strat.dense(), recon.dense()
    rng = np.random.default_rng(2)
    h = rng.integers(0, 7, math.prod(sizes))
    assert np.abs(strat.matvec(h) - A @ h).max() <= 1e-12 * max(1.0, np.abs(A @ h).max())
    tables = {T: marginal_of(h, sizes, T) for T in strat.supports()}
    assert np.abs(strat.apply_tables(tables) - A @ h).max() <= 1e-12 * np.abs(A @ h).max()
    y = rng.normal(size=strat.m)
    assert np.abs(recon.apply(y) - R @ y).max() <= 1e-12 * np.abs(R @ y).max()
    assert np.allclose(recon.row_sq_norms(), (R * R).sum(axis=1), rtol=1e-13, atol=0)
    assert np.all(recon.row_l1_norms() >= np.abs(R).sum(axis=1) * (1 - 1e-14))


def test_measurement_is_exact_rounding_of_the_measured_strategy():
    sizes, wb, _, _, strat, _, _ = _residual_case(CASES[0], seed=3)
    rng = np.random.default_rng(4)
    h = rng.integers(0, 1000, math.prod(sizes))
    grid = 2.0 ** -30
    tables = {T: marginal_of(h, sizes, T) for T in strat.supports()}
    q = strat.measure(tables, grid)
    s = strat.measured()
    for b, blk in enumerate(s.blocks):  # exact rational A_b m_b / γ, rounded half to even
        exact = _exact_block(s, b, tables[blk.support])
        got = q[s.offsets[b]:s.offsets[b + 1]]
        assert [int(v) for v in got] == [round(e / Fraction(grid)) for e in exact]


def _exact_block(s, b, table):
    blk = s.blocks[b]
    vec = [Fraction(int(v)) for v in table]
    dims = [s.sizes[j] for j in blk.support]
    # apply factors one attribute at a time on the tensor (C order), exactly
    tensor = np.array(vec, dtype=object).reshape(dims) if dims else np.array(vec, dtype=object)
    for axis, name in enumerate(blk.names):
        F = np.array([[Fraction(float(v)) for v in row] for row in s.arrays[name]], dtype=object)
        tensor = np.moveaxis(np.tensordot(F, tensor, axes=([1], [axis])), 0, axis)
    return [Fraction(blk.scale) * v for v in np.asarray(tensor, dtype=object).reshape(-1)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_sensitivity_exact_route_equals_the_dense_one(case, relation, norm):
    _, _, _, _, strat, _, _ = _residual_case(case, seed=5)
    m = strat.measured()
    got = ssens.strategy_sensitivity(m, norm, relation)
    dense = sensitivity(m.dense(), norm, relation).value
    if got.exact:
        assert got.value >= dense * (1 - 1e-12)
        assert got.value <= dense * (1 + 1e-12)
    else:  # replace L1: the sum of per-block bounds
        assert got.value >= dense * (1 - 1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_sensitivity_bound_route_is_an_upper_bound(case, relation, norm, monkeypatch):
    _, _, _, _, strat, _, _ = _residual_case(case, seed=6)
    m = strat.measured()
    dense = sensitivity(m.dense(), norm, relation).value
    monkeypatch.setattr(ssens, "EXACT_ADD_REMOVE_CELLS", 0)
    monkeypatch.setattr(ssens, "EXACT_REPLACE_CELLS", 0)
    monkeypatch.setattr(ssens, "PRODUCT_MAX_BUDGET", 0)  # the search's root bound
    got = ssens.strategy_sensitivity(m, norm, relation)
    assert got.value >= dense * (1 - 1e-12)
    if got.exact:  # one column-norm tuple per attribute: the product maximum needs no search
        assert got.value <= dense * (1 + 1e-12)
    stats = {n: ssens._stats(a, relation == "replace" and norm == "l2") for n, a in m.arrays.items()}
    assert ssens._bound(m, stats, norm, relation == "replace") >= dense * (1 - 1e-12)
    if relation == "add_remove":  # equal column norms per factor: the bound is tight
        assert got.value <= dense * (1 + 1e-10)


def test_residual_sensitivity_is_one_at_unit_shares():
    """With Σ y_T = 1 every column of the residual strategy has norm 1 (add/remove)."""
    sizes, subsets = (3, 4, 2, 5), [(0, 1), (2, 3), (1, 3)]
    wb = _marginal_blocks(sizes, subsets, [1.0] * 3)
    closure = _closure(sizes, subsets)
    N = math.prod(sizes)
    dims = {T: math.prod(sizes[j] - 1 for j in T) for T in closure}
    y = {T: 1.0 / len(closure) for T in closure}
    x = {T: y[T] * N / dims[T] for T in closure}
    strat, _, _ = residual.build(sizes, closure, x, wb)
    s = ssens.strategy_sensitivity(strat.measured(), "l2", "add_remove")
    assert abs(s.value - 1.0) <= 1e-12


def test_encoding_round_trip_and_refusals():
    sizes, wb, closure, x, strat, recon, (man, arrays) = _residual_case(CASES[1])
    s2, r2 = residual.decode(sizes, man, arrays)
    assert np.array_equal(s2.dense(), strat.dense()) and np.array_equal(r2.dense(), recon.dense())
    bad = dict(arrays)
    bad["strategy.support"] = np.vstack([arrays["strategy.support"], arrays["strategy.support"][-1:]])
    bad["strategy.scale"] = np.append(arrays["strategy.scale"], 1.0)
    bad["recon.inverse"] = np.append(arrays["recon.inverse"], 1.0)
    with pytest.raises(StructureError, match="listed twice|disagree"):
        residual.decode(sizes, {**man, "blocks": man["blocks"] + 1}, bad)
    gap = dict(arrays)
    gap["strategy.support"] = np.array([[0.0, -1.0, 5.0, -1.0]])
    with pytest.raises(StructureError):
        residual.decode(sizes, man, gap)


def test_dropped_residual_is_refused_by_the_identity_check():
    sizes, wb, closure, x, _, _, _ = _residual_case(CASES[0])
    x2 = {T: v for T, v in x.items() if T != (1,)}
    strat, recon, _ = residual.build(sizes, [T for T in closure if T != (1,)], x2, wb)
    with pytest.raises(StructureError, match="full product"):
        reconstruction_residual(recon, wb)


def test_scaled_reconstruction_term_shows_in_the_residual():
    sizes, wb, closure, x, strat, recon, _ = _residual_case(CASES[0])
    t0 = recon.terms[0]
    forged = [type(t0)(t0.out_block, t0.in_block, t0.scale * 2.0, t0.attrs, t0.names)] + list(recon.terms[1:])
    bad = StructuredReconstruction(recon.out_rows, forged, recon.arrays, strat)
    assert reconstruction_residual(bad, wb) > 0.1


def test_workload_blocks_from_marginal_and_kron_forms():
    from workloads import parse_workload

    W = parse_workload("marginals:2x3x4:2")
    a = workload_blocks(W, (2, 3, 4))
    V = parse_workload("vstack(kron(identity:2,identity:3,total:4),kron(identity:2,total:3,identity:4),"
                       "kron(total:2,identity:3,identity:4))")
    b = workload_blocks(V, (2, 3, 4))
    assert [x.marginal_support for x in a] == [y.marginal_support for y in b] == [(0, 1), (0, 2), (1, 2)]
    assert np.array_equal(_dense_workload(a), W.dense())
    with pytest.raises(StructureError):
        workload_blocks(parse_workload("kron(prefix:4,identity:6)"), (4, 2, 3))


def test_axis_factors_and_norms_refuse_inconsistent_input():
    """A factor stores a matrix exactly when its kind is "matrix"; identities and totals have
    none to read; a structured plan optimises γ_F or γ₂ only (each a StructureError)."""
    from factorize.structured.blocks import structured_norm

    M = np.arange(6.0).reshape(2, 3)
    f = AxisFactor("matrix", 3, M)
    assert f.explicit is M and f.rows == 2 and np.array_equal(f.dense(), M)
    for kind, matrix in (("matrix", None), ("identity", np.eye(3)), ("total", np.ones((1, 3))),
                         ("ones", None)):
        with pytest.raises(StructureError):
            AxisFactor(kind, 3, matrix)
    with pytest.raises(StructureError, match="no explicit matrix"):
        _ = AxisFactor("identity", 3).explicit
    with pytest.raises(StructureError, match="sizes and support"):
        WorkloadBlock(1.0)
    assert [structured_norm(n) for n in ("gamma_f", "gamma_2")] == ["gamma_f", "gamma_2"]
    with pytest.raises(StructureError, match="approx_gamma_2"):
        structured_norm("approx_gamma_2")


def test_union_of_kronecker_blocks_equals_its_dense_form():
    from workloads import parse_workload

    W = parse_workload("vstack(kron(prefix:4,identity:3),kron(identity:4,total:3),kron(allrange:4,prefix:3))")
    wb = workload_blocks(W, (4, 3))
    for norm in ("gamma_f", "gamma_2"):
        strat, recon, (man, arrays), cert, cert_arrays = union_build.build((4, 3), wb, norm)
        A, R = strat.dense(), recon.dense()
        Wd = W.dense()
        assert np.abs(R @ A - Wd).max() <= 1e-9
        assert reconstruction_residual(StructuredReconstruction(
            recon.out_rows, recon.terms, recon.arrays, strat.measured()), wb) >= 0
        s2, r2 = union.decode((4, 3), man, arrays)
        assert np.array_equal(s2.dense(), A) and np.array_equal(r2.dense(), R)
        for relation in ("add_remove", "replace"):
            got = ssens.strategy_sensitivity(strat.measured(), "l2", relation).value
            assert got == pytest.approx(sensitivity(strat.measured().dense(), "l2", relation).value,
                                        rel=1e-12)
        # the lower bound never exceeds the value the union achieves
        delta = ssens.strategy_sensitivity(strat.measured(), "l2", "add_remove").value
        sq = recon.row_sq_norms()
        achieved = delta * (math.sqrt(sq.max()) if norm == "gamma_2" else math.sqrt(sq.mean()))
        assert 0 < cert["lower"] <= achieved * (1 + 1e-9)
