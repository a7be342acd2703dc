"""What one plan kind is: :class:`PlanKind`, the typed interface every mechanism's package
implements (its ``kind`` module's ``KIND``), and :class:`Measurement`, what its ``measure``
half hands to its ``release`` half.

A kind ``K`` with plan class ``P`` and build options ``O`` (a frozen dataclass) is a
``PlanKind[P, O]``: it reads and writes its files (``load`` / ``save``, through the container
and integrity rules of ``plan.files``), verifies a plan from first principles (``verify``, a
``plan.check_record.PlanCheck``), states the plan's guarantee, neighbouring relation, sampler
and summary, measures the data exactly (``measure``, before any budget is charged) and
releases from that measurement (``release``, after) — the halves the one pipeline
(``executor.pipeline.run``) calls — and builds a plan from its options (``build``). mypy
follows every call: the registry (``factorize.kinds``) hands out ``PlanKind[Any, Any]`` for a
plan read from a file, and each kind's own module its precise ``PlanKind[P, O]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:  # typed values only: the protocol imports nothing that computes
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.plan.files import PlanBytes
    from factorize.privacy import Guarantee
    from workloads import Workload


@dataclass(frozen=True)
class Measurement:
    """The exact, noiseless measurement of a plan on the data, taken before the charge:
    ``values`` (lattice integers, float moments or message sums), ``n_records`` read, and what
    a kind's release half needs besides (``extra``: the local model's message-file record)."""

    values: np.ndarray
    n_records: int
    extra: Mapping[str, Any] = field(default_factory=dict)


#: The plan class of a kind (invariant: read and written).
P = TypeVar("P")
#: The build options of a kind (only taken).
O_contra = TypeVar("O_contra", contravariant=True)


class KindPlan(Protocol):
    """What every plan class states: the name of its kind (``plan_kind`` in its manifest)."""

    plan_kind: ClassVar[str]


class PlanKind(Protocol[P, O_contra]):
    """One mechanism's contribution (module docstring)."""

    #: the kind's name: the manifest's ``plan_kind`` and the registry's key
    name: str
    #: a central-model release: charged to the ledger, δ < 1/n checked on the data
    central: bool

    def load(self, source: str | Path | PlanBytes) -> P:
        """The plan in a file, or in the bytes of one read once (``plan.files.PlanBytes``);
        ``plan.files.PlanFormatError`` for anything unreadable, corrupt or inconsistent."""
        ...

    def save(self, plan: P, path: str | Path) -> None:
        """Write the plan atomically, its manifest stating ``plan_kind``."""
        ...

    def verify(self, plan: P, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Workload | None = None) -> PlanCheck:
        """Everything the release depends on, re-derived from the arrays and the public
        parameters (``workload``: the rebuilt workload, when the caller has it)."""
        ...

    def guarantee(self, plan: P) -> Guarantee:
        """The guarantee the plan states (the verification establishes the one charged)."""
        ...

    def relation(self, plan: P) -> str:
        """``add_remove``, ``replace`` or ``local``."""
        ...

    def sampler(self, plan: P) -> str:
        """The noise sampler (``float`` is refused without ``allow_float_noise``)."""
        ...

    def summary(self, plan: P) -> list[str]:
        """``factorize inspect``'s lines."""
        ...

    def measure(self, plan: P, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        """The exact measurement of the data (nothing random, nothing charged yet)."""
        ...

    def release(self, plan: P, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        """The noisy release from the measurement (``rng``: the OS, or a test seed)."""
        ...

    def build(self, options: O_contra) -> P:
        """A verified plan from the kind's options (needs the planner: imported here only)."""
        ...
