"""The γ_F lower bound of a stack of Kronecker products from QRs of the small factors.

``norms.kron_stack_trace_norm_lower_bound`` certifies ``‖[⊗X_1j; ⊗X_2j; …]·diag(s)‖_tr``
without an SVD of the k×N matrix; ``certificate.verify`` uses it for dense certificates of
such workloads. Checked here: (1) its own certified value (without the continuity cap) lies
below the trace norm and within 1e-9 of it; (2) the value verify uses equals the dense SVD
bound up to 1e-12 relative, so plans certified either way re-verify; (3) the per-factor
QR allowances hold against extended-precision recomputation; (4) verify no longer runs the
dense SVD for these workloads; (5) it refuses what it cannot certify.
"""

from __future__ import annotations

import numpy as np
import pytest

from factorize import norms
from factorize.planner import certificate
from factorize.planner.certificate import (
    gamma_f_lower,
    gamma_f_lower_structured,
    stacked_kron_blocks,
    verify,
)
from factorize.planner.routes import solve
from workloads import parse_workload

SPECS = [
    "vstack(kron(identity:4,width:16:5,total:3),kron(allrange:4,allrange:16,width:3:2))",
    "kron(prefix:2,total:8,allrange:16)",
    "vstack(kron(allrange:8,allrange:8,identity:4),kron(total:8,allrange:8,prefix:4),identity:256)",
    "kron(allrange:16,prefix:16)",
]


def _weights(N: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.random(N) ** 3  # spread over three orders of magnitude
    q[rng.random(N) < 0.1] = 0.0
    return q


@pytest.mark.parametrize("spec", SPECS)
def test_certified_value_is_below_the_trace_norm_and_tight(spec):
    W = parse_workload(spec)
    q = _weights(W.shape[1], 1)
    s = np.sqrt(q)
    M = W.dense() * s[None, :]
    # the dense SVD's sum (LAPACK, an independent algorithm: it agrees with the reduced
    # matrix's sum to ~1e-15 relative) as the truth, far more accurate than the 1e-13 margin
    tr = float(np.sum(np.linalg.svd(M, compute_uv=False)))
    blocks = stacked_kron_blocks(W)
    own = norms.kron_stack_trace_norm_lower_bound(blocks, s, continuity=False)
    capped = norms.kron_stack_trace_norm_lower_bound(blocks, s)
    assert own is not None and capped is not None
    assert own <= tr * (1 - 1e-13)  # a lower bound, with its rounding allowance
    assert own >= tr * (1 - 1e-9)  # and a tight one
    assert capped <= own


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [1, 2])
def test_verify_value_matches_the_dense_svd_bound(spec, seed):
    W = parse_workload(spec)
    q = _weights(W.shape[1], seed)
    dense = gamma_f_lower(W.dense(), q)
    structured = gamma_f_lower_structured(W, q)
    assert structured is not None
    assert structured == pytest.approx(dense, rel=1e-12, abs=0)


def test_factor_allowances_hold_in_extended_precision():
    """δ ≥ ‖Q̂ᵀQ̂ − I‖₂ and e_c ≥ ‖x_c − Q̂r̂_c‖₂, recomputed in long double."""
    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("no extended precision on this platform")
    rng = np.random.default_rng(5)
    for X in (rng.standard_normal((300, 12)), parse_workload("allrange:24").dense(),
              np.vstack([np.ones((50, 6)), 1e-9 * rng.standard_normal((40, 6))])):
        R, tau, e, delta = norms._factor_reduction(X)
        Q, R2 = np.linalg.qr(X)
        assert np.array_equal(R, R2)
        Ql, Rl, Xl = (a.astype(np.longdouble) for a in (Q, R, X))
        off = Ql.T @ Ql - np.eye(Q.shape[1], dtype=np.longdouble)
        assert float(np.linalg.norm(off.astype(np.float64), 2)) <= delta
        res = np.sqrt(np.sum((Xl - Ql @ Rl) ** 2, axis=0)).astype(np.float64)
        assert np.all(res <= e)
        assert np.all(np.linalg.norm(R, axis=0) * (1 + delta) <= tau)


def test_verify_does_not_svd_the_tall_matrix(monkeypatch):
    """The plan's certificate of a stacked Kronecker workload re-checks without the dense
    SVD (which costs about as much as a QR of the k×N matrix: 0.74 s against 0.71 s for
    k = 21,212, N = 640, one thread)."""
    spec = SPECS[0]
    W = parse_workload(spec)
    r = solve(spec, "gamma_f", method="dual")
    ref = r.verification

    def refuse(M):
        raise AssertionError(f"dense SVD of a {M.shape} matrix")

    monkeypatch.setattr(certificate.norms, "trace_norm_lower_bound", refuse)
    v = verify(r.certificate, W)
    assert v.passed and v.lower == pytest.approx(ref.lower, rel=1e-12, abs=0)
    assert v.upper == ref.upper and v.residual == ref.residual


def test_refuses_what_it_cannot_certify():
    rng = np.random.default_rng(0)
    # non-dyadic factors: the dense matrix is not the exact Kronecker product
    W = parse_workload("kron(prefix:4,prefix:4)")
    assert stacked_kron_blocks(W) is not None
    from workloads import DenseWorkload
    from workloads.structured import KronWorkload

    K = KronWorkload([DenseWorkload(0.1 * rng.random((40, 4))), DenseWorkload(0.3 * rng.random((30, 4)))])
    assert stacked_kron_blocks(K) is None
    assert gamma_f_lower_structured(K, np.ones(16)) is None
    # no Kronecker product, or a reduction that does not pay: the dense path
    assert stacked_kron_blocks(parse_workload("allrange:32")) is None
    assert norms.kron_stack_trace_norm_lower_bound([[np.ones((3, 8))]], np.ones(8)) is None
    # negative weights are not a column scaling of this bound
    blocks = stacked_kron_blocks(parse_workload("kron(allrange:8,prefix:8)"))
    assert norms.kron_stack_trace_norm_lower_bound(blocks, -np.ones(64)) is None
