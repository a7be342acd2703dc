"""Least-squares projection onto n·K by Frank–Wolfe (Nikolov, Talwar & Zhang 2013, Alg. 3; Dwork, Nikolov & Talwar 2014, RelaxedProj).

After noise, the projection mechanism releases ``ŷ = argmin_{y ∈ n·K} ||ỹ − y||₂`` — pure
post-processing (docs/math.md §8.1). K is the convex hull of the workload's columns (histograms:
x ≥ 0, Σx = n, so y = W x ∈ n·conv{w_j}) or, as in Nikolov, Talwar & Zhang 2013 (K = W·B₁), of ±w_j.

Frank–Wolfe needs only a linear oracle over K: with gradient g = y − ỹ, the vertex is
n·(±)w_j for j minimising ⟨g, ±w_j⟩, i.e. one ``rmatvec`` (Wᵀg) — the domain is never
enumerated beyond that product, so structured workloads (Kronecker, marginal stacks) stay
implicit. Each iteration takes the better (by exact line search) of the Frank–Wolfe step and
the pairwise step that moves weight from the worst active vertex to the Frank–Wolfe vertex
(Lacoste-Julien & Jaggi 2015, linear convergence on polytopes): never a smaller decrease than
plain Frank–Wolfe, so Clarkson's bound below still holds, and in practice the gap falls
geometrically instead of like 1/T. The Frank–Wolfe gap ``⟨g, y − v⟩`` bounds
``f(y) − f*`` for f = ½||y − ỹ||² and is reported; Clarkson (2010, Thm 2.3) gives
``f(y_T) − f* ≤ 2 C_f / (T + 2)`` with curvature ``C_f ≤ diam(n·K)²``, whence the default
iteration budget for an additive accuracy α: T = ⌈2 C_f / α⌉ − 2.

The weights x (y = W x, x ∈ n·Δ or n·B₁) are kept, so the released answers are exactly
consistent with a (fractional) dataset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factorize.geometry.errors import GeometryError


@dataclass(frozen=True)
class Projection:
    y: np.ndarray  # the projected answers (length k)
    x: np.ndarray  # weights on the columns: y = W x, x ∈ n·Δ_N (or n·B₁ when symmetric)
    gap: float  # Frank–Wolfe gap ⟨g, y − v⟩ ≥ ½||y − ỹ||² − min over n·K
    iterations: int
    clarkson_bound: float  # 2 C_f / (T + 2) with C_f ≤ diam² (an a-priori bound, for reports)


def project_least_squares(W, y_noisy: np.ndarray, n: float, *, symmetric: bool = False,  # noqa: C901 (counted allow-list)
                          alpha: float | None = None, max_iters: int | None = None,
                          gap_tol: float = 0.0, deadline: float | None = None) -> Projection:
    """Frank–Wolfe for ``min ½||W x − ỹ||²`` over x ∈ n·Δ_N (or n·B₁ with ``symmetric``).

    ``W``: a dense array or a ``workloads.Workload`` (only matvec / rmatvec are used).
    Runs until the Frank–Wolfe gap ≤ ``gap_tol``, or for ``max_iters`` iterations, or — by
    default — for the Clarkson budget reaching additive accuracy ``alpha`` (default: 1e-3
    of the squared diameter, ~2000 iterations; Nikolov, Talwar & Zhang 2013, §3.4 needs only α ≤ Σ n r_i²), or
    until ``time.monotonic()`` passes ``deadline``; the gap reported is the last one reached.
    """
    import time
    matvec, rmatvec, shape = _operator(W)
    k, N = shape
    y_noisy = np.asarray(y_noisy, dtype=np.float64).ravel()
    if y_noisy.shape != (k,) or not np.all(np.isfinite(y_noisy)):
        raise GeometryError(f"the noisy answers must be {k} finite numbers")
    if not (math.isfinite(n) and n > 0):
        raise GeometryError(f"the dataset size bound n must be positive, got {n}")
    diam_sq = 4.0 * n * n * _max_column_norm_sq(W)  # n·K ⊆ ball of radius n·max||w_j||
    if max_iters is None:
        max_iters = clarkson_iterations(W, n, alpha if alpha is not None else 1e-3 * diam_sq)
    # atoms: column j with sign +1 (index j) or, when symmetric, −1 (index N + j); x = n·Σ λ_a atom_a
    lam: dict[int, float] = {}
    column_cache: dict[int, np.ndarray] = {}

    def atom(a: int) -> np.ndarray:
        if a not in column_cache:
            j, sign = (a, 1.0) if a < N else (a - N, -1.0)
            e = np.zeros(N)
            e[j] = sign * n
            column_cache[a] = matvec(e)
            if len(column_cache) > 4096:  # bound the cache: drop atoms no longer active
                for b in [b for b in column_cache if b not in lam and b != a]:
                    del column_cache[b]
        return column_cache[a]

    s0 = rmatvec(y_noisy)
    a0 = int(np.argmax(np.abs(s0))) if symmetric else int(np.argmax(s0))
    if symmetric and s0[a0] < 0:
        a0 += N
    lam[a0] = 1.0
    y = atom(a0).copy()
    gap = math.inf
    it = 0
    for it in range(1, max_iters + 1):
        if deadline is not None and it > 1 and time.monotonic() > deadline:
            it -= 1
            break
        g = y - y_noisy
        s = rmatvec(g)
        if symmetric:
            j = int(np.argmax(np.abs(s)))
            a_fw = j + N if s[j] > 0 else j
        else:
            a_fw = int(np.argmin(s))
        v = atom(a_fw)
        gap = float(np.dot(g, y - v))
        if gap <= gap_tol:
            break
        # the Frank–Wolfe step toward v, exact line search on [0, 1]
        d_fw = v - y
        dd = float(np.dot(d_fw, d_fw))
        step_fw = min(1.0, gap / dd) if dd > 0 else 0.0
        gain_fw = step_fw * gap - 0.5 * step_fw * step_fw * dd
        # the pairwise step: move weight from the worst active atom to v (Lacoste-Julien &
        # Jaggi 2015); taken only when it decreases f more than the FW step, so every
        # iteration gains at least the FW step's decrease and Clarkson's bound still holds
        signed = {a: (s[a] if a < N else -s[a - N]) for a in lam}
        a_aw = max(signed, key=signed.__getitem__)
        gain_pw, step_pw = -1.0, 0.0
        if a_aw != a_fw:
            d_pw = v - atom(a_aw)
            slope = float(np.dot(g, d_pw))
            dd_pw = float(np.dot(d_pw, d_pw))
            if slope < 0 and dd_pw > 0:
                step_pw = min(lam[a_aw], -slope / dd_pw)
                gain_pw = -step_pw * slope - 0.5 * step_pw * step_pw * dd_pw
        if gain_pw > gain_fw:
            lam[a_aw] -= step_pw
            if lam[a_aw] <= 1e-15:
                del lam[a_aw]
            lam[a_fw] = lam.get(a_fw, 0.0) + step_pw
            y = y + step_pw * d_pw
        else:
            for a in lam:
                lam[a] *= 1.0 - step_fw
            lam[a_fw] = lam.get(a_fw, 0.0) + step_fw
            y = y + step_fw * d_fw
            lam = {a: w for a, w in lam.items() if w > 1e-15}
        if it % 256 == 0:  # refresh y from the weights (no drift)
            y = np.zeros_like(y)
            for a, w in lam.items():
                y += w * atom(a)
    x = np.zeros(N)
    for a, w in lam.items():
        if a < N:
            x[a] += n * w
        else:
            x[a - N] -= n * w
    y = matvec(x)
    g = y - y_noisy
    s = rmatvec(g)
    # the gap at the returned point: ⟨g, y⟩ − min over the vertices
    vmin = -n * float(np.max(np.abs(s))) if symmetric else n * float(np.min(s))
    gap = float(np.dot(g, y)) - vmin
    return Projection(y=y, x=x, gap=max(gap, 0.0), iterations=it,
                      clarkson_bound=2.0 * diam_sq / (it + 2))


def clarkson_iterations(W, n: float, alpha: float) -> int:
    """Iterations after which f(y_T) − min f ≤ α is guaranteed: T = ⌈2 C_f/α⌉ − 2 with the
    curvature C_f ≤ diam(n·K)² ≤ 4n²·max_j‖w_j‖² (Clarkson 2010, Thm 2.3)."""
    if not (math.isfinite(alpha) and alpha > 0):
        raise GeometryError(f"the accuracy alpha must be positive, got {alpha}")
    diam_sq = 4.0 * n * n * _max_column_norm_sq(W)
    return max(1, math.ceil(2.0 * diam_sq / alpha) - 2)


def _operator(W):
    if isinstance(W, np.ndarray):
        A = np.asarray(W, dtype=np.float64)
        return (lambda v: A @ v), (lambda u: A.T @ u), A.shape
    return W.matvec, W.rmatvec, W.shape


def _max_column_norm_sq(W) -> float:
    """An upper bound on max_j ||w_j||² (exact for dense and Kronecker workloads):
    Kronecker → product over factors, vertical stacks → sum over blocks, else dense."""
    from workloads import KronWorkload, VStackWorkload

    if isinstance(W, np.ndarray):
        return float(np.max(np.einsum("ij,ij->j", W, W)))
    if isinstance(W, KronWorkload):
        return math.prod(_max_column_norm_sq(f) for f in W.factors)
    if isinstance(W, VStackWorkload):
        return sum(_max_column_norm_sq(b) for b in W.blocks)
    return _max_column_norm_sq(W.dense())
