"""Search for column subsets S of a workload W whose Gram matrix ``W_Sᵀ W_S`` is far from
singular: a large ``|S|·λ_min(W_Sᵀ W_S)`` (the spectral bound's witness) or a large
``det(W_Sᵀ W_S)`` (the determinant bound's), over the 2^N subsets of the columns.

The maximisations are hard, so this is a search, not an optimisation with a guarantee: greedy
on the exact smallest eigenvalue (secular equation), pivoted QR (= greedy volume
maximisation), backward elimination, exhaustive enumeration for N ≤ ``EXHAUSTIVE_N``, and a
budgeted add/drop/swap local search from several starts. Any subset gives a valid bound; the
search only decides how good it is. Every candidate comes with the floating-point λ_min and
log det of its Gram matrix, which only rank candidates: the bounds re-evaluate the chosen
subset with a rounding allowance (``factorize.geometry.lower_bounds``).

Used by :func:`factorize.geometry.lower_bounds.spectral_lower_bound` and
:func:`factorize.research.determinant_lower_bound.determinant_lower_bound`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from factorize.geometry.errors import GeometryError
from factorize.numerics import U as UNIT_ROUNDOFF

__all__ = [
    "EXHAUSTIVE_N",
    "Candidate",
    "greedy_min_eig",
    "local_search",
    "multistart",
    "numerical_rank_tol",
    "search_subsets",
    "size_grid",
    "subset_size_cap",
]

EXHAUSTIVE_N = 12  # method="auto" enumerates all subsets up to this many columns
Candidate = tuple[np.ndarray, float, float]  # (column indices, λ_min(W_Sᵀ W_S), log det(W_Sᵀ W_S))


def numerical_rank_tol(A: np.ndarray) -> float:
    """Eigenvalues of a Gram matrix ``W_Sᵀ W_S`` below this are treated as 0 (rounding level)."""
    return max(A.shape) * UNIT_ROUNDOFF * 16.0 * float(np.max(np.einsum("ij,ij->j", A, A)))


def greedy_min_eig(A: np.ndarray, max_size: int, budget: float = 6e8) -> list[Candidate]:
    """Forward greedy: add the column that keeps ``λ_min(W_Sᵀ W_S)`` largest.

    For each candidate j the new smallest eigenvalue is the smallest root of the secular
    equation ``c_j − λ − Σ_i b_ij²/(λ_i − λ) = 0`` on ``[0, min(λ_1, c_j)]`` (G_S = V Λ Vᵀ,
    b_j = Vᵀ W_Sᵀ w_j, c_j = ||w_j||²), found for all candidates at once by bisection.
    Returns every prefix as (indices, λ_min, log det G_S). Stops at ``max_size``, at numerical
    rank deficiency, or when the work ``N(s³/3 + 25 s²)`` exceeds ``budget``.
    """
    N = A.shape[1]
    col_sq = np.einsum("ij,ij->j", A, A)
    tol = numerical_rank_tol(A)
    chosen: list[int] = []
    out: list[Candidate] = []
    C = np.zeros((0, N))
    avail = np.ones(N, dtype=bool)
    j = int(np.argmax(col_sq))
    while True:
        chosen.append(j)
        avail[j] = False
        C = np.vstack([C, A[:, j] @ A])
        lam, V = np.linalg.eigh(C[:, chosen])
        if lam[0] <= tol:
            break
        out.append((np.array(chosen), float(lam[0]), float(np.sum(np.log(lam)))))
        s = len(chosen)
        if s >= max_size or not avail.any() or N * (s ** 3 / 3 + 25 * s * s) > budget:
            break
        idx = np.flatnonzero(avail)
        B2 = (V.T @ C[:, idx]) ** 2
        c = col_sq[idx]
        lo = np.zeros(idx.size)
        hi = np.minimum(lam[0], c)
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            phi = c - mid - np.sum(B2 / (lam[:, None] - mid[None, :]), axis=0)
            pos = phi > 0
            lo = np.where(pos, mid, lo)
            hi = np.where(pos, hi, mid)
        j = int(idx[int(np.argmax(lo))])
    return out


def _qr_order(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Pivoted QR (Businger–Golub): the pivot order is greedy volume maximisation — each step
    takes the column farthest from the span of those already taken; ``|R_ii|`` is that distance,
    so ``|det Π W_{S_s}| = Π_{i≤s} |R_ii|`` for the first s pivots."""
    import scipy.linalg  # here: verify reaches this module but never searches (start-up)

    _, R, piv = scipy.linalg.qr(A, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    tol = max(A.shape) * UNIT_ROUNDOFF * 16.0 * float(np.sqrt(np.max(np.einsum("ij,ij->j", A, A))))
    r = int(np.sum(d > tol))
    return piv, R, r


def size_grid(r: int, small: int = 64, points: int = 96) -> np.ndarray:
    """Subset sizes to try up to r: every size up to ``small``, a geometric grid above."""
    if r <= small:
        return np.arange(1, r + 1)
    grid = np.round(np.geomspace(small, r, points)).astype(np.int64)
    return np.unique(np.concatenate([np.arange(1, small + 1), grid, [r]]))


def _qr_family(A: np.ndarray, max_size: int, cubic_budget: float = 3e9) -> list[Candidate]:
    import scipy.linalg  # here: verify reaches this module but never searches (start-up)

    piv, R, r = _qr_order(A)
    r = min(r, max_size)
    logdiag = 2.0 * np.cumsum(np.log(np.abs(np.diag(R))[:r])) if r else np.zeros(0)
    out = []
    spent = 0.0
    for s in size_grid(r):
        spent += float(s) ** 3
        if spent > cubic_budget:
            break
        smin = float(scipy.linalg.svdvals(R[:s, :s])[-1])
        out.append((piv[:s].copy(), smin * smin, float(logdiag[s - 1])))
    return out


def _prune_family(A: np.ndarray, start: np.ndarray, limit: int = 128) -> list[Candidate]:
    """Backward elimination from a basis: drop the column with the largest weight in the
    bottom eigenvector of the Gram matrix (it is what makes λ_min small)."""
    if start.size > limit:
        return []
    cur = list(start)
    out = []
    tol = numerical_rank_tol(A)
    while cur:
        lam, V = np.linalg.eigh(A[:, cur].T @ A[:, cur])
        if lam[0] > tol:
            out.append((np.array(cur), float(lam[0]), float(np.sum(np.log(lam)))))
        del cur[int(np.argmax(np.abs(V[:, 0])))]
    return out


def _exhaustive_family(A: np.ndarray, max_size: int) -> list[Candidate]:
    N = A.shape[1]
    G = A.T @ A
    tol = numerical_rank_tol(A)
    out = []
    for s in range(1, min(N, max_size) + 1):
        for S in itertools.combinations(range(N), s):
            idx = np.array(S)
            lam = np.linalg.eigvalsh(G[np.ix_(idx, idx)])
            if lam[0] > tol:
                out.append((idx, float(lam[0]), float(np.sum(np.log(lam)))))
    return out


def _candidates(A: np.ndarray, method: str, max_size: int) -> list[Candidate]:
    """Subsets (indices, λ_min of the Gram matrix, log det of the Gram matrix) to evaluate."""
    if method not in ("auto", "heuristic", "greedy", "qr", "exhaustive"):
        raise GeometryError(f"unknown method {method!r}; expected 'auto', 'heuristic', 'greedy', 'qr' "
                         "or 'exhaustive'")
    N = A.shape[1]
    if method == "exhaustive" or (method == "auto" and N <= EXHAUSTIVE_N):
        if N > 20:
            raise GeometryError("exhaustive search is limited to N ≤ 20 columns")
        return _exhaustive_family(A, max_size)
    fams: list[Candidate] = []
    if method in ("auto", "heuristic", "qr"):
        fams += _qr_family(A, max_size)
    if method in ("auto", "heuristic", "greedy"):
        fams += greedy_min_eig(A, max_size)
    if method in ("auto", "heuristic"):
        piv, _, r = _qr_order(A)
        fams += _prune_family(A, piv[:min(r, max_size)])
    return fams


def _given_subset(A: np.ndarray, cols: np.ndarray, subset: Sequence[int],
                  size_cap: int) -> list[Candidate]:
    """A caller's subset (original column indices) as the only candidate, e.g. to re-check a
    stored witness. Under ``replace`` the anchor may not be in it."""
    pos = {int(c): i for i, c in enumerate(cols)}
    raw = [int(j) for j in subset]
    if not raw or len(set(raw)) != len(raw) or any(j not in pos for j in raw):
        raise GeometryError("subset must be non-empty distinct column indices of W (not the replace anchor)")
    if len(raw) > size_cap:
        return []
    idx = np.array([pos[j] for j in raw])
    lam = np.linalg.eigvalsh(A[:, idx].T @ A[:, idx])
    if lam[0] <= 0:
        return []
    return [(idx, float(lam[0]), float(np.sum(np.log(lam))))]


def local_search(A: np.ndarray, idx: np.ndarray, score, flop_budget: float = 1e7,
                 max_columns: int = 2048, swap_out: int = 3) -> np.ndarray:
    """Hill-climb on ``score(s, eigenvalues of W_Sᵀ W_S)`` over subsets by single moves: add a
    column, drop one, or swap one in for one of the ``swap_out`` columns weighing most in the
    bottom eigenvector of the Gram matrix (those that make λ_min small). Best move first; each
    move is one exact ``eigvalsh`` (≈ s³ flops), at most ``flop_budget`` flops in all. Skipped
    above ``max_columns`` columns."""
    N = A.shape[1]
    if max_columns < N:
        return idx
    G = A.T @ A

    def value(T: list[int]) -> float:
        return float(score(len(T), np.linalg.eigvalsh(G[np.ix_(T, T)]))) if T else 0.0

    S = [int(i) for i in idx]
    cur = value(S)
    spent = 0.0
    while spent < flop_budget:
        inside = set(S)
        outside = [j for j in range(N) if j not in inside]
        _, V = np.linalg.eigh(G[np.ix_(S, S)])
        worst = np.argsort(-np.abs(V[:, 0]))[:swap_out]
        moves = [S + [j] for j in outside]
        if len(S) > 1:
            moves += [S[:i] + S[i + 1:] for i in range(len(S))]
        moves += [S[:i] + [j] + S[i + 1:] for i in worst for j in outside]
        best, best_val = None, cur * (1.0 + 1e-12)
        for T in moves:
            if spent >= flop_budget:
                break
            spent += float(len(T)) ** 3 + 1e3
            v = value(T)
            if v > best_val:
                best, best_val = T, v
        if best is None:
            break
        S, cur = best, best_val
    return np.array(S)


def multistart(A: np.ndarray, cands: list[Candidate], rank_key, score,
               starts: int = 4) -> np.ndarray:
    """:func:`local_search` from the best candidate of each size, the ``starts`` best of those
    (diverse starting sizes escape the local optima of single moves); the best end point."""
    per_size: dict[int, tuple[np.ndarray, float, float]] = {}
    for c in cands:
        if c[0].size not in per_size or rank_key(c) > rank_key(per_size[c[0].size]):
            per_size[c[0].size] = c
    order = sorted(per_size.values(), key=rank_key, reverse=True)[:starts]
    G = A.T @ A
    best, best_val = order[0][0], -1.0
    for c in order:
        end = local_search(A, c[0], score)
        v = float(score(end.size, np.linalg.eigvalsh(G[np.ix_(end, end)])))
        if v > best_val:
            best, best_val = end, v
    return best


def subset_size_cap(A: np.ndarray, max_size: int | None, n: float | None) -> int:
    """Largest |S| to consider: the columns, ``max_size``, and ⌊n⌋ (m ≥ 1 record per column)."""
    cap = A.shape[1] if max_size is None else max(1, min(int(max_size), A.shape[1]))
    return cap if n is None else min(cap, math.floor(n))


def search_subsets(A: np.ndarray, cols: np.ndarray, method: str, size_cap: int,
                   subset: Sequence[int] | None) -> list[Candidate]:
    """The candidates of ``method`` with at most ``size_cap`` columns, or the caller's
    ``subset`` (original column indices ``cols``) alone when given."""
    if size_cap < 1:
        if subset is not None:
            _given_subset(A, cols, subset, 1)  # still validate the caller's subset
        return []
    if subset is not None:
        return _given_subset(A, cols, subset, size_cap)
    return [c for c in _candidates(A, method, size_cap) if c[0].size <= size_cap]

