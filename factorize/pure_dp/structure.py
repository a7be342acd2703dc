"""A workload as a union of Kronecker blocks ``W = [w_b ⊗_i W_{b,i}]_b`` with dense per-attribute
factors — what the Kronecker optimisers of this package consume.

Read from the workload's structure through ``factorize.structured.workload_blocks`` (never
an N-column matrix): a dense 1-D workload is one block with one factor, ``kron(…)`` one block,
``vstack(kron(…), …)`` several blocks over the same attributes. Also recognises workloads
that are marginal families in disguise (a Kronecker product of stacks of identities and
totals, e.g. ``kron(vstack(identity:n,total:n), …)``), for the marginal-weights family.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from factorize.planner.marginal_algebra import MarginalFamily, marginal_family
from factorize.structured.blocks import StructureError
from factorize.structured.workload_blocks import workload_blocks
from workloads import KronWorkload, VStackWorkload, Workload, parse_workload
from workloads.structured import kron_leaves

__all__ = ["KronBlock", "ProductWorkload", "product_structure", "marginal_structure_of"]

#: Largest number of Kronecker blocks a marginal family in disguise may expand to.
MAX_EXPANDED_BLOCKS = 4096


@dataclass(frozen=True)
class KronBlock:
    """``weight · ⊗_i factors[i]`` (dense factors, one per attribute)."""

    weight: float
    factors: tuple[np.ndarray, ...]

    @property
    def rows(self) -> int:
        return math.prod(F.shape[0] for F in self.factors)

    def grams(self) -> tuple[np.ndarray, ...]:
        return tuple(F.T @ F for F in self.factors)


@dataclass(frozen=True)
class ProductWorkload:
    """Attribute sizes and the Kronecker blocks of a workload; ``k`` = number of queries."""

    sizes: tuple[int, ...]
    blocks: tuple[KronBlock, ...]

    @property
    def k(self) -> int:
        return sum(b.rows for b in self.blocks)

    @property
    def N(self) -> int:
        return math.prod(self.sizes)


def _sizes(W: Workload) -> tuple[int, ...]:
    blocks = getattr(W, "blocks", None)
    first = W if blocks is None or getattr(W, "factors", None) is not None else blocks[0]
    while getattr(first, "factors", None) is None:
        inner = getattr(first, "blocks", None)
        if inner is None:
            break
        first = inner[0]
    return tuple(int(leaf.shape[1]) for leaf in kron_leaves(first) if leaf.shape != (1, 1))


def product_structure(W: Workload | str) -> ProductWorkload:
    """The workload's Kronecker blocks with dense factors (module docstring);
    ``StructureError`` when the blocks' factors do not line up one per attribute."""
    W = parse_workload(W) if isinstance(W, str) else W
    sizes = _sizes(W)
    if not sizes:
        raise StructureError("the workload has no attribute of size > 1")
    blocks = []
    for B in workload_blocks(W, sizes):
        blocks.append(KronBlock(B.weight, tuple(np.asarray(f.dense(), dtype=np.float64)
                                                for f in B.factors)))
    return ProductWorkload(sizes, tuple(blocks))


def marginal_structure_of(W: Workload | str) -> MarginalFamily | None:
    """The marginal family of W (``marginal_algebra.marginal_family``), also when W is a
    Kronecker product (or a stack of them) whose leaves are stacks of identities and totals:
    those are expanded into their ``Π (blocks per leaf)`` Kronecker blocks first (at most
    ``MAX_EXPANDED_BLOCKS``). None when W is no marginal family."""
    W = parse_workload(W) if isinstance(W, str) else W
    fam = marginal_family(W)
    if fam is not None:
        return fam
    top = list(W.blocks) if isinstance(W, VStackWorkload) else [W]
    expanded: list[Workload] = []
    for B in top:
        leaves = kron_leaves(B)
        choices = [list(leaf.blocks) if isinstance(leaf, VStackWorkload) else [leaf] for leaf in leaves]
        count = math.prod(len(c) for c in choices)
        if count + len(expanded) > MAX_EXPANDED_BLOCKS:
            return None
        if count == 1:
            expanded.append(B)
            continue
        for combo in itertools.product(*choices):
            expanded.append(KronWorkload(list(combo)))
    if len(expanded) == len(top):
        return None
    return marginal_family(VStackWorkload(expanded))
