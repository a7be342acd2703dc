"""Continual counting with a long-horizon strategy: the prefix sums of a stream of counts,
released as the records arrive, one ledger charge for the whole stream.

Mechanism (the factorization mechanism for continual observation: Dwork, Naor, Pitassi &
Rothblum, "Differential Privacy under Continual Observation", STOC 2010, for the setting;
Fichtenberger, Henzinger & Upadhyay, "Constant Matters", ICML 2023, §2, and Denisov et al.
2022 for the factorization ``L = (L C⁻¹)·C``). With ``x_t ∈ R^d`` the counts of step t (one
record changes the counts of each step it takes part in by a vector of L2 norm ≤ 1), after
step t the counter releases

    ŝ_t = Σ_{j≤t} x_j + σ·Σ_{j≤t} (C⁻¹z)_j = ((L C⁻¹)(C x + σ z))_t,

a post-processing of ``C x + σ z`` — the Gaussian mechanism on C with its certified
sensitivity Δ under the stated participation (``toeplitz.certified_sensitivity``), σ
calibrated to the guarantee. Every release up to step n is covered by the one charge made when
the counter opens (``stream.open_private_stream``), before any noise is drawn. The noise
``σ(C⁻¹z)_t`` comes from the stream's O(b·d) recurrence; the counter keeps two vectors of
length d more (the running sums).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .stream import PrivateRun, StreamRandom, open_private_stream
from .toeplitz import LongStrategy

__all__ = ["ContinualCounter", "ContinualRelease"]


@dataclass(frozen=True)
class ContinualRelease:
    """The estimate ``ŝ_t`` of the prefix sum after step ``t``, with its noise's label
    (``TEST MODE …`` in test mode)."""

    t: int
    value: np.ndarray
    label: str


class ContinualCounter:
    """Prefix sums of a stream of d-dimensional counts (module docstring); one charge for the
    stream when ``ledger`` is given."""

    def __init__(self, strategy: LongStrategy, *, guarantee: Any, participation: Participation | None = None,
                 d: int = 1, ledger: str | os.PathLike[str] | None = None, dataset: str | None = None,
                 rng: StreamRandom | None = None) -> None:
        self.run: PrivateRun = open_private_stream(strategy, d, guarantee=guarantee,
                                                   participation=participation, ledger=ledger,
                                                   dataset=dataset, rng=rng)
        self.d = d
        self._sum = np.zeros(d)

    @property
    def steps(self) -> int:
        return self.run.stream.noise.strategy.n

    def release(self, counts: Any) -> ContinualRelease:
        """Add step t's counts (length d) and release ``ŝ_t``; after n steps the stream is
        exhausted (the charge covers n steps) and further counts are refused."""
        x = np.asarray(counts, dtype=np.float64).reshape(-1)
        if x.shape != (self.d,) or not np.all(np.isfinite(x)):
            raise PrivacyError(f"counts must be {self.d} finite numbers")
        try:
            step = next(self.run.stream)
        except StopIteration:
            raise PrivacyError(f"the counter covers {self.steps} steps; its charge is spent") from None
        self._sum += x
        self._sum += step.noise
        return ContinualRelease(step.t, self._sum.copy(), step.label)
