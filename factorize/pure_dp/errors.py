"""The pure-DP planner's error, apart from its other modules so that each can raise it
without importing another."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["PureDPError"]


class PureDPError(InputError):
    """A pure-DP (p-Identity, Kronecker, marginal-weight) optimisation or evaluation that
    cannot run as asked: a domain above the dense cell limit, a strategy matrix of the wrong
    shape, candidate subsets that repeat or miss a workload marginal, a strategy that does
    not support the workload.

    Deliberately not a :class:`factorize.structured.blocks.StructureError`: ``plan_pure_dp``
    and ``pure_dp.candidates`` read a StructureError as "this family does not apply" and
    drop the candidate, which must not happen to these."""
