"""A training plan's release: the noise stream of its strategy, opened inside the user's
training loop (``training.stream``: ``σ·(C⁻¹z)_t`` step by step, O(b·d) state), never a pass
over a data file — which is why ``factorize run`` refuses a training plan and points here.

:func:`open_stream` follows the release pipeline's order (``executor.pipeline``): the plan file
read once (its kind, the plan and the digest the ledger records all come from those bytes),
the plan verified from its parameters (``kinds.training.verify``: a refused plan opens
nothing), then — with a ledger — **one** charge of the guarantee the verification established,
named by the SHA-256 of the plan file's bytes, under the add/remove relation, committed before
any noise is drawn. A test-mode randomness (``StreamRandom.seeded``) is refused with a ledger.

A dense plan (``kinds.training.dense``) streams only when its C is lower-triangular
(``--streaming``): :class:`DenseNoiseStream` solves ``C x = z`` by forward substitution, keeping
every earlier ``x_s`` — O(n·d) floats of state (n steps, model dimension d), against the O(b·d)
of a Toeplitz recurrence. A dense C that is not lower-triangular is refused before anything is
verified or charged.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from factorize.numerics import integer, positive_number
from factorize.plan.errors import PlanRefused
from factorize.privacy.guarantees import PrivacyError
from factorize.training.stream import NoiseStep, NoiseStream, StreamRandom

from .dense import DenseStrategy

if TYPE_CHECKING:
    from factorize.training.stream import PrivateRun


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
    from factorize.training.stream import PrivateRun, noise_stream

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
    if isinstance(plan.strategy, DenseStrategy) and not plan.strategy.lower_triangular:
        raise PlanRefused("this dense training plan's strategy is not lower-triangular: step t's "
                          "noise (C⁻¹z)_t would depend on later steps' z, so it cannot be streamed; "
                          "plan it with --strategy dense --streaming (the lower-triangular factor "
                          "with the same CᵀC: same sensitivity and error)")
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
    stream = (DenseNoiseStream(plan.strategy, d, rng, plan.sigma)
              if isinstance(plan.strategy, DenseStrategy)
              else noise_stream(plan.strategy, d, rng, sigma=plan.sigma))
    return PrivateRun(stream,
                      check.established("sensitivity"), plan.sigma, source.sha256, charge_id)


class DenseNoiseStream(NoiseStream):
    """The n steps' ``σ·(C⁻¹z)_t`` of a lower-triangular dense C by forward substitution,
    ``x_t = (z_t − Σ_{s<t} C_ts x_s) / C_tt``, z_t drawn as by ``training.stream.NoiseStream``
    (same randomness, step by step); the state is the n × d array of the x_s (module
    docstring)."""

    def __init__(self, strategy: DenseStrategy, d: int, rng: StreamRandom, sigma: float) -> None:
        if not isinstance(rng, StreamRandom):
            raise PrivacyError("rng must be a StreamRandom (StreamRandom.secure() or .seeded(seed))")
        if not strategy.lower_triangular:
            raise PrivacyError("a dense strategy streams only when it is lower-triangular")
        if np.any(np.diagonal(strategy.matrix) == 0):
            raise PrivacyError("a lower-triangular strategy with a zero diagonal entry is singular")
        self.sigma = positive_number("sigma", sigma, PrivacyError)
        self.rng = rng
        self.matrix = strategy.matrix
        self.d = integer("d", d, 1, PrivacyError)
        self.t = 0
        self.past = np.zeros((strategy.n, self.d))

    @property
    def state_nbytes(self) -> int:
        return int(self.past.nbytes)

    def __next__(self) -> NoiseStep:
        t = self.t
        if t >= self.matrix.shape[0]:
            raise StopIteration
        z = np.empty(self.d)
        self.rng.normals(t, z)
        if t:
            z -= self.matrix[t, :t] @ self.past[:t]
        x = z / self.matrix[t, t]
        self.past[t] = x
        self.t += 1
        if self.sigma != 1.0:
            x *= self.sigma
        return NoiseStep(t, x, self.rng.label, self.rng.is_test_mode)

    def next_into(self, out: np.ndarray) -> NoiseStep:
        """The next step copied into ``out`` (checked as by ``NoiseStream.next_into``; a dense
        stream keeps every x_s anyway, so a reused buffer saves only the copy's allocation)."""
        from factorize.training.stream import check_vector

        check_vector(out, self.d, "next_into")
        if self.t >= self.matrix.shape[0]:
            raise PrivacyError(f"the strategy has {self.matrix.shape[0]} steps; step {self.t} is beyond it")
        step = next(self)
        np.copyto(out, step.noise)
        return NoiseStep(step.t, out, step.label, step.test_mode)
