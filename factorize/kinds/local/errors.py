"""The local-model layer's error (:mod:`factorize.kinds.local`)."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["LocalError"]


class LocalError(InputError):
    """Bad input to the local-model code: a workload, witness, factorization or argument of
    the ε-LDP lower bound (``kinds.local.lower_bound``), a randomizer's dimension, inputs or
    strategy (``kinds.local.randomizer``), or the aggregator's sums (``kinds.local.protocol``). A
    ``ValueError`` too, exit code 2. A client's record is checked with
    :class:`factorize.engines.errors.DataError` (private data: no values in the message);
    a plan with :class:`factorize.plan.errors.PlanError`; a guarantee with
    :class:`factorize.privacy.guarantees.PrivacyError`."""
