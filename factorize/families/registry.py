"""Every strategy family the planner searches, in one place (ties go to the earlier one: the
families whose plans are certified optimal where they apply come first).
A new family is one module of this package (``fits`` and ``parts``) and one line here; a
structured one also names itself in ``choices`` and gives the verifier its ``structured/``
module and codec (ARCHITECTURE.md, "What a new plan kind or strategy family touches")."""

from __future__ import annotations

from .base import StrategyFamily
from .dense import Dense
from .kron import SharedKron
from .kron_groups import KronGroups
from .marginal_weights import MarginalWeights
from .residual import Residual
from .subset_algebra import SubsetAlgebra
from .symmetric import Symmetric
from .union import Union

FAMILIES: tuple[StrategyFamily, ...] = (
    Dense(),
    Residual(),
    SubsetAlgebra(),
    Symmetric(),
    Union(),
    MarginalWeights(),
    SharedKron(),
    KronGroups(),
)


def family(name: str) -> StrategyFamily:
    """The registered family ``name``."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"unknown strategy family {name!r}; known: {[f.name for f in FAMILIES]}")
