"""Marginal and parity workloads over product domains.

A ``way``-way marginal on attribute subset ``S`` counts, for every combination of
values of the attributes in ``S``, the records having those values (the other
attributes are summed out). The marginal builders return a :class:`MarginalWorkload`
(block ``S = ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}``, one block per subset, Kronecker blocks
built only on demand); :func:`parity` a :class:`VStackWorkload` of :class:`KronWorkload`
blocks. Nothing of size ``N`` is ever stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from factorize.numerics import integer

from .domain import Domain
from .errors import WorkloadError
from .marginal_workload import MAX_MARGINAL_BLOCKS, MarginalWorkload, check_sizes
from .operators import DenseWorkload, KronWorkload, VStackWorkload, Workload

__all__ = ["marginals", "marginals_upto", "parity", "marginal_subsets", "subset_count", "MAX_BLOCKS",
           "MAX_MARGINAL_BLOCKS"]


#: Most blocks one parity workload may have (it builds one KronWorkload per subset).
MAX_BLOCKS: int = 200_000


def subset_count(d: int, way: int, upto: bool = False, cap: int = MAX_MARGINAL_BLOCKS) -> int:
    """``C(d, way)`` (or ``Σ_{w<=way} C(d, w)`` with ``upto``), or ``cap + 1`` when larger
    than ``cap`` -- cheap even for huge ``d`` (no big binomials are formed)."""
    total_count = 0
    for w in range(way + 1) if upto else (way,):
        if w > d:
            continue
        k = min(w, d - w)
        if k > 64:  # C(d, k) >= C(2k, k) > 2^120
            return cap + 1
        total_count += math.comb(d, k)
        if total_count > cap:
            return cap + 1
    return total_count


def marginal_subsets(d: int, way: int, limit: int = MAX_MARGINAL_BLOCKS) -> list[tuple[int, ...]]:
    """Attribute subsets of size ``way`` of ``range(d)``, in lexicographic order.

    Raises :class:`WorkloadError` when there are more than ``limit``.
    """
    count = subset_count(d, way, cap=limit)
    if count > limit:
        raise WorkloadError(
            f"more than {limit} attribute subsets of size {way} out of {d}: above the limit of "
            f"{limit} blocks"
        )
    return list(combinations(range(d), way))


def _check_way(way: int, d: int) -> int:
    way = integer("marginal way", way, 0, WorkloadError)
    if way > d:
        raise WorkloadError(f"marginal way={way} exceeds the number of attributes d={d}")
    return way


def _family(sizes: tuple[int, ...], way: int, upto: bool) -> MarginalWorkload:
    d = len(sizes)
    if subset_count(d, way, upto) > MAX_MARGINAL_BLOCKS:
        what = f"marginals of up to {way}" if upto else f"{way}-way marginals"
        raise WorkloadError(f"{what} of {d} attributes exceed the limit of {MAX_MARGINAL_BLOCKS} "
                            "blocks of one marginal workload")
    ways = range(way + 1) if upto else (way,)
    subsets = tuple(s for w in ways for s in combinations(range(d), w))
    return MarginalWorkload._trusted(sizes, subsets, (1.0,) * len(subsets))


def marginals(domain_or_sizes: Domain | Sequence[int], way: int) -> MarginalWorkload:
    """All ``way``-way marginals over a product domain with sizes ``n_0, ..., n_{d-1}``.

    One block per subset ``S`` of ``way`` attributes, subsets in lexicographic
    order; block ``S`` is ``⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}`` with ``Π_{j∈S} n_j``
    rows: the contingency table of the attributes in ``S`` (C order over ``S``).
    Shape ``(Σ_S Π_{j∈S} n_j, Π_j n_j)``. ``way = 0`` gives the single total query.
    At most :data:`MAX_MARGINAL_BLOCKS` subsets.
    """
    sizes = check_sizes(domain_or_sizes)
    way = _check_way(way, len(sizes))
    return _family(sizes, way, upto=False)


def marginals_upto(domain_or_sizes: Domain | Sequence[int], way: int) -> MarginalWorkload:
    """All marginals of at most ``way`` attributes, including the 0-way total.

    Blocks ordered by subset size (0, 1, ..., way), then lexicographically; each
    block as in :func:`marginals`. Shape ``(Σ_{|S|<=way} Π_{j∈S} n_j, Π_j n_j)``.
    """
    sizes = check_sizes(domain_or_sizes)
    way = _check_way(way, len(sizes))
    return _family(sizes, way, upto=True)


def parity(d: int, way: int) -> VStackWorkload:
    """Parity queries of order ``way`` on the hypercube ``{±1}^d``.

    For each subset ``S`` of ``way`` coordinates (lexicographic order) one query,
    ``χ_S(x) = Π_{i∈S} x_i``, over the ``2^d`` points in Kronecker (C) order with
    bit value ``0 ↔ +1`` and ``1 ↔ -1``. Shape ``(C(d, way), 2^d)``; built as a
    :class:`VStackWorkload` of 1-row :class:`KronWorkload` blocks of ``[1, 1]`` /
    ``[1, -1]`` factors.
    """
    d = integer("parity dimension d", d, 1, WorkloadError)
    way = _check_way(way, d)
    plus = DenseWorkload(np.array([[1.0, 1.0]]))
    chi = DenseWorkload(np.array([[1.0, -1.0]]))
    blocks: list[Workload] = []
    for subset in marginal_subsets(d, way, limit=MAX_BLOCKS):
        chosen = set(subset)
        blocks.append(KronWorkload([chi if i in chosen else plus for i in range(d)]))
    return VStackWorkload(blocks)
