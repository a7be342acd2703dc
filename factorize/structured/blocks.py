"""The data of a structured strategy and reconstruction (``factorize.structured``).

Factors are referenced by name into one shared table of arrays (a plan stores each distinct
factor once: the 4,526 blocks of all ≤3-way residuals over 30 attributes share 30 bases).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from factorize.choices import Norm
from factorize.errors import InputError

#: The norms a structured plan optimises: γ_F and γ₂ (not approximate γ₂).
STRUCTURED_NORMS: tuple[Norm, ...] = ("gamma_f", "gamma_2")


class StructureError(InputError):
    """A structured strategy or reconstruction is malformed (shapes, names, supports)."""


def structured_norm(norm: str) -> Norm:
    """``norm`` as one of :data:`STRUCTURED_NORMS`; :class:`StructureError` for any other."""
    if norm not in STRUCTURED_NORMS:
        raise StructureError(f"structured plans optimise gamma_f or gamma_2, not {norm!r}")
    return norm


@dataclass(frozen=True)
class KronBlock:
    """One strategy block ``s · ⊗_j F_j``: ``F_j = arrays[names[i]]`` for ``j = support[i]``
    (a ``rows × n_j`` matrix), ``F_j = 1ᵀ_{n_j}`` for every other attribute (summed out).

    Its measurement depends on the records only through the marginal table of ``support``:
    ``s · (⊗_{j∈support} F_j) · m_support``.

    A *mixed* block (``mix`` set, ``structured.mixing``) also names a dense matrix
    ``M = arrays[mix]`` applied jointly to the attributes ``mix_attrs ⊆ support``, whose
    factors are partitions (0/1, one 1 per column: class indicators):
    ``s · (⊗_{j∈support∖mix_attrs} F_j) ⊗ M (⊗_{j∈mix_attrs} F_j)``, rows ordered with the
    unmixed attributes first (support order), then M's rows.
    """

    scale: float
    support: tuple[int, ...]
    names: tuple[str, ...]
    mix: str | None = None
    mix_attrs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.support) != len(self.names):
            raise StructureError("a block needs one factor name per support attribute")
        if any(b <= a for a, b in zip(self.support, self.support[1:], strict=False)):
            raise StructureError(f"block support {self.support} is not strictly increasing")
        if not (isinstance(self.scale, float) and math.isfinite(self.scale) and self.scale != 0.0):
            raise StructureError(f"block scale {self.scale!r} must be a finite nonzero float")
        if (self.mix is None) != (not self.mix_attrs):
            raise StructureError("a mixed block names its mixing matrix and the attributes it mixes")
        if any(b <= a for a, b in zip(self.mix_attrs, self.mix_attrs[1:], strict=False)) \
                or not set(self.mix_attrs) <= set(self.support):
            raise StructureError(f"mixed attributes {self.mix_attrs} must be strictly increasing "
                                 f"and inside the support {self.support}")

    @property
    def plain(self) -> tuple[int, ...]:
        """The support attributes outside the mixed group (support order)."""
        return tuple(j for j in self.support if j not in self.mix_attrs)

    def factor_name(self, j: int) -> str:
        """The factor name of support attribute j."""
        return self.names[self.support.index(j)]


@dataclass(frozen=True)
class Term:
    """One reconstruction term ``c · (⊗_{j∈attrs} G_j) ỹ_{in_block}`` added to the answers of
    workload block ``out_block``: ``G_j = arrays[names[i]]`` for ``j = attrs[i]``, of shape
    ``(rows of the workload factor on j) × (rows of the strategy factor on j)`` — a column
    (``× 1``) where the strategy block sums attribute j out, a row (``1 ×``) where the
    workload does.

    A term reading a mixed block names ``mix``, a dense ``N = arrays[mix]`` of shape
    ``(Π_{j∈mix_attrs} rows F_j) × (rows M)`` applied first: ``c · (⊗_{plain} G_j) ⊗
    ((⊗_{mixed} G_j) N)`` (``structured.mixing``)."""

    out_block: int
    in_block: int
    scale: float
    attrs: tuple[int, ...]
    names: tuple[str, ...]
    mix: str | None = None

    def __post_init__(self) -> None:
        if len(self.attrs) != len(self.names):
            raise StructureError("a term needs one factor name per attribute")
        if any(b <= a for a, b in zip(self.attrs, self.attrs[1:], strict=False)):
            raise StructureError(f"term attributes {self.attrs} are not strictly increasing")
        if not (isinstance(self.scale, float) and math.isfinite(self.scale)):
            raise StructureError(f"term scale {self.scale!r} must be a finite float")


def check_arrays(arrays: Mapping[str, np.ndarray], names: Sequence[str], what: str) -> None:
    """Every name is a finite 2-D float64 array of the table."""
    for name in names:
        a = arrays.get(name)
        if a is None:
            raise StructureError(f"{what} names factor {name!r}, which the plan does not hold")
        if not (isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == np.float64):
            raise StructureError(f"factor {name!r} must be a 2-D float64 array")
