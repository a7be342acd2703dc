"""Marginal and parity workloads over product domains.

A ``way``-way marginal on attribute subset ``S`` counts, for every combination of
values of the attributes in ``S``, the records having those values (the other
attributes are summed out). All builders return a :class:`VStackWorkload` of
:class:`KronWorkload` blocks, one block per subset, so nothing of size ``N`` is
ever stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from ._validation import nonnegative_int, positive_int
from .builders import identity, sizes_of, total
from .domain import Domain
from .errors import WorkloadError
from .operators import DenseWorkload, KronWorkload, VStackWorkload, Workload

__all__ = ["marginals", "marginals_upto", "parity", "marginal_subsets", "MAX_BLOCKS"]


#: Most blocks (attribute subsets) one marginal/parity workload may have.
MAX_BLOCKS: int = 200_000


def marginal_subsets(d: int, way: int) -> list[tuple[int, ...]]:
    """Attribute subsets of size ``way`` of ``range(d)``, in lexicographic order.

    Raises :class:`WorkloadError` when there are more than :data:`MAX_BLOCKS`.
    """
    count = math.comb(d, way)
    if count > MAX_BLOCKS:
        raise WorkloadError(
            f"{count} attribute subsets of size {way} out of {d} exceed the limit of {MAX_BLOCKS} blocks"
        )
    return list(combinations(range(d), way))


def _check_way(way: int, d: int) -> int:
    way = nonnegative_int(way, "marginal way")
    if way > d:
        raise WorkloadError(f"marginal way={way} exceeds the number of attributes d={d}")
    return way


def _marginal_blocks(sizes: tuple[int, ...], subsets: list[tuple[int, ...]]) -> list[Workload]:
    ident: dict[int, Workload] = {}
    tot: dict[int, Workload] = {}
    blocks: list[Workload] = []
    for subset in subsets:
        chosen = set(subset)
        factors = []
        for j, n in enumerate(sizes):
            if j in chosen:
                factors.append(ident.setdefault(n, identity(n)))
            else:
                factors.append(tot.setdefault(n, total(n)))
        blocks.append(KronWorkload(factors))
    return blocks


def marginals(domain_or_sizes: Domain | Sequence[int], way: int) -> VStackWorkload:
    """All ``way``-way marginals over a product domain with sizes ``n_0, ..., n_{d-1}``.

    One block per subset ``S`` of ``way`` attributes, subsets in lexicographic
    order; block ``S`` is ``⊗_j (I_{n_j} if j ∈ S else 1ᵀ_{n_j})`` with ``Π_{j∈S} n_j``
    rows: the contingency table of the attributes in ``S`` (C order over ``S``).
    Shape ``(Σ_S Π_{j∈S} n_j, Π_j n_j)``. ``way = 0`` gives the single total query.
    """
    sizes = sizes_of(domain_or_sizes)
    way = _check_way(way, len(sizes))
    return VStackWorkload(_marginal_blocks(sizes, marginal_subsets(len(sizes), way)))


def marginals_upto(domain_or_sizes: Domain | Sequence[int], way: int) -> VStackWorkload:
    """All marginals of at most ``way`` attributes, including the 0-way total.

    Blocks ordered by subset size (0, 1, ..., way), then lexicographically; each
    block as in :func:`marginals`. Shape ``(Σ_{|S|<=way} Π_{j∈S} n_j, Π_j n_j)``.
    """
    sizes = sizes_of(domain_or_sizes)
    way = _check_way(way, len(sizes))
    if sum(math.comb(len(sizes), w) for w in range(way + 1)) > MAX_BLOCKS:
        raise WorkloadError(f"marginals of up to {way} of {len(sizes)} attributes exceed {MAX_BLOCKS} blocks")
    subsets = [s for w in range(way + 1) for s in marginal_subsets(len(sizes), w)]
    return VStackWorkload(_marginal_blocks(sizes, subsets))


def parity(d: int, way: int) -> VStackWorkload:
    """Parity queries of order ``way`` on the hypercube ``{±1}^d``.

    For each subset ``S`` of ``way`` coordinates (lexicographic order) one query,
    ``χ_S(x) = Π_{i∈S} x_i``, over the ``2^d`` points in Kronecker (C) order with
    bit value ``0 ↔ +1`` and ``1 ↔ -1``. Shape ``(C(d, way), 2^d)``; built as a
    :class:`VStackWorkload` of 1-row :class:`KronWorkload` blocks of ``[1, 1]`` /
    ``[1, -1]`` factors.
    """
    d = positive_int(d, "parity dimension d")
    way = _check_way(way, d)
    plus = DenseWorkload(np.array([[1.0, 1.0]]))
    chi = DenseWorkload(np.array([[1.0, -1.0]]))
    blocks: list[Workload] = []
    for subset in marginal_subsets(d, way):
        chosen = set(subset)
        blocks.append(KronWorkload([chi if i in chosen else plus for i in range(d)]))
    return VStackWorkload(blocks)
