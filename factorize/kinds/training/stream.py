"""A training plan's release: the noise stream of its strategy, opened inside the user's
training loop (``training.stream``: ``σ·(C⁻¹z)_t`` step by step, O(b·d) state), never a pass
over a data file — which is why ``factorize run`` refuses a training plan and points here.

:func:`open_stream` follows the release pipeline's order (``executor.pipeline``): the plan file
read once (its kind, the plan and the digest the ledger records all come from those bytes),
the plan verified from its parameters (``kinds.training.verify``: a refused plan opens
nothing), then — with a ledger — **one** charge of the guarantee the verification established,
named by the SHA-256 of the plan file's bytes, under the add/remove relation, committed before
any noise is drawn. A test-mode randomness (``StreamRandom.seeded``) is refused with a ledger.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from factorize.plan.errors import PlanRefused
from factorize.privacy.guarantees import PrivacyError

if TYPE_CHECKING:
    from factorize.training.stream import PrivateRun, StreamRandom


def open_stream(plan_path: str | os.PathLike[str], d: int, *,
                ledger: str | os.PathLike[str] | None = None, dataset: str | None = None,
                rng: StreamRandom | None = None, allow_weak_guarantee: bool = False) -> PrivateRun:
    """The charged noise stream of the training plan in ``plan_path`` for a model of dimension
    ``d`` (module docstring): a ``training.stream.PrivateRun`` whose ``stream`` yields the n
    steps' ``σ·(C⁻¹z)_t`` with the plan's σ, whose ``record_sha256`` is the plan file's digest
    and ``charge_id`` the ledger's charge (None without a ledger). ``rng``: production
    randomness (``StreamRandom.secure()``, the default) or test mode (no ledger)."""
    from factorize.kinds import kind_of_file
    from factorize.plan.files import PlanFormatError, read_plan_bytes
    from factorize.training.stream import PrivateRun, StreamRandom, noise_stream

    rng = rng if rng is not None else StreamRandom.secure()
    if ledger is not None and rng.is_test_mode:
        raise PrivacyError("a test-mode stream (seeded, not private) cannot be charged to a ledger")
    if (ledger is None) != (dataset is None):
        raise PrivacyError("a ledger charge needs both the ledger and the dataset's name")
    source = read_plan_bytes(plan_path)  # the one read of the plan file
    kind = kind_of_file(source)
    if kind.name != "training":
        raise PlanFormatError(f"{source}: a {kind.name} plan, not a training plan (run it with "
                              "factorize run)")
    plan = kind.load(source)
    check = kind.verify(plan, allow_weak_guarantee=allow_weak_guarantee)
    if not check.passed:
        raise PlanRefused("plan refused: " + "; ".join(check.failures))
    guarantee = check.established("guarantee")
    charge_id = None
    if ledger is not None and dataset is not None:
        from factorize.ledger import Ledger

        charge = Ledger.open(ledger).charge(dataset, guarantee.to_dict(), plan_sha256=source.sha256,
                                            relation=kind.relation(plan))
        charge_id = charge.id
    return PrivateRun(noise_stream(plan.strategy, d, rng, sigma=plan.sigma),
                      check.established("sensitivity"), plan.sigma, source.sha256, charge_id)
