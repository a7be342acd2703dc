"""One shared Kronecker strategy for a whole union of Kronecker products (HDMM's OPT_⊗).

For a workload ``W = [w_o ⊗_j W_{o,j}]_o`` (``structured.workload_blocks``) the strategy is
ONE block ``A = ⊗_{j∈S} A_j`` (scale 1), ``A_j`` the per-attribute p-Identity factors of
``pure_dp.kron.optimize_kron`` (every column of L1 norm 1, full column rank); ``S`` leaves out
the attributes every workload block sums out (``A_j = 1ᵀ`` there: measured summed out). Block o
is reconstructed from that one measurement by the single Kronecker term

    ``w_o ⊗_{j∈S} R_{o,j}``,   ``R_{o,j} = W_{o,j} Ã_j⁺``,

Ã_j the measured (quantized) factor, so ``R_{o,j} Ã_j = W_{o,j}`` up to the pseudo-inverse's
rounding (``Ã_j⁺Ã_j = I``), which ``structured.identity`` bounds in the algebra like any union
plan's: one term per output block, one choice per attribute. The total variance is
``2b² Σ_o w_o² Π_j tr(W_{o,j} (Ã_jᵀÃ_j)⁻¹ W_{o,j}ᵀ)`` — the objective ``optimize_kron``
minimises, with ``b = Δ₁/ε`` and ``Δ₁ = Π_j ‖Ã_j‖₁ ≈ 1`` certified from the structure.

Encoding: the union codec (``structured.union.encode``) under family ``"kron"``: arrays
``A.<j>`` (one per measured attribute), ``R.<i>`` (one per distinct (attribute, workload
factor)), ``union.block_scale`` / ``union.term_scale``.

Certificate: the lower bound on the workload's factorization norm depends on W alone, so it is
the union family's (``structured.union``: each distinct non-identity workload factor's dual
witness ``cert.f<i>.*``, multiplied within a block and combined across blocks, and the
uniform-weight trace bound); ``<i>`` numbers the distinct non-total workload factors in
order of first use over the blocks, which :func:`certificate_lower` re-derives from W.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.records import FamilyCertificate

FAMILY = "kron"
#: Largest attribute a shared Kronecker factor is optimised on (dense n×n subproblems).
MAX_ATTRIBUTE = 1024
#: Most measurements of the shared strategy: it measures every cell of the table over the
#: attributes some block does not sum out (``Π_j rows(A_j) ≥ Π_j n_j``), and planning (the
#: n bound) and release handle m-vectors — the bound of the marginal weights' tables.
MAX_MEASUREMENTS = 1 << 24


def product_workload(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock]):
    """The blocks as ``pure_dp.structure.ProductWorkload`` (dense per-attribute factors, the
    domain's attributes in order); :class:`StructureError` when an attribute that some block
    does not sum out exceeds :data:`MAX_ATTRIBUTE`, or the table over those attributes
    :data:`MAX_MEASUREMENTS` cells (before any search: the strategy would measure more)."""
    from factorize.pure_dp.structure import KronBlock as DenseBlock
    from factorize.pure_dp.structure import ProductWorkload

    sizes = tuple(int(n) for n in sizes)
    measured = [j for j in range(len(sizes)) if any(wb.factor(j).kind != "total" for wb in wblocks)]
    for j in measured:
        if sizes[j] > MAX_ATTRIBUTE:
            raise StructureError(f"a shared Kronecker factor is optimised on attributes of at most "
                                 f"{MAX_ATTRIBUTE} values; attribute {j} has {sizes[j]}")
    _check_measurements(math.prod(sizes[j] for j in measured))
    return ProductWorkload(sizes, tuple(DenseBlock(wb.weight, tuple(f.dense() for f in wb.factors))
                                        for wb in wblocks))


def _check_measurements(m: int) -> None:
    if m > MAX_MEASUREMENTS:
        raise StructureError(f"a shared Kronecker strategy would measure at least {m:,} values "
                             f"(limit {MAX_MEASUREMENTS:,}): every cell of the table over the "
                             "attributes the workload does not sum out")


def _summed_out(F: np.ndarray) -> bool:
    return F.shape[0] == 1 and bool(np.all(F == 1.0))


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], factors: Sequence[np.ndarray],
          cert: FamilyCertificate, cert_arrays: dict[str, np.ndarray]):
    """The strategy ``⊗_j factors[j]``, its reconstruction and encoding (module docstring),
    with the given certificate (the union family's, built from the same workload)."""
    from factorize.privacy.lattice import quantize

    sizes = tuple(int(n) for n in sizes)
    if len(factors) != len(sizes):
        raise StructureError(f"{len(factors)} factors for {len(sizes)} attributes")
    support = tuple(j for j, F in enumerate(factors)
                    if not (_summed_out(F) and all(wb.factor(j).kind == "total" for wb in wblocks)))
    arrays: dict[str, np.ndarray] = {}
    pinvs: dict[int, np.ndarray] = {}
    for j in support:
        A = quantize(np.asarray(factors[j], dtype=np.float64)).measured
        if A.shape[1] != sizes[j]:
            raise StructureError(f"factor {j} has {A.shape[1]} columns, attribute {j} has {sizes[j]}")
        arrays[f"A.{j}"] = A
    _check_measurements(math.prod(arrays[f"A.{j}"].shape[0] for j in support))
    for j in support:
        pinvs[j] = np.linalg.pinv(arrays[f"A.{j}"])
    block = KronBlock(1.0, support, tuple(f"A.{j}" for j in support))
    r_names: dict[tuple[int, str], str] = {}
    terms = []
    for o, wb in enumerate(wblocks):
        names = []
        for j in support:
            f = wb.factor(j)
            key = (j, f.key)
            if key not in r_names:
                r_names[key] = name = f"R.{len(r_names)}"
                arrays[name] = np.ascontiguousarray(f.dense() @ pinvs[j])
            names.append(r_names[key])
        terms.append(Term(o, 0, float(wb.weight), support, tuple(names)))
    strategy = StructuredStrategy(sizes, [block], {f"A.{j}": arrays[f"A.{j}"] for j in support}, FAMILY)
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, arrays, strategy)
    from .union import encode

    return strategy, recon, encode(strategy, recon, FAMILY), dict(cert), dict(cert_arrays)


def certificate_lower(plan: Any, W: Any) -> float:
    """The union family's lower bound for W (module docstring), each workload factor's witness
    re-verified; the witnesses are numbered from W's blocks, not from the strategy."""
    from . import union
    from .workload_blocks import workload_blocks

    wblocks = workload_blocks(W, plan.domain.sizes)
    index: dict[str, int] = {}
    for wb in wblocks:
        for f in wb.factors:
            if f.kind != "total" and f.key not in index:
                index[f.key] = len(index)
    per_factor: dict[str, float] = {}
    lower_blocks = []
    for wb in wblocks:
        L = abs(wb.weight)
        for f in wb.factors:
            if f.kind != "matrix":
                continue
            if f.key not in per_factor:
                per_factor[f.key] = union.witness_lower(plan, f"cert.f{index[f.key]}", f.explicit)
            L *= per_factor[f.key]
        lower_blocks.append((wb.rows, L))
    return union.with_uniform_bound(plan, union.combine_block_bounds(plan.norm, lower_blocks), wblocks,
                                    union.CERTIFICATE_GRAM)


def verify_certificate(plan: Any, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap): the achieved value (recomputed by the caller's claims check) and the
    re-verified lower bound."""
    from factorize.numerics import relative_gap

    lower = certificate_lower(plan, W)
    upper = float(plan.certificate["achieved"])
    if not math.isfinite(upper):
        raise StructureError("the certificate's achieved value is not finite")
    return upper, lower, relative_gap(upper, lower)
