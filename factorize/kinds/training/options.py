"""What a training plan is built from (``KIND.build``): the number of steps, the guarantee,
and the builder's other choices (``kinds.training.build``), each with the default stated here
once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from factorize.choices import TrainingStrategy

if TYPE_CHECKING:  # typed values only: options are pure data
    from factorize.privacy import Guarantee
    from factorize.privacy.participation import Participation


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """The inputs of a training plan.

    ``n``: training steps (the prefix-sum workload ``L_n``: the model after step t is the
    running sum of the noisy clipped gradients). ``guarantee``: zCDP or (ε, δ) (Gaussian
    noise; pure DP is refused), or its text (``"rho=0.5"``). ``participation``: how often one
    record takes part (``privacy.participation``: ``"epochs=4"``, ``"k=4,min_sep=64"``; None —
    once). ``strategy``: ``blt`` (buffered linear Toeplitz, Dvijotham et al. 2024; ``buffers``
    of them), ``banded`` (banded Toeplitz, McKenna 2024; ``bands`` of them) or ``bisr`` (banded
    inverse square root, Kalinin, McKenna, Upadhyay & Lampert, ICLR 2026: C⁻¹ of ``bands``
    bands from the truncated ``(1 − x)^{1/2}``, optimised; noise state ``(bands − 1)·d``).
    ``dense`` (the optimal dense multi-epoch strategy for the prefix sums under ``epochs=K``
    with a certified gap, Choquette-Choo et al. 2023, §4; ``training.multi_epoch``; objective
    ``total`` or ``max``, no momentum; ``streaming``: its lower-triangular factor with the same CᵀC, which
    the noise stream needs; ``time_limit`` seconds stop its dual iteration early).
    ``objective``: ``total`` (‖W C⁻¹‖_F²·Δ², the γ_F objective) or ``max`` (the worst step's
    squared error times Δ², γ₂'s). ``momentum``: β of heavy-ball momentum (0 ≤ β < 1): the
    workload is then the prefix sums of the momentum-β averages, ``L_n M_β`` (Denisov et al.
    2022, §5); None — plain prefix sums. ``max_iter``: the optimiser's iteration limit."""

    n: int
    guarantee: Guarantee | str
    participation: Participation | str | None = None
    strategy: TrainingStrategy = "blt"
    buffers: int = 4
    bands: int = 32
    objective: Literal["total", "max"] = "total"
    momentum: float | None = None
    max_iter: int = 1000
    streaming: bool = False
    time_limit: float | None = None
    allow_weak_guarantee: bool = False
