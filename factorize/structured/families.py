"""The structured strategy families as the verifier and executor see them — one registry.

A structured plan names its family (``strategy.family``); everything the executor side needs
of it lives in one :class:`FamilyCodec`: how the plan file's strategy and reconstruction are
decoded, the certificate methods the family may state, how that certificate is re-verified
from the workload, and its description in words. None of it imports an optimiser: the
planner side of each family (its ``applies`` / ``optimise``) is ``factorize.families``, which
registers its structured families against these names. A new structured family is one
module with a ``build`` and one entry of :data:`CODECS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FamilyCodec:
    """What the verifier, executor and reports need of one structured family."""

    name: str
    #: one line for ``inspect`` (``strategy``)
    summary: str
    #: the strategy in words, for the plan report ("The strategy is …")
    words: str
    #: the certificate methods a plan of this family may state (``certificate.method``)
    certificate_methods: Callable[[], tuple[str, ...]]
    #: ``(sizes, strategy manifest, arrays) -> (StructuredStrategy, StructuredReconstruction)``
    decode: Callable[[Sequence[int], Mapping[str, Any], Mapping[str, np.ndarray]], tuple[Any, Any]]
    #: ``(plan, W) -> (upper, lower, gap)`` re-derived from the plan's certificate arrays
    verify_certificate: Callable[[Any, Any], tuple[float, float, float]]
    #: the answers are the workload applied to one least-squares estimate of the data
    #: (R = W·Ã⁺: a cell asked twice has one value, every table's total agrees); False where
    #: each block is reconstructed from its own measurements only
    one_estimate: bool


def _union_decode(family: str) -> Callable[..., tuple[Any, Any]]:
    def decode(sizes: Sequence[int], manifest: Mapping[str, Any],
               arrays: Mapping[str, np.ndarray]) -> tuple[Any, Any]:
        from . import union

        return union.decode(sizes, manifest, arrays, family)
    return decode


def _residual_decode(sizes: Sequence[int], manifest: Mapping[str, Any],
                     arrays: Mapping[str, np.ndarray]) -> tuple[Any, Any]:
    from . import residual

    return residual.decode(sizes, manifest, arrays)


def _residual_methods() -> tuple[str, ...]:
    from .residual import CERTIFICATE

    return (CERTIFICATE,)


def _residual_verify(plan: Any, W: Any) -> tuple[float, float, float]:
    from .residual import marginal_solution_bounds

    return marginal_solution_bounds(plan, W, [b.support for b in plan.strategy.blocks])


def _union_methods() -> tuple[str, ...]:
    from . import union

    return (union.CERTIFICATE, union.CERTIFICATE_GRAM)


def _union_verify(plan: Any, W: Any) -> tuple[float, float, float]:
    from .union import verify_union_certificate

    return verify_union_certificate(plan, W)


def _kron_verify(plan: Any, W: Any) -> tuple[float, float, float]:
    from .shared_kron import verify_certificate

    return verify_certificate(plan, W)


def _algebra_methods() -> tuple[str, ...]:
    from . import subset_algebra, union

    return (subset_algebra.CERTIFICATE_ALGEBRA, union.CERTIFICATE, union.CERTIFICATE_GRAM)


def _weights_methods() -> tuple[str, ...]:
    from . import marginal_weights, subset_algebra, union

    return (marginal_weights.CERTIFICATE, marginal_weights.CERTIFICATE_GRAM,
            marginal_weights.CERTIFICATE_MARGINAL, subset_algebra.CERTIFICATE_ALGEBRA,
            union.CERTIFICATE, union.CERTIFICATE_GRAM)


def _weights_verify(plan: Any, W: Any) -> tuple[float, float, float]:
    """The family's own certificates (marginal, closed form, per-factor witnesses
    ``cert.w*``), or the union family's bound for W that the search reused (``cert.f*``,
    re-verified as ``kron``'s)."""
    from . import union
    from .marginal_weights import verify_certificate

    if plan.certificate.get("method") in (union.CERTIFICATE, union.CERTIFICATE_GRAM):
        return _kron_verify(plan, W)
    return verify_certificate(plan, W)


def _symmetric_methods() -> tuple[str, ...]:
    from .symmetric import CERTIFICATE, CERTIFICATE_GAMMA_2

    return (CERTIFICATE, CERTIFICATE_GAMMA_2)


def _symmetric_verify(plan: Any, W: Any) -> tuple[float, float, float]:
    from .symmetric import verify_certificate

    return verify_certificate(plan, W)


#: ``inspect``'s line on how the answers are estimated (:attr:`FamilyCodec.one_estimate`).
ONE_ESTIMATE = ("one least-squares estimate of the data (R = W·Ã⁺): a cell asked twice has one "
                "value and every table's total agrees")
SEPARATE_ESTIMATES = ("separate per block: each block is reconstructed from its own measurements, "
                      "so a cell in two tables may get two values and table totals may differ "
                      "(one estimate across blocks is not implemented for this family)")




def estimate_words(family: str) -> str:
    """How the answers of a plan of ``family`` are estimated (:data:`ONE_ESTIMATE` or
    :data:`SEPARATE_ESTIMATES`): ``inspect``'s line, the answers' metadata, the reports."""
    return ONE_ESTIMATE if codec(family).one_estimate else SEPARATE_ESTIMATES


CODECS: dict[str, FamilyCodec] = {c.name: c for c in (
    FamilyCodec("residual", "residual bases per attribute subset (orthonormal, Helmert)",
                "residual bases per attribute subset", _residual_methods, _residual_decode,
                _residual_verify, one_estimate=True),
    FamilyCodec("union", "union of Kronecker products",
                "a union of Kronecker products, one per workload block", _union_methods,
                _union_decode("union"), _union_verify, one_estimate=False),
    FamilyCodec("marginal_weights", "weighted marginals (least-squares reconstruction)",
                "weighted marginal tables with a least-squares reconstruction", _weights_methods,
                _union_decode("marginal_weights"), _weights_verify, one_estimate=True),
    FamilyCodec("kron", "one shared Kronecker product",
                "one Kronecker product of per-attribute factors shared by every workload block",
                _union_methods, _union_decode("kron"), _kron_verify, one_estimate=True),
    FamilyCodec("kron_groups", "one shared Kronecker product per group of blocks (OPT_+)",
                "one Kronecker product of per-attribute factors per group of workload blocks, "
                "the budget split across the groups", _union_methods,
                _union_decode("kron_groups"), _kron_verify, one_estimate=False),
    FamilyCodec("subset_algebra",
                "the optimum of the algebra of attribute subsets (Helmert residual bases)",
                "the closed-form optimum of the algebra of attribute subsets (residual bases, "
                "any union of Kronecker products)", _algebra_methods,
                _union_decode("subset_algebra"), _weights_verify, one_estimate=True),
    FamilyCodec("symmetric",
                "the symmetry-reduced optimum, γ_F or γ₂ (per sector: class contrasts and a dense mixing)",
                "the γ_F- or γ₂-optimal strategy of the workload's symmetry sectors (within-class "
                "contrasts, and a dense mixing of the class totals of the coupled attributes)",
                _symmetric_methods, _union_decode("symmetric"), _symmetric_verify, one_estimate=True),
)}


#: The registered structured families, in registry order (``choices.StructuredFamily``).
FAMILY_NAMES: tuple[str, ...] = tuple(CODECS)


def codec(name: Any) -> FamilyCodec:
    """The registered family ``name``; ``KeyError`` for any other."""
    if not isinstance(name, str) or name not in CODECS:
        raise KeyError(f"unknown structured strategy family {name!r}; known: {sorted(CODECS)}")
    return CODECS[name]
