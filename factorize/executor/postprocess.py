"""Post-processing of released answers (privacy unchanged: it reads released values only).

Dense and Kronecker plans (the histogram's N cells fit): ``nonneg`` and ``integer`` below,
``least_squares`` (:func:`least_squares`). Structured plans (workloads of Kronecker blocks
whose factors have full column rank or group the values: marginals, CDFs, ranges, groupings): the same two methods on the
marginal tables the blocks read, never forming N (:func:`marginal_postprocess`,
``factorize.postprocess``).

``nonneg``: the answers of the non-negative histogram of the released size that best fits
the noisy answers ŷ in least squares,

    h* = argmin { ‖W h − ŷ‖² : h ≥ 0, Σh = n̂ },   answers W h*,

where n̂ is itself estimated from ŷ alone: ĥ = the minimum-norm least-squares solution of
W h ≈ ŷ (CGLS), n̂ = max(0, Σĥ) (when the total is in the row space of W this is its unique
least-squares estimate). The problem is solved by FISTA with projection onto the scaled
simplex, using only W's matvec / rmatvec (Kronecker workloads are never densified); the step
is 1/L with L ≥ ‖W‖₂² from power iteration (×1.1). Convergence is reported as the number of
iterations and the final KKT residual ``‖L·(h − P(h − ∇f/L))‖ / max(1, ‖Wᵀŷ‖)`` (zero exactly
at the optimum).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from factorize.geometry.spectral_projection import project_to_simplex


def project_simplex(v: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of v onto {x ≥ 0, Σx = total}; total ≤ 0 gives 0
    (``geometry.project_to_simplex`` otherwise)."""
    if total <= 0:
        return np.zeros_like(v)
    return project_to_simplex(v, total)


def _op_norm_sq(W: Any, N: int, iters: int = 50) -> float:
    from factorize.privacy import SecureRandom  # randomness for the start vector only

    x = SecureRandom().words(N).astype(np.float64) / 2.0**64 + 0.5
    x /= np.linalg.norm(x)
    lam = 0.0
    for _ in range(iters):
        y = W.rmatvec(W.matvec(x))
        lam = float(np.linalg.norm(y))
        if lam == 0:
            return 1.0
        x = y / lam
    return lam


def cgls(W: Any, y: np.ndarray, N: int, iters: int = 500, tol: float = 1e-10) -> np.ndarray:
    """Minimum-norm least-squares solution of W h ≈ y (CGLS from h = 0)."""
    h = np.zeros(N)
    r = y.astype(np.float64).copy()
    s = W.rmatvec(r)
    p = s.copy()
    gamma = float(s @ s)
    g0 = math.sqrt(gamma)
    for _ in range(iters):
        if math.sqrt(gamma) <= tol * max(g0, 1e-300):
            break
        q = W.matvec(p)
        qq = float(q @ q)
        if qq == 0:
            break
        alpha = gamma / qq
        h += alpha * p
        r -= alpha * q
        s = W.rmatvec(r)
        gnew = float(s @ s)
        p = s + (gnew / gamma) * p
        gamma = gnew
    return h


def nonneg_consistent(W: Any, y: np.ndarray, *, max_iter: int = 2000, tol: float = 1e-8,
                      deadline: float | None = None) -> dict[str, Any]:
    """Solve the problem of the module docstring; returns answers and diagnostics. Stops after
    ``max_iter`` iterations or when ``time.monotonic()`` passes ``deadline``."""
    import time

    k, N = W.shape
    h_ls = cgls(W, y, N)
    n_hat = max(0.0, float(h_ls.sum()))
    L = 1.1 * _op_norm_sq(W, N)
    h = project_simplex(h_ls, n_hat)
    z, t = h.copy(), 1.0
    scale = max(1.0, float(np.linalg.norm(W.rmatvec(y))))
    kkt = math.inf
    it = 0
    for it in range(1, max_iter + 1):
        grad = W.rmatvec(W.matvec(z) - y)
        h_new = project_simplex(z - grad / L, n_hat)
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        z = h_new + ((t - 1.0) / t_new) * (h_new - h)
        h, t = h_new, t_new
        if it % 10 == 0 or it == max_iter:
            g = W.rmatvec(W.matvec(h) - y)
            kkt = L * float(np.linalg.norm(h - project_simplex(h - g / L, n_hat))) / scale
            if kkt <= tol:
                break
        if deadline is not None and time.monotonic() > deadline:
            break
    g = W.rmatvec(W.matvec(h) - y)
    kkt = L * float(np.linalg.norm(h - project_simplex(h - g / L, n_hat))) / scale
    return {"answers": W.matvec(h), "histogram": h, "n_hat": n_hat, "iterations": it, "kkt_residual": kkt,
            "converged": kkt <= tol, "method": "nonneg: FISTA on {h >= 0, sum h = n_hat}"}


def integer_consistent(W: Any, y: np.ndarray, *, max_iter: int = 2000, tol: float = 1e-8,
                       deadline: float | None = None) -> dict[str, Any]:
    """``integer`` for a dense plan: the ``nonneg`` histogram h* (:func:`nonneg_consistent`,
    Σh* = n̂) rounded to the integer histogram of total ``n = round(n̂)`` nearest to it
    (largest remainders: each cell to its floor or ceiling, ``postprocess.rounding.round_rows``),
    answers ``W h``: one integer histogram, so every answer is consistent with every other and,
    for a workload of integer entries (marginals, ranges, CDFs), an integer; every table of a
    marginal workload sums to n."""
    from factorize.postprocess.rounding import round_rows

    pp = nonneg_consistent(W, y, max_iter=max_iter, tol=tol, deadline=deadline)
    n = int(math.floor(pp["n_hat"] + 0.5))
    h = round_rows(pp["histogram"][None, :], np.array([n]))[0]
    return {**pp, "answers": W.matvec(h.astype(np.float64)), "histogram": h, "total": n,
            "method": "integer: the nonneg histogram rounded by largest remainders to total round(n_hat)"}


def marginal_postprocess(W: Any, sizes: Any, y: np.ndarray, post: Any,
                         deadline: float | None = None) -> dict[str, Any]:
    """``nonneg`` / ``integer`` of a structured plan's released answers ``y`` of a workload of
    Kronecker blocks, in the algebra of marginals: the marginal tables the blocks read
    (``postprocess.tables``) fitted to the answers over the non-negative consistent tables
    (``postprocess.nonneg``) and, for ``integer``, rounded by controlled rounding to integer
    tables of one total (``postprocess.rounding``); every answer read back through its block's
    factors. Returns the answers and the diagnostics the metadata records."""
    from factorize.postprocess.nonneg import project_nonneg
    from factorize.postprocess.rounding import round_tables
    from factorize.postprocess.tables import marginal_layout

    layout = marginal_layout(W, sizes)
    fit = project_nonneg(layout, y, max_iter=int(post["max_iter"]), tol=float(post["tol"]),
                         deadline=deadline)
    out: dict[str, Any] = {
        "method": "nonneg: ADMM projection onto the non-negative consistent tables of total n_hat "
                  "(local polytope; McKenna et al. 2019, 2021), raked to consistency from the total down "
                  "and, where raking cannot, fitted to each other by KL projections",
        "tables": len(layout.tables), "n_hat": fit.n_hat, "iterations": fit.iterations,
        "kkt_residual": fit.residual, "converged": fit.converged, "total": fit.n_hat,
        "disagreement": fit.disagreement, "rake_sweeps": fit.rake_sweeps,
        "mutual_sweeps": fit.mutual_sweeps}
    if post["method"] == "integer":
        r = round_tables(layout, fit.tables)
        out.update(method="integer: the nonneg tables by controlled rounding from the total down "
                          "(TopDown-style; largest remainders and a maximum flow)",
                   total=r.total, disagreement=r.disagreement,
                   unforced=[[list(U), list(P)] for U, P in r.unforced[:20]],
                   unforced_count=len(r.unforced))
        out["answers"] = layout.answers(r.tables)
    else:
        out["answers"] = layout.answers(fit.tables)
    return out


def attach(rel: Any, method: str, compute: Any) -> None:
    """Run ``compute()`` (a post-processing of ``rel``'s released values) and put its answers
    in ``rel.postprocessed`` and its diagnostics in ``rel.metadata["postprocess"]``; a failure
    is recorded there and the release stands (post-processing reads released values only)."""
    try:
        pp = compute()
    except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
        rel.metadata["postprocess"] = {"method": method, "failed": str(exc)[:300]}
        return
    answers = np.asarray(pp["answers"], dtype=np.float64)
    if answers.shape == rel.estimate.shape and np.all(np.isfinite(answers)):
        rel.postprocessed = answers
        rel.metadata["postprocess"] = {k: v for k, v in pp.items() if k not in ("answers", "histogram")}
    else:
        rel.metadata["postprocess"] = {"method": method, "failed": "non-finite answers"}


#: Workloads with at most this many entries are projected as a dense matrix.
DENSE_ENTRIES = 2e7


def least_squares(W: Any, y: np.ndarray, *, n: float | None = None, symmetric: bool = False,
                  gap_tol: float = 0.0, max_iter: int = 20000,
                  deadline: float | None = None) -> dict[str, Any]:
    """The least-squares (projection) mechanism's estimator (Nikolov, Talwar & Zhang 2013, Alg. 3; docs/math.md §8.1):

        ŷ = argmin { ‖y' − ỹ‖₂ : y' ∈ n·K },  K = conv{w_j} (histograms) or conv{±w_j},

    by Frank–Wolfe over the column weights (``geometry.project_least_squares``: one W·x and one
    Wᵀg per iteration, the domain never enumerated beyond Wᵀg), stopped when the Frank–Wolfe
    gap — an upper bound on ½‖ŷ − ỹ‖² − min — is ≤ ``gap_tol`` or after ``max_iter``
    iterations, where the budget is ``min(max_iter, Clarkson's T for accuracy gap_tol)``
    (``geometry.least_squares.clarkson_iterations``; the a-priori budget is usually far above
    the cap, and the reported gap is the certificate). ``n``: the public dataset size
    (replace neighbours); ``None`` estimates it from the released values alone, n̂ = max(0, Σ ĥ) with ĥ the minimum-norm least-squares
    solution of W h ≈ ỹ (as ``nonneg``), so privacy is unchanged. Returns the answers ŷ = W x,
    the weights, n̂, the gap, the iterations and whether the gap target was met.
    """
    from factorize.geometry.least_squares import clarkson_iterations, project_least_squares

    k, N = W.shape
    n_hat = float(n) if n is not None else max(0.0, float(cgls(W, y, N).sum()))
    if k * N <= DENSE_ENTRIES:
        W = W.dense()  # one dense product per iteration beats the structured operator's overhead
    if n_hat <= 0:
        return {"answers": np.zeros(k), "histogram": np.zeros(N), "n_hat": n_hat, "n_source":
                "public" if n is not None else "estimated", "iterations": 0, "gap": 0.0,
                "converged": True, "method": "least_squares: n̂ = 0, the body is {0}"}
    clarkson = clarkson_iterations(W, n_hat, gap_tol) if gap_tol > 0 else None
    budget = max_iter if clarkson is None else min(max_iter, clarkson)
    proj = project_least_squares(W, y, n_hat, symmetric=symmetric, max_iters=budget,
                                 gap_tol=gap_tol, deadline=deadline)
    return {"answers": proj.y, "histogram": proj.x, "n_hat": n_hat,
            "n_source": "public" if n is not None else "estimated from the released values",
            "iterations": proj.iterations, "gap": proj.gap, "gap_tol": gap_tol,
            "converged": proj.gap <= gap_tol,
            # Clarkson: after this many iterations f − min f ≤ gap_tol is guaranteed a priori
            "clarkson_iterations": clarkson,
            "budget": budget,
            "method": "least_squares: Frank–Wolfe projection onto n̂·conv{"
                      + ("±" if symmetric else "") + "w_j} (seed 002 Alg. 3)"}
