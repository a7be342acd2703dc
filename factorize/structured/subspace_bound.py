"""A lower bound on γ_F and γ₂ of a union of Kronecker products from a trace-norm witness split
over subspaces that every workload factor preserves (docs/math.md §5.4b).

For ``W = [w_o ⊗_j F_{o,j}]_o`` (``structured.workload_blocks``), column weights
``q = ⊗_j s_j²`` and row weights ``p`` (γ₂: ``√p = ⊕_o σ_o ⊗_j r_{o,j}``; γ_F: ``p = 1``), the
duals of docs/math.md §4.1–4.2 give ``γ(W) ≥ ‖M‖_tr / √(Σp · Σq)`` with
``M = D_p^{1/2} W D_q^{1/2} = [c_o ⊗_j X_{o,j}]_o``, ``X_{o,j} = diag(r_{o,j}) F_{o,j} diag(s_j)``,
``c_o = w_o σ_o``. The per-block bounds of ``structured.union`` treat the blocks as if they
shared every direction, which loses a factor up to √(blocks) when they meet in few (ten
2-way prefix pairs over 64⁵ cells share one of 64⁵ dimensions; that bound is √10 below).

Witness. ``‖M‖_tr ≥ ⟨M, Q⟩ / ‖Q‖`` for every Q ≠ 0 (trace norm and spectral norm are dual).
Per attribute take a basis ``B_j`` (columns grouped into *atoms* a, ``Π_a = B_{j,a} B_{j,a}ᵀ``),
per block factor a polar factor ``Z_{o,j}`` of ``X_{o,j}``, and weights ``y_{o,S} ≥ 0`` per
block and *component* ``S = (a_1, …, a_d)``:
``Q = [sign(w_o) (⊗_j Z_{o,j}) Σ_S y_{o,S} ⊗_j Π_{S_j}]_o``. Then

* ``⟨M, Q⟩ = Σ_o |c_o| Σ_S y_{o,S} Π_j t_{o,j}(S_j)`` with ``t_{o,j}(a) = tr(X_{o,j}ᵀ Z_{o,j} Π_a)``;
* ``Q = K·(⊗_j B_j)ᵀ``, ``K = [(⊗_j Z_{o,j} B_j) Y_o]_o`` (``Y_o`` diagonal: ``y_{o,S}`` on
  component S), so ``‖Q‖² ≤ Π_j ‖B_j‖² · ‖Σ_o Y_o (⊗_j C_{o,j}) Y_o‖`` with
  ``C_{o,j} = B_jᵀ Z_{o,j}ᵀ Z_{o,j} B_j = D_{o,j} + O_{o,j}`` (atom-block-diagonal part and the
  rest). The ``D`` part is block diagonal over components, so its term is at most
  ``max_S Σ_o y_{o,S}² Π_j ν_{o,j}``; the rest at most
  ``Σ_o max_S y_{o,S}² (Π_j(ν_{o,j} + ω_{o,j}) − Π_j ν_{o,j})`` (telescoping), with
  ``ν ≥ ‖Z‖²‖B‖² ≥ ‖C‖ ≥ ‖D‖`` and ``ω ≥ ‖O‖``.

With ``y_{o,S} = τ_{o,S} / ‖τ_{·,S}‖₂``, ``τ_{o,S} = |c_o| Π_j t_{o,j}(S_j)`` (and 0 wherever a
``t`` is not certified positive) ``Σ_o y_{o,S}² ≤ 1``, so

    ‖M‖_tr ≥ Σ_S ‖τ_{·,S}‖₂ / √(Π_j‖B_j‖² · (max_o Π_j ν_{o,j} + Σ_o (Π_j(ν_{o,j}+ω_{o,j}) − Π_j ν_{o,j}))).

Every term is valid whatever ``B``, the atoms and ``Z`` are (they are data, stored in the
plan); they decide only how tight the bound is. It is tight when the atoms are invariant
subspaces of the projectors onto every factor's row space (then ``O = 0``, ``ν = 1``) — e.g. the
span of ``s`` and its complement where an attribute is summed out in some blocks and kept
(prefix, range, identity) in others: blocks then meet only on the components they share. One
atom per attribute gives the per-block combination of ``structured.union`` at a shared q.

Rounding: ``t`` by a certified lower bound (products and sums of the computed matrices with
Higham's γ allowances), ``ν`` and ``‖B‖²`` by a symmetric eigenvalue problem plus the
spectral allowance of ``numerics``, ``ω`` by a Frobenius bound; the combination is rounded down.
Cost: per attribute and distinct factor one SVD and a few n×n products (O(n³)); the components
where some block is certified non-zero, at most :data:`MAX_COMPONENTS` entries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .blocks import StructureError
from .workload_blocks import AxisFactor, WorkloadBlock

METHOD = ("trace-norm witness split over subspaces every workload factor preserves "
          "(column weights ⊗ s_j², per-attribute bases and atoms; docs/math.md §5.4b)")
#: Largest attribute (values) the bound handles: n×n bases and O(n³) work per factor.
MAX_ATTRIBUTE = 1024
#: Most (block, component) entries the combination accumulates.
MAX_COMPONENTS = 1 << 22


class TooManyComponents(StructureError):
    """The split has more (block, component) entries than :data:`MAX_COMPONENTS`."""


@dataclass(frozen=True)
class AxisSplit:
    """One attribute's column weights ``s`` (the square roots), basis columns and their atoms
    (integers 0..A−1, every one used)."""

    s: np.ndarray
    basis: np.ndarray
    atoms: np.ndarray

    @property
    def count(self) -> int:
        return int(self.atoms.max()) + 1

    def check(self, n: int, j: int) -> None:
        s, B, a = self.s, self.basis, self.atoms
        if s.shape != (n,) or not np.all(np.isfinite(s)) or np.any(s < 0) or not np.any(s > 0):
            raise StructureError(f"attribute {j}: the column weights must be {n} finite non-negative "
                                 "numbers, not all zero")
        if B.shape != (n, n) or not np.all(np.isfinite(B)):
            raise StructureError(f"attribute {j}: the basis must be a finite {n}×{n} matrix")
        if a.shape != (n,) or a.min() < 0 or set(np.unique(a).tolist()) != set(range(int(a.max()) + 1)):
            raise StructureError(f"attribute {j}: atoms must number the {n} basis columns 0..A−1, each used")


@dataclass(frozen=True)
class FactorTerms:
    """One factor on one attribute: certified lower bounds ``t`` per atom, ``ν ≥ ‖Z‖²‖B‖²``,
    ``ω ≥ ‖O‖`` and the row mass ``Σ r²`` (rounded up)."""

    t: np.ndarray
    nu: float
    omega: float
    row_mass: float


def frobenius_bound(A: np.ndarray) -> float:
    """A float ≥ ``‖A‖_F`` for any finite A, tiny entries included: ``m·√(Σ (a/m)²)`` with
    m = max|a| (the scaled squares lose at most 2⁻¹⁰⁷⁴ each to underflow; allowed for)."""
    from factorize.numerics import gamma, round_up

    a = np.abs(np.asarray(A, dtype=np.float64))
    if a.size == 0:
        return 0.0
    m = float(a.max())
    if m == 0.0:
        return 0.0
    y = a / m
    ssq = float(np.sum(y * y)) * (1.0 + gamma(a.size + 4)) + a.size * 2.0 ** -1000
    return round_up(m * round_up(math.sqrt(ssq), 2), 2)


def spectral_square_upper(A: np.ndarray) -> float:
    """A float ≥ ``‖A‖₂²`` of the exact matrix A: the largest eigenvalue of the smaller Gram
    matrix, plus the eigensolver's allowance and the Gram product's rounding
    (``|fl(AAᵀ) − AAᵀ| ≤ γ_m |A||A|ᵀ``, m the inner dimension)."""
    from factorize.numerics import gamma, round_up, spectral_allowance

    A = np.asarray(A, dtype=np.float64)
    if A.size == 0 or not np.any(A):
        return 0.0
    M = A @ A.T if A.shape[0] <= A.shape[1] else A.T @ A
    absA = np.abs(A)
    Mabs = absA @ absA.T if A.shape[0] <= A.shape[1] else absA.T @ absA
    g = gamma(max(A.shape) + 2)
    err = round_up(g * round_up(frobenius_bound(Mabs) / (1.0 - g), 2), 1)
    ev = np.linalg.eigvalsh(0.5 * (M + M.T))
    top = float(max(abs(ev[0]), abs(ev[-1])))
    return round_up(float(ev[-1]) + spectral_allowance(M.shape, top + err) + err, 3)


def polar_factor(X: np.ndarray) -> np.ndarray:
    """``U_ρ V_ρᵀ`` of X's SVD over its numerically non-zero singular values (any matrix is a
    valid witness; this one makes ``⟨X, Z⟩ = ‖X‖_tr``; entries below 2⁻¹⁰⁰ are set to 0, which
    keeps the products of the bound far from underflow)."""
    if X.size == 0 or not np.any(X):
        return np.zeros_like(X)
    U, sv, Vt = np.linalg.svd(X, full_matrices=False)
    rho = int(np.sum(sv > sv[0] * 8.0 * max(X.shape) * 2.0 ** -53))
    out: np.ndarray = U[:, :rho] @ Vt[:rho]
    out[np.abs(out) < 2.0 ** -100] = 0.0
    return out


def factor_terms(F: np.ndarray, r: np.ndarray | None, split: AxisSplit, basis_sq: float) -> FactorTerms:
    """:class:`FactorTerms` of ``X = diag(r) F diag(s)`` (``r = None``: unweighted rows) on
    ``split`` (module docstring), ``basis_sq ≥ ‖B‖²``."""
    from factorize.numerics import gamma, round_up, round_up_array

    F = np.asarray(F, dtype=np.float64)
    rows, n = F.shape
    X = F * split.s[None, :] if r is None else (r[:, None] * F) * split.s[None, :]
    row_mass = float(rows) if r is None else round_up(math.fsum((r * r).tolist()), rows + 2)
    A = split.count
    Z = polar_factor(X)
    if not np.any(Z):
        return FactorTerms(np.zeros(A), 0.0, 0.0, row_mass)
    B = split.basis
    H, G = X @ B, Z @ B
    c = np.einsum("ie,ie->e", H, G)
    absB = np.abs(B)
    E1, E2 = np.abs(X) @ absB, np.abs(Z) @ absB
    # |t_exact − t̂| per column: X is within γ_3 of the exact diag(r) F diag(s), the products
    # XB, ZB within γ_n, the inner sum within γ_rows: a generous γ covers all of them
    g = gamma(3 * n + rows + 12)
    err = round_up_array(np.einsum("ie,ie->e", E1, E2) * (2.0 * g), 4)
    signed = np.bincount(split.atoms, weights=c - err, minlength=A)
    slack = np.bincount(split.atoms, weights=np.abs(c) + err, minlength=A) * gamma(n + 2)
    t = signed - round_up_array(slack, 2)
    nu = round_up(spectral_square_upper(Z) * basis_sq, 1)
    omega = 0.0
    if A > 1:
        C = G.T @ G
        off = split.atoms[:, None] != split.atoms[None, :]
        # |C_exact − Ĉ| ≤ (2γ_n + γ_n² + γ_rows)(|Z||B|)ᵀ(|Z||B|): a generous 4γ_{n+rows+4}
        Cabs = E2.T @ E2
        ge = gamma(n + rows + 4)
        omega = round_up(frobenius_bound(np.where(off, C, 0.0))
                         + round_up(4.0 * ge * round_up(frobenius_bound(Cabs) / (1.0 - ge), 2), 1), 1)
    return FactorTerms(t, nu, omega, row_mass)


def distinct_factors(wblocks: Sequence[WorkloadBlock], j: int) -> list[AxisFactor]:
    """The distinct factors on attribute j, in order of first appearance (the order of the γ₂
    row weights ``cert.sub.r.<j>``)."""
    seen: dict[str, AxisFactor] = {}
    for wb in wblocks:
        f = wb.factor(j)
        seen.setdefault(f.key, f)
    return list(seen.values())


def row_weight_slices(wblocks: Sequence[WorkloadBlock], j: int) -> dict[str, slice]:
    """Where each distinct factor's row weights lie in ``cert.sub.r.<j>``."""
    out: dict[str, slice] = {}
    at = 0
    for f in distinct_factors(wblocks, j):
        out[f.key] = slice(at, at + f.rows)
        at += f.rows
    return out


@dataclass(frozen=True)
class Components:
    """The (block, component) entries of a split: each block's flat component indices and
    ``τ_{o,S}`` there (module docstring)."""

    index: list[np.ndarray]
    tau: list[np.ndarray]


def block_components(wblocks: Sequence[WorkloadBlock], splits: Sequence[AxisSplit],
                     terms: Sequence[Sequence[FactorTerms]], coef: Sequence[float],
                     max_entries: int = MAX_COMPONENTS) -> Components:
    """τ per block over the components where every factor's ``t`` is positive (``coef``:
    ``|c_o|`` lowered; ``terms[o][j]``). :class:`TooManyComponents` past ``max_entries``."""
    counts = [sp.count for sp in splits]
    strides = np.ones(len(splits), dtype=np.int64)
    for j in range(len(splits) - 2, -1, -1):
        strides[j] = strides[j + 1] * counts[j + 1]
    total = 0
    index, tau = [], []
    for o in range(len(wblocks)):
        nz = [np.flatnonzero(terms[o][j].t > 0) for j in range(len(splits))]
        size = math.prod(len(z) for z in nz)
        total += size
        if total > max_entries:
            raise TooManyComponents(f"the split has more than {max_entries} (block, component) entries")
        idx = np.zeros(1, dtype=np.int64)
        val = np.full(1, float(coef[o]))
        for j, z in enumerate(nz):
            idx = (idx[:, None] + z[None, :].astype(np.int64) * strides[j]).reshape(-1)
            val = (val[:, None] * terms[o][j].t[z][None, :]).reshape(-1)
        index.append(idx)
        tau.append(val)
    return Components(index, tau)


def component_sums(comp: Components, weights: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(Σ_o weight_o τ_{o,S}², block of each entry's component)``: the per-component sums of
    squares (weights: the γ₂ search's block masses; None: 1) and, for each entry, its
    component's position in the first array."""
    idx = np.concatenate(comp.index) if comp.index else np.zeros(0, dtype=np.int64)
    sq = np.concatenate([t * t * (1.0 if weights is None else float(weights[o]))
                         for o, t in enumerate(comp.tau)]) if comp.tau else np.zeros(0)
    if idx.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(idx, return_inverse=True)
    sums = np.bincount(inverse, weights=sq, minlength=uniq.size)
    return sums, inverse


def certified_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int], splits: Sequence[AxisSplit],
                    row_weights: Sequence[np.ndarray] | None = None,
                    block_scale: Sequence[float] | None = None) -> float:
    """A float ≤ γ_F(W) (``row_weights`` None) or ≤ γ₂(W) (``row_weights[j]``: the distinct
    factors' row weights on attribute j, ``cert.sub.r.<j>``; ``block_scale``: σ_o), from the
    witness of the module docstring."""
    from factorize.numerics import gamma, round_down, round_up

    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    if len(splits) != d:
        raise StructureError(f"the bound needs one split per attribute ({d}), got {len(splits)}")
    if any(n > MAX_ATTRIBUTE for n in sizes):
        raise StructureError(f"the subspace bound handles attributes of at most {MAX_ATTRIBUTE} values")
    for j, (sp, n) in enumerate(zip(splits, sizes, strict=True)):
        sp.check(n, j)
    gamma_2 = row_weights is not None
    if row_weights is not None and (block_scale is None or len(block_scale) != len(wblocks)
                                    or len(row_weights) != d):
        raise StructureError("a γ₂ bound needs row weights per attribute and one scale per block")
    basis_sq = [spectral_square_upper(sp.basis) for sp in splits]
    memo: dict[tuple[int, str], FactorTerms] = {}
    terms: list[list[FactorTerms]] = []
    for wb in wblocks:
        row = []
        for j in range(d):
            f = wb.factor(j)
            if (j, f.key) not in memo:
                r = None
                if gamma_2:
                    assert row_weights is not None
                    sl = row_weight_slices(wblocks, j)[f.key]
                    rj = np.asarray(row_weights[j], dtype=np.float64).reshape(-1)
                    if rj.size != sum(x.rows for x in distinct_factors(wblocks, j)):
                        raise StructureError(f"cert.sub.r.{j} must hold the row weights of attribute "
                                             f"{j}'s distinct factors")
                    r = rj[sl]
                    if not np.all(np.isfinite(r)) or np.any(r < 0):
                        raise StructureError(f"cert.sub.r.{j}: row weights must be finite and non-negative")
                memo[(j, f.key)] = factor_terms(f.dense(), r, splits[j], basis_sq[j])
            row.append(memo[(j, f.key)])
        terms.append(row)
    if gamma_2:
        assert block_scale is not None
        sig = [float(x) for x in block_scale]
        if not all(math.isfinite(x) and x >= 0 for x in sig):
            raise StructureError("cert.sub.sigma: block scales must be finite and non-negative")
    else:
        sig = [1.0] * len(wblocks)
    coef = [round_down(abs(float(wb.weight)) * x, 1) for wb, x in zip(wblocks, sig, strict=True)]
    comp = block_components(wblocks, splits, terms, coef)
    sums, _ = component_sums(comp)
    entries = sum(t.size for t in comp.tau)
    numer = round_down(math.fsum(np.sqrt(sums).tolist()), 2 * d + 12 + len(wblocks) + entries)
    if not numer > 0:
        return 0.0
    prods = [math.prod(t.nu for t in row) for row in terms]
    extra = [math.prod(t.nu + t.omega for t in row) - p for row, p in zip(terms, prods, strict=True)]
    q2 = round_up(math.prod(basis_sq) * (max(prods) + math.fsum(max(e, 0.0) for e in extra)),
                  4 * d + 2 * len(wblocks) + 8)
    col_mass = round_up(math.prod(math.fsum((sp.s * sp.s).tolist()) for sp in splits),
                        d * (max(sizes) + 3))
    if gamma_2:
        row_mass = round_up(math.fsum(x * x * math.prod(t.row_mass for t in row)
                                      for x, row in zip(sig, terms, strict=True)),
                            2 * d + len(wblocks) + 4)
    else:
        row_mass = float(sum(wb.rows for wb in wblocks))
    g = gamma(4)
    return round_down(numer / math.sqrt(round_up(q2 * row_mass * col_mass, 2)) * (1.0 - g), 3)


def label_arrays(splits: Sequence[AxisSplit]) -> dict[str, np.ndarray]:
    """The plan arrays of a split: ``cert.sub.s.<j>``, ``cert.sub.basis.<j>``, ``cert.sub.atoms.<j>``."""
    out: dict[str, np.ndarray] = {}
    for j, sp in enumerate(splits):
        out[f"cert.sub.s.{j}"] = np.asarray(sp.s, dtype=np.float64).reshape(1, -1)
        out[f"cert.sub.basis.{j}"] = np.asarray(sp.basis, dtype=np.float64)
        out[f"cert.sub.atoms.{j}"] = np.asarray(sp.atoms, dtype=np.float64).reshape(1, -1)
    return out


def verify_bound(plan: Any, W: Any) -> float:
    """The bound ``plan.certificate['subspace']`` states, re-derived from the plan's arrays
    (:func:`label_arrays`; γ₂ plans also ``cert.sub.r.<j>`` and ``cert.sub.sigma``);
    :class:`StructureError` when they are malformed or the stated bound exceeds the
    re-derived one."""
    from .workload_blocks import workload_blocks

    stated = plan.certificate.get("subspace")
    if not (isinstance(stated, dict) and stated.get("method") == METHOD):
        raise StructureError("certificate.subspace names another method")
    sizes = tuple(int(n) for n in plan.domain.sizes)
    arrays = plan.certificate_arrays
    splits = []
    for j, n in enumerate(sizes):
        s, B, a = (arrays.get(f"cert.sub.{name}.{j}") for name in ("s", "basis", "atoms"))
        if s is None or B is None or a is None or a.size != n or not np.all(a == np.round(a)):
            raise StructureError(f"cert.sub.s/basis/atoms.{j} must give attribute {j}'s split")
        splits.append(AxisSplit(s.reshape(-1).astype(np.float64), B.astype(np.float64),
                                a.reshape(-1).astype(np.int64)))
    wblocks = workload_blocks(W, sizes)
    if plan.norm == "gamma_2":
        rw = [arrays.get(f"cert.sub.r.{j}") for j in range(len(sizes))]
        sig = arrays.get("cert.sub.sigma")
        if any(r is None for r in rw) or sig is None or sig.size != len(wblocks):
            raise StructureError("a γ₂ subspace bound needs cert.sub.r.<j> for every attribute and "
                                 "cert.sub.sigma with one scale per workload block")
        lower = certified_lower(wblocks, sizes, splits, [np.asarray(r).reshape(-1) for r in rw if r is not None],
                                sig.reshape(-1).tolist())
    else:
        lower = certified_lower(wblocks, sizes, splits)
    value = stated.get("lower")
    if not (isinstance(value, float) and value <= lower * (1.0 + 1e-12)):
        raise StructureError(f"certificate.subspace.lower {value!r} exceeds the re-derived {lower:.10g}")
    return lower
