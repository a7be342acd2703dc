"""Builders for standard one-dimensional and product-domain range workloads.

Every builder documents the query semantics and the shape ``(k, N)`` of the
matrix it returns; ``N`` is the histogram length, ``k`` the number of queries.
Sizes must be positive integers (otherwise :class:`WorkloadError`). Builders that
store an explicit matrix refuse to allocate more than
``DEFAULT_MAX_DENSE_ENTRIES`` entries; multi-dimensional workloads are Kronecker
products of small factors and never densify.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from factorize.numerics import integer

from .domain import Domain
from .errors import WorkloadError
from .files import from_file
from .operators import DEFAULT_MAX_DENSE_ENTRIES, DenseWorkload, KronWorkload, SparseWorkload, Workload

__all__ = [
    "identity",
    "total",
    "prefix",
    "allrange",
    "width",
    "prefix_nd",
    "range_nd",
    "hadamard",
    "random",
    "sizes_of",
    "from_file",
]


def _check_entries(k: int, n: int, name: str) -> None:
    if k * n > DEFAULT_MAX_DENSE_ENTRIES:
        raise WorkloadError(
            f"{name} would store a {k} x {n} matrix ({k * n} entries), above the limit "
            f"DEFAULT_MAX_DENSE_ENTRIES={DEFAULT_MAX_DENSE_ENTRIES}; use a Kronecker product of "
            f"smaller factors (e.g. prefix_nd / range_nd) instead"
        )


def sizes_of(domain_or_sizes: Domain | Sequence[int], name: str = "sizes") -> tuple[int, ...]:
    """Attribute sizes of a :class:`Domain` or a non-empty sequence of positive ints."""
    if isinstance(domain_or_sizes, Domain):
        return domain_or_sizes.sizes
    if isinstance(domain_or_sizes, (str, bytes)):
        raise WorkloadError(f"{name} must be a Domain or a sequence of positive integers, got a string")
    try:
        raw = list(domain_or_sizes)
    except TypeError:
        raise WorkloadError(
            f"{name} must be a Domain or a sequence of positive integers, got {type(domain_or_sizes).__name__}"
        ) from None
    if not raw:
        raise WorkloadError(f"{name} must contain at least one size")
    return tuple(integer(f"{name}[{i}]", s, 1, WorkloadError) for i, s in enumerate(raw))


#: Up to this size an identity is held densely (at most 4,096 entries): no scipy on the run
#: path of plans with small identity factors; larger identities are sparse.
DENSE_IDENTITY_MAX = 64


def identity(n: int) -> DenseWorkload | SparseWorkload:
    """Identity workload ``I_n``: query ``i`` counts cell ``i``. Shape ``(n, n)``; dense up to
    ``n = DENSE_IDENTITY_MAX``, sparse above (the fingerprint is the same either way: a small
    sparse matrix hashes as its dense copy)."""
    n = integer("identity size n", n, 1, WorkloadError)
    _check_entries(1, n, "identity(n)")
    if n <= DENSE_IDENTITY_MAX:
        return DenseWorkload(np.eye(n))
    import scipy.sparse as sp  # deferred: the run path loads scipy only when a workload needs it

    return SparseWorkload(sp.identity(n, dtype=np.float64, format="csr"))


def total(n: int) -> DenseWorkload:
    """Total workload: one query, the sum of all ``n`` cells. Shape ``(1, n)`` of ones."""
    n = integer("total size n", n, 1, WorkloadError)
    _check_entries(1, n, "total(n)")
    return DenseWorkload(np.ones((1, n)))


def prefix(n: int) -> DenseWorkload:
    """Prefix sums (CDF): query ``i`` counts cells ``0..i``.

    Shape ``(n, n)``, lower-triangular all-ones ``L_n`` (``L[i, j] = 1`` iff ``j <= i``).
    """
    n = integer("prefix size n", n, 1, WorkloadError)
    _check_entries(n, n, "prefix(n)")
    return DenseWorkload(np.tril(np.ones((n, n))))


def allrange(n: int) -> DenseWorkload:
    """All range queries: one query per interval ``[i, j]``, ``0 <= i <= j < n``, counting cells ``i..j``.

    Rows are ordered by ``i`` then ``j``; shape ``(n(n+1)/2, n)``.
    """
    n = integer("allrange size n", n, 1, WorkloadError)
    k = n * (n + 1) // 2
    _check_entries(k, n, "allrange(n)")
    lo, hi = np.triu_indices(n)  # row-major: by lo, then hi
    cols = np.arange(n)
    return DenseWorkload(((cols >= lo[:, None]) & (cols <= hi[:, None])).astype(np.float64))


def width(n: int, w: int) -> DenseWorkload:
    """All ranges of width exactly ``w``: query ``i`` counts cells ``i..i+w-1``, ``i = 0..n-w``.

    Shape ``(n - w + 1, n)``; requires ``1 <= w <= n``.
    """
    n = integer("width-range size n", n, 1, WorkloadError)
    w = integer("range width w", w, 1, WorkloadError)
    if w > n:
        raise WorkloadError(f"range width w={w} exceeds the domain size n={n}")
    k = n - w + 1
    _check_entries(k, n, "width(n, w)")
    lo = np.arange(k)
    cols = np.arange(n)
    return DenseWorkload(((cols >= lo[:, None]) & (cols < lo[:, None] + w)).astype(np.float64))


def prefix_nd(sizes: Domain | Sequence[int]) -> KronWorkload:
    """Multi-dimensional prefix (orthant) queries: ``prefix(n_0) ⊗ prefix(n_1) ⊗ ...``.

    Query ``(i_0, ..., i_{d-1})`` counts cells ``c`` with ``c_j <= i_j`` for all ``j``.
    Shape ``(Π n_j, Π n_j)``; always a :class:`KronWorkload` (even for one size).
    """
    return KronWorkload([prefix(n) for n in sizes_of(sizes)])


def range_nd(sizes: Domain | Sequence[int]) -> KronWorkload:
    """Multi-dimensional range (box) queries: ``allrange(n_0) ⊗ allrange(n_1) ⊗ ...``.

    One query per box ``Π_j [lo_j, hi_j]``; shape ``(Π n_j(n_j+1)/2, Π n_j)``;
    always a :class:`KronWorkload`.
    """
    return KronWorkload([allrange(n) for n in sizes_of(sizes)])


_H2 = np.array([[1.0, 1.0], [1.0, -1.0]])


def hadamard(n: int) -> Workload:
    """Sylvester Hadamard matrix ``H_n`` (``n`` a power of 2): ``H_n = H_2^{⊗ log2 n}``.

    Entry ``(r, c) = (-1)^{popcount(r & c)}``; shape ``(n, n)``; ``H Hᵀ = n I``.
    Returned as a :class:`KronWorkload` of ``[[1, 1], [1, -1]]`` factors, or a
    1x1 :class:`DenseWorkload` ``[[1]]`` for ``n = 1``.
    """
    n = integer("hadamard size n", n, 1, WorkloadError)
    if n & (n - 1):
        raise WorkloadError(f"hadamard size n must be a power of 2, got {n}")
    if n == 1:
        return DenseWorkload(np.ones((1, 1)))
    h2 = DenseWorkload(_H2)
    return KronWorkload([h2] * (n.bit_length() - 1))


def random(k: int, n: int, seed: int) -> DenseWorkload:
    """Random ±1 workload: ``k`` queries over ``n`` cells with i.i.d. uniform ±1 entries.

    Entries are ``2 * np.random.default_rng(seed).integers(0, 2, size=(k, n)) - 1``;
    the seed is required so that the workload is reproducible. Shape ``(k, n)``.
    """
    k = integer("random workload rows k", k, 1, WorkloadError)
    n = integer("random workload columns n", n, 1, WorkloadError)
    seed = integer("seed", seed, 0, WorkloadError)
    _check_entries(k, n, "random(k, n)")
    rng = np.random.default_rng(seed)
    return DenseWorkload(2.0 * rng.integers(0, 2, size=(k, n)) - 1.0)
