"""Structured linear operators representing workloads (the public facade).

A workload is a matrix ``W`` of shape ``(k, N)``: ``k`` linear queries over a
histogram ``h`` of length ``N``; query ``i`` answers ``(W h)_i``.

* :class:`Workload` (:mod:`.base`) -- the interface: ``shape``, ``matvec``,
  ``rmatvec``, ``gram``, ``dense``, ``spec``, ``fingerprint``.
* :class:`DenseWorkload`, :class:`SparseWorkload` (:mod:`.explicit`) -- explicit matrices.
* :class:`KronWorkload`, :class:`VStackWorkload`, :class:`SumWorkload`
  (:mod:`.structured`) -- products, unions and sums that are never densified.
* :class:`GramWorkload` (:mod:`.base`) -- the lazy Gram matrix ``BᵀB``.
"""

from .base import DEFAULT_MAX_DENSE_ENTRIES, GramWorkload, Workload
from .explicit import DenseWorkload, SparseWorkload
from .structured import KronWorkload, SumWorkload, VStackWorkload, as_operator

__all__ = [
    "DEFAULT_MAX_DENSE_ENTRIES",
    "Workload",
    "DenseWorkload",
    "SparseWorkload",
    "KronWorkload",
    "VStackWorkload",
    "SumWorkload",
    "GramWorkload",
    "as_operator",
]
