"""A workload as blocks of per-attribute factors: ``W = [w_o · ⊗_j W_{o,j}]_o``.

The structured verifier compares a reconstruction with the workload attribute by attribute,
so it needs each block's factor on each domain attribute: the identity ``I_{n_j}``, the
all-ones row ``1ᵀ_{n_j}`` (the attribute is summed out), or a small explicit matrix. They come
from the workload's structure, never from an N-column object:

* a marginal workload (``marginal_structure()``: sizes, subsets, weights) — block S is
  ``w_S ⊗_{j∈S} I ⊗_{j∉S} 1ᵀ``;
* a union (``blocks``) of Kronecker products (``factors``) whose leaves line up one per
  domain attribute; 1×1 leaves multiply the block's weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.structured import kron_leaves

from .blocks import StructureError

#: Largest explicit factor read densely (entries).
MAX_FACTOR_ENTRIES = 1 << 24


@dataclass(frozen=True)
class AxisFactor:
    """A workload block's factor on one attribute of size n."""

    kind: str                           # "identity" | "total" | "matrix"
    n: int
    matrix: np.ndarray | None = None    # for "matrix" (and only for it)

    def __post_init__(self) -> None:
        if self.kind not in ("identity", "total", "matrix") or (self.matrix is None) != (self.kind != "matrix"):
            raise StructureError(f"an attribute factor is \"identity\", \"total\" or \"matrix\" with its "
                                 f"matrix (only), got kind {self.kind!r} "
                                 f"{'without' if self.matrix is None else 'with'} a matrix")

    @property
    def explicit(self) -> np.ndarray:
        """The stored matrix of a ``"matrix"`` factor (:class:`StructureError` for an identity or
        total, which store none: :meth:`dense` builds those)."""
        if self.matrix is None:
            raise StructureError(f"a {self.kind!r} attribute factor has no explicit matrix")
        return self.matrix

    @property
    def rows(self) -> int:
        if self.kind == "identity":
            return self.n
        if self.kind == "total":
            return 1
        return int(self.explicit.shape[0])

    @property
    def key(self) -> str:
        """Identifies equal factors (memoizes per-attribute checks)."""
        if self.kind != "matrix":
            return f"{self.kind}:{self.n}"
        import hashlib

        M = self.explicit
        return "matrix:" + hashlib.sha256(np.ascontiguousarray(M).tobytes() + str(M.shape).encode()).hexdigest()

    def dense(self) -> np.ndarray:
        if self.kind == "identity":
            return np.eye(self.n)
        if self.kind == "total":
            return np.ones((1, self.n))
        return self.explicit

    def max_abs(self) -> float:
        return 1.0 if self.kind != "matrix" else float(np.max(np.abs(self.explicit)))


class WorkloadBlock:
    """``weight · ⊗_j factors[j]`` (one factor per domain attribute). A marginal block is
    stored as its support (identities there, totals elsewhere) and builds its factors only
    when asked."""

    __slots__ = ("weight", "_factors", "_sizes", "_support")

    def __init__(self, weight: float, factors: Sequence[AxisFactor] | None = None, *,
                 sizes: Sequence[int] | None = None, support: Sequence[int] | None = None) -> None:
        self.weight = float(weight)
        self._factors = None if factors is None else tuple(factors)
        self._sizes = None if sizes is None else tuple(int(n) for n in sizes)
        self._support: tuple[int, ...] | None = None
        if support is not None:
            if self._sizes is None:
                raise StructureError("a marginal workload block needs the attribute sizes with its support")
            self._support = tuple(j for j in support if self._sizes[j] > 1)
        elif self._factors is not None and not any(f.kind == "matrix" for f in self._factors):
            self._support = tuple(j for j, f in enumerate(self._factors)
                                  if f.kind == "identity" and f.n > 1)
        if self._factors is None and (self._sizes is None or self._support is None):
            raise StructureError("a workload block needs its factors or its sizes and support")

    @classmethod
    def marginal(cls, weight: float, sizes: Sequence[int], support: Sequence[int]) -> WorkloadBlock:
        return cls(weight, sizes=sizes, support=support)

    def _marginal_parts(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(sizes, support)`` of a block stored as a marginal (the constructor refuses a
        block with neither these nor its factors)."""
        if self._sizes is None or self._support is None:
            raise StructureError("a workload block needs its factors or its sizes and support")
        return self._sizes, self._support

    @property
    def factors(self) -> tuple[AxisFactor, ...]:
        if self._factors is None:
            sizes, support = self._marginal_parts()
            chosen = set(support)
            self._factors = tuple(AxisFactor("identity" if j in chosen else "total", n)
                                  for j, n in enumerate(sizes))
        return self._factors

    def factor(self, j: int) -> AxisFactor:
        if self._factors is None:
            sizes, support = self._marginal_parts()
            return AxisFactor("identity" if j in support else "total", sizes[j])
        return self._factors[j]

    def active(self) -> tuple[int, ...]:
        """The attributes whose factor is not the all-ones row."""
        if self._factors is None:
            return self._marginal_parts()[1]
        return tuple(j for j, f in enumerate(self._factors) if f.kind != "total")

    @property
    def rows(self) -> int:
        if self._factors is None:
            sizes, support = self._marginal_parts()
            return math.prod(sizes[j] for j in support)
        return math.prod(f.rows for f in self._factors)

    def max_abs(self) -> float:
        """``max|w ⊗_j W_j|``."""
        if self._factors is None:
            return abs(self.weight)
        return abs(self.weight) * math.prod(f.max_abs() for f in self._factors)

    @property
    def marginal_support(self) -> tuple[int, ...] | None:
        """The attributes of a marginal block (identities on them, totals elsewhere; size-1
        attributes left out), None when the block is not a marginal."""
        return self._support


def workload_blocks(W: Any, sizes: Sequence[int]) -> list[WorkloadBlock]:
    """The blocks of ``W`` over a domain of attribute sizes ``sizes`` (module docstring);
    :class:`StructureError` for a workload that has no such form."""
    sizes = tuple(int(n) for n in sizes)
    structure = getattr(W, "marginal_structure", None)
    if callable(structure):
        msizes, subsets, weights = structure()
        if tuple(msizes) != sizes:
            raise StructureError(f"the marginal workload has attribute sizes {tuple(msizes)}, "
                                 f"the domain {sizes}")
        return [WorkloadBlock.marginal(w, sizes, S) for S, w in zip(subsets, weights, strict=True)]
    return [_kron_block(B, sizes) for B in _flat_blocks(W)]


def _flat_blocks(W: Any) -> list[Any]:
    blocks = getattr(W, "blocks", None)
    if blocks is None or getattr(W, "factors", None) is not None:
        return [W]
    out: list[Any] = []
    for b in blocks:
        out.extend(_flat_blocks(b))
    return out


def _kron_block(B: Any, sizes: tuple[int, ...]) -> WorkloadBlock:
    weight = 1.0
    factors: list[AxisFactor] = []
    j = 0
    for leaf in kron_leaves(B):
        k, n = (int(x) for x in leaf.shape)
        if (k, n) == (1, 1) and (j >= len(sizes) or sizes[j] != 1):
            weight *= float(leaf.dense()[0, 0])
            continue
        while j < len(sizes) and sizes[j] == 1 and n != 1:
            factors.append(AxisFactor("total", 1))
            j += 1
        if j >= len(sizes) or n != sizes[j]:
            raise StructureError("the workload's Kronecker factors do not line up one per domain "
                                 "attribute (a structured plan needs each factor on one attribute)")
        factors.append(_axis_factor(leaf, n))
        j += 1
    while j < len(sizes) and sizes[j] == 1:
        factors.append(AxisFactor("total", 1))
        j += 1
    if j != len(sizes):
        raise StructureError("the workload's Kronecker factors do not cover every domain attribute")
    if not (math.isfinite(weight) and weight != 0.0):
        raise StructureError("a workload block has a zero or non-finite scalar factor")
    return WorkloadBlock(weight, tuple(factors))


def _axis_factor(leaf: Any, n: int) -> AxisFactor:
    k = int(leaf.shape[0])
    if k * n > MAX_FACTOR_ENTRIES:
        raise StructureError(f"a workload factor of {k}×{n} entries is too large to check densely")
    M = np.asarray(leaf.dense(), dtype=np.float64)
    if k == 1 and bool(np.all(M == 1.0)):
        return AxisFactor("total", n)
    if k == n and np.count_nonzero(M) == n and bool(np.all(np.diagonal(M) == 1.0)):
        return AxisFactor("identity", n)
    return AxisFactor("matrix", n, M)
