"""Sensitivity of a strategy matrix ``A`` (m×N) under each neighbouring relation (MATH.md §1).

A mechanism releases ``A h + Z``; its privacy depends on ``A`` only through

    Δ_p = max over neighbours h ~ h' of ||A (h − h')||_p ,   p ∈ {1, 2}.

MATH.md §1 gives the two neighbouring relations:

* add/remove one record, ``h − h' = ±e_x``: ``Δ_p = max_x ||a_x||_p`` (largest column p-norm,
  i.e. ``||A||_{1→2}`` for p = 2 and ``||A||_{1→1}`` for p = 1);
* replace one record, ``h − h' = e_x − e_y`` (x ≠ y): ``Δ_p = max_{x≠y} ||a_x − a_y||_p``,
  which by the triangle inequality is at most ``2 max_x ||a_x||_p`` (MATH.md §1: "at most
  twice the add/remove value"). It can be much smaller, e.g. for ``A = J`` (all ones) it is 0.

The exact replace sensitivity costs O(N² m) time; it is computed in column blocks so memory
stays bounded (``max_block_elements`` floats per block) however large N is. For L2 the block
computation uses the Gram identity ``||a_x − a_y||² = ||a_x||² + ||a_y||² − 2⟨a_x, a_y⟩``
(one BLAS matrix product per block) together with a rigorous floating-point error bound; the
reported value is an upper bound within 5e-10 (relative) of the exact maximum, and when the
identity cancels badly (near-duplicate columns) the maximum is recomputed from explicit
differences instead.

Kronecker strategies ``A = A_1 ⊗ … ⊗ A_d`` never need the dense matrix for add/remove: the
columns of a Kronecker product are Kronecker products of columns, and the p-norm of a Kronecker
product of vectors is the product of their p-norms, so the largest column p-norm is the product
of the factors' largest column p-norms (exact). For *replace* there is no such product rule; the
dense routine is used when ``N = Π N_i`` is small enough (``max_dense_columns``) and otherwise the
bound ``2 × add/remove`` is returned, flagged ``exact=False``.

Every function returns a :class:`Sensitivity` recording the value, the norm, the relation and
whether the value is exact (up to floating-point rounding) or an upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .guarantees import Neighbouring, PrivacyError

__all__ = [
    "Sensitivity",
    "column_norms",
    "add_remove_sensitivity",
    "replace_sensitivity",
    "replace_sensitivity_bound",
    "sensitivity",
    "kron_sensitivity",
]

_NORMS = ("l1", "l2")
_DEFAULT_BLOCK_ELEMENTS = 1 << 22  # 4M float64 = 32 MiB per temporary block


@dataclass(frozen=True)
class Sensitivity:
    """A sensitivity value with its provenance.

    ``value``: the sensitivity (≥ 0, finite). ``norm``: ``"l1"`` or ``"l2"``.
    ``relation``: the :class:`Neighbouring` relation. ``exact``: True when ``value`` is the exact
    maximum (up to floating-point rounding of the input), False when it is an upper bound.
    """

    value: float
    norm: str
    relation: Neighbouring
    exact: bool

    def __post_init__(self) -> None:
        if self.norm not in _NORMS:
            raise PrivacyError(f"sensitivity norm must be 'l1' or 'l2', got {self.norm!r}")
        v = float(self.value)
        if not math.isfinite(v) or v < 0:
            raise PrivacyError(f"sensitivity must be finite and >= 0, got {self.value!r}")
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "relation", Neighbouring.parse(self.relation))
        object.__setattr__(self, "exact", bool(self.exact))

    def __float__(self) -> float:
        return self.value

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "norm": self.norm,
            "relation": self.relation.key,
            "exact": self.exact,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Sensitivity":
        try:
            return cls(data["value"], data["norm"], Neighbouring.parse(data["relation"]), data["exact"])
        except KeyError as exc:
            raise PrivacyError(f"sensitivity dict is missing {exc.args[0]!r}") from None


def _check_norm(norm: str) -> str:
    n = str(norm).lower().replace("_", "")
    if n in ("l1", "1"):
        return "l1"
    if n in ("l2", "2"):
        return "l2"
    raise PrivacyError(f"norm must be 'l1' or 'l2', got {norm!r}")


def _as_matrix(A: Any) -> Any:
    """Dense float64 2-D array, or a scipy.sparse matrix left sparse."""
    try:
        import scipy.sparse as sp

        if sp.issparse(A):
            if A.ndim != 2:
                raise PrivacyError("strategy matrix must be 2-D")
            return A.tocsc().astype(np.float64)
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2:
        raise PrivacyError(f"strategy matrix must be 2-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("strategy matrix has non-finite entries")
    return arr


def column_norms(A: Any, norm: str = "l2") -> np.ndarray:
    """p-norms of the columns of ``A`` (dense or scipy.sparse), p = 1 or 2."""
    norm = _check_norm(norm)
    M = _as_matrix(A)
    if isinstance(M, np.ndarray):
        if norm == "l1":
            return np.abs(M).sum(axis=0)
        return np.sqrt(np.einsum("ij,ij->j", M, M))
    if norm == "l1":
        return np.asarray(abs(M).sum(axis=0)).ravel()
    return np.sqrt(np.asarray(M.multiply(M).sum(axis=0)).ravel())


def add_remove_sensitivity(A: Any, norm: str = "l2") -> Sensitivity:
    """Add/remove sensitivity ``max_x ||A e_x||_p`` = largest column p-norm (MATH.md §1).

    p = 2 gives ``||A||_{1→2}``, p = 1 gives ``||A||_{1→1}``. Exact.
    """
    norm = _check_norm(norm)
    cn = column_norms(A, norm)
    value = float(cn.max()) if cn.size else 0.0
    return Sensitivity(value, norm, Neighbouring.ADD_REMOVE, True)


def replace_sensitivity_bound(A: Any, norm: str = "l2") -> Sensitivity:
    """Cheap upper bound on the replace sensitivity: ``2 × add/remove`` (triangle inequality).

    ``||a_x − a_y|| ≤ ||a_x|| + ||a_y|| ≤ 2 max_z ||a_z||``. Flagged ``exact=False``.
    """
    ar = add_remove_sensitivity(A, norm)
    return Sensitivity(2.0 * ar.value, ar.norm, Neighbouring.REPLACE, False)


def _block_size(N: int, m: int, per_pair: int, max_block_elements: int) -> int:
    return max(1, min(N, max_block_elements // max(1, N * per_pair)))


_U = 2.0**-53  # unit roundoff of float64


def _replace_l2_exact(M: np.ndarray, max_block_elements: int) -> float:
    """max_{x≠y} ||a_x − a_y||_2 via blockwise Gram matrices, with a rigorous error check.

    The computed ``D = ||a_x||² + ||a_y||² − 2⟨a_x, a_y⟩`` differs from the true value by at most
    ``E = (2m + 8)·u·(||a_x||² + ||a_y||²)`` (standard dot-product error bounds, u = 2^-53). We
    track ``max(D + E)`` (an upper bound on the true maximum) and the maximiser of D. If the
    upper bound is within 1e-9 (relative, in squared norm) of the directly recomputed distance of
    that pair, the upper bound's square root is returned (≥ the exact value, and within 5e-10 of
    it). Otherwise (near-duplicate columns: the Gram identity cancels) the maximum is recomputed
    from explicit differences, which has no cancellation.
    """
    m, N = M.shape
    sq = np.einsum("ij,ij->j", M, M)
    c = (2.0 * m + 8.0) * _U * 1.01
    b = _block_size(N, m, 1, max_block_elements)
    best = -np.inf
    best_upper = -np.inf
    best_pair = (0, 1)
    for start in range(0, N, b):
        stop = min(N, start + b)
        G = M[:, start:stop].T @ M  # (stop-start) × N Gram block
        S = sq[start:stop, None] + sq[None, :]
        D = S - 2.0 * G
        # Exclude x == y (the diagonal): it is 0 in exact arithmetic and not a valid pair.
        rows = np.arange(stop - start)
        D[rows, rows + start] = -np.inf
        k = int(np.argmax(D))
        i, j = divmod(k, N)
        if D[i, j] > best:
            best = float(D[i, j])
            best_pair = (start + i, j)
        D += c * S
        best_upper = max(best_upper, float(D.max()))
    x, y = best_pair
    diff = M[:, x] - M[:, y]
    direct_sq = float(diff @ diff)
    if best_upper <= direct_sq * (1.0 + 1e-9):
        return math.sqrt(max(best_upper, 0.0))
    return _replace_direct(M, "l2", max_block_elements)


def _replace_direct(M: np.ndarray, norm: str, max_block_elements: int) -> float:
    """max over pairs of ||a_x − a_y||_p from explicit differences, in bounded-size blocks."""
    m, N = M.shape
    MT = np.ascontiguousarray(M.T)  # N × m: column x of A is row x of MT
    # Work on (bx, by, m) tensors with bx·by·m ≤ max_block_elements.
    by = max(1, min(N, max_block_elements // max(1, m)))
    bx = max(1, min(N, max_block_elements // max(1, by * m)))
    best = 0.0
    for xs in range(0, N, bx):
        X = MT[xs : xs + bx]
        for ys in range(xs, N, by):  # upper triangle suffices: the distance is symmetric
            Y = MT[ys : ys + by]
            diff = X[:, None, :] - Y[None, :, :]
            if norm == "l1":
                D = np.abs(diff).sum(axis=2)
            else:
                D = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            best = max(best, float(D.max()))
    # Diagonal pairs contribute 0 <= best, so including them never changes the maximum
    # as long as N >= 2 (checked by the caller).
    return best


def replace_sensitivity(
    A: Any,
    norm: str = "l2",
    *,
    exact: bool = True,
    max_block_elements: int = _DEFAULT_BLOCK_ELEMENTS,
) -> Sensitivity:
    """Replace-one-record sensitivity ``max_{x≠y} ||A(e_x − e_y)||_p`` (MATH.md §1).

    With ``exact=True`` (default) the maximum over all ``N(N−1)/2`` pairs is computed in column
    blocks: O(N² m) time, O(max_block_elements) extra memory. L2 uses the Gram identity
    ``||a_x − a_y||² = ||a_x||² + ||a_y||² − 2⟨a_x, a_y⟩`` blockwise (BLAS) with a rigorous
    rounding-error bound (falling back to explicit differences if the identity cancels); L1 sums
    ``|a_x − a_y|`` blockwise. With ``exact=False`` the bound
    ``2 × add/remove`` is returned instead (``Sensitivity.exact`` is False).

    A universe with a single record type (N = 1) has no pair x ≠ y: the sensitivity is 0.
    """
    norm = _check_norm(norm)
    if not exact:
        return replace_sensitivity_bound(A, norm)
    M = _as_matrix(A)
    if not isinstance(M, np.ndarray):
        M = np.asarray(M.toarray(), dtype=np.float64)
    m, N = M.shape
    if N < 2 or m == 0:
        return Sensitivity(0.0, norm, Neighbouring.REPLACE, True)
    if max_block_elements < 1:
        raise PrivacyError("max_block_elements must be >= 1")
    if norm == "l2":
        value = _replace_l2_exact(M, max_block_elements)
    else:
        value = _replace_direct(M, "l1", max_block_elements)
    return Sensitivity(value, norm, Neighbouring.REPLACE, True)


def sensitivity(
    A: Any,
    norm: str = "l2",
    relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
    *,
    exact: bool = True,
    max_block_elements: int = _DEFAULT_BLOCK_ELEMENTS,
) -> Sensitivity:
    """Sensitivity of ``A`` in the given norm under the given relation (dispatcher)."""
    relation = Neighbouring.parse(relation)
    if relation is Neighbouring.ADD_REMOVE:
        return add_remove_sensitivity(A, norm)
    return replace_sensitivity(A, norm, exact=exact, max_block_elements=max_block_elements)


def kron_sensitivity(
    factors: Sequence[Any],
    norm: str = "l2",
    relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
    *,
    max_dense_columns: int = 4096,
    max_dense_elements: int = 1 << 24,
) -> Sensitivity:
    """Sensitivity of the Kronecker strategy ``A = A_1 ⊗ A_2 ⊗ … ⊗ A_d`` from its factors.

    Add/remove (exact): column ``(j_1, …, j_d)`` of ``A`` is ``a^(1)_{j_1} ⊗ … ⊗ a^(d)_{j_d}`` and
    ``||u ⊗ v||_p = ||u||_p ||v||_p`` for every p, so the largest column p-norm of ``A`` is the
    product of the factors' largest column p-norms.

    Replace: there is no product rule. When ``N = Π N_i ≤ max_dense_columns`` and
    ``m·N ≤ max_dense_elements`` the dense Kronecker product is formed and
    :func:`replace_sensitivity` computes the exact value; otherwise the upper bound
    ``2 × (add/remove value)`` is returned with ``exact=False``.
    """
    norm = _check_norm(norm)
    relation = Neighbouring.parse(relation)
    if len(factors) == 0:
        raise PrivacyError("kron_sensitivity needs at least one factor")
    mats = [_as_matrix(F) for F in factors]
    ar = 1.0
    for F in mats:
        ar *= add_remove_sensitivity(F, norm).value
    if relation is Neighbouring.ADD_REMOVE:
        return Sensitivity(ar, norm, relation, True)
    N = math.prod(F.shape[1] for F in mats)
    m = math.prod(F.shape[0] for F in mats)
    if N <= max_dense_columns and m * N <= max_dense_elements:
        dense = np.ones((1, 1))
        for F in mats:
            Fd = F if isinstance(F, np.ndarray) else F.toarray()
            dense = np.kron(dense, Fd)
        return replace_sensitivity(dense, norm, exact=True)
    return Sensitivity(2.0 * ar, norm, relation, False)
