"""The plan layer's errors, apart from every other plan module so that any of them (builders,
verifiers, file readers) can raise them without importing another."""

from __future__ import annotations

from factorize.errors import InputError


class PlanError(InputError):
    """A plan is malformed, inconsistent, or refused by verification."""


class PlanRefused(PlanError):
    """Verification failed: the plan must not be run."""
