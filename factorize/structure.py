"""Structure of a workload that the planner exploits (MATH.md §2.3)."""

from __future__ import annotations


def kron_leaves(workload) -> list:
    """The Kronecker factors of ``workload``, nested products flattened, in order.

    A workload that is not a Kronecker product is its own single leaf.
    """
    factors = getattr(workload, "factors", None)
    if factors is None:
        return [workload]
    leaves: list = []
    for f in factors:
        leaves.extend(kron_leaves(f))
    return leaves
