"""The symmetric family: the γ_F- or γ₂-optimal strategy of a union of Kronecker products, built
from the symmetry-reduced dual (``structured.symmetry``, ``structured.symmetry_gamma_2``) in
closed form.

For dual weights q (per cell, constant on the orbits of the twin-class permutations) the
γ_F program's optimal strategy is ``X = D^{-1/2} (D^{1/2} G D^{1/2})^{1/2} D^{-1/2}``
(G = WᵀW, D = diag q; Li, Miklau, Hay, McGregor & Rastogi, "The matrix mechanism", VLDB J.
2015, §4, and docs/math.md §4.1: at the dual optimum ``diag X`` is constant on the support of
q and ``tr(G X⁺) = f(q)``, so ``Δ₂² · tr(G X⁺) / k = f²/k = γ_F(W)²``). X lies in the
commutant of the symmetry group, so it splits over the sectors of ``structured.symmetry``:
sector s (free attributes F, fixed (attribute, class) pairs) carries

    ``X_s = D_s^{-1/2} M_s^{1/2} D_s^{-1/2}``,  ``M_s = D_s^{1/2} G_s D_s^{1/2} = V Λ Vᵀ``,

on the class tuples of its free attributes, with multiplicity ``Π (s_c − 1)`` (the contrasts
inside each fixed class). Its strategy rows, with ``L_s = Λ_r^{1/4} V_rᵀ D_s^{-1/2} / √t``
(eigenvalues above ``rel_tol`` of the sector's largest; t the largest cell of diag X):

    ``A_s = (⊗_{fixed} H_{j,c}) ⊗ L_s (⊗_{free} S_j^{-1/2} Z_j)``,

H the orthonormal Helmert contrasts inside class c (``structured.residual.helmert``), Z_j the
class partition, S_j the class sizes; a free attribute with one class is summed out (its
``n_j^{-1/2}`` goes into the block's scale), the others are the block's mixed attributes
(``structured.mixing``: ``M = L_s S^{-1/2}``). A sector without mixed attributes is a plain
Kronecker block. The reconstruction reads sector s for workload block o through

    ``(w_o / s_b) (⊗_{fixed} W_{o,j} H_cᵀ) ⊗ ((⊗_{mixed} W_{o,j} Z_jᵀ S_j^{-1}) N_s) ⊗ (⊗_{summed} W_{o,j} 𝟙/n_j)``,

``N_s = S^{1/2} D_s^{1/2} V_r Λ_r^{-1/4} √t`` — a right inverse of M on the workload's rows
(``N M = S^{1/2} D^{1/2} V_r V_rᵀ D^{-1/2} S^{-1/2}`` fixes every row of G_s's range), so
``R·A = W`` (checked in the algebra, ``structured.identity``) and the total variance is
``t · f(q)`` exactly. The gap to the certified bound is the dual solver's (≈1e-5 on SF1).

**γ₂** (docs/math.md §5.4c). At row weights p constant on the row orbits and cell weights q,
the γ₂ dual's primal is the weighted γ_F optimum ``X = D_q^{-1/2}(D_q^{1/2} Wᵀ D_p W
D_q^{1/2})^{1/2} D_q^{-1/2}``: the same closed form on the sectors of ``D_p^{1/2} W`` (the
row-orbit sub-blocks re-weighted, ``structured.symmetry_gamma_2``), with the reconstruction
reading W itself. At the γ₂ dual's optimum every row with ``p > 0`` has variance γ₂² and none
more (complementary slackness), so the plan's worst query is the certified bound up to the
solver's gap. Row weights span many orders of magnitude there, and a sector's small
eigenvectors are accurate only to ``ε σ_max/σ``: a right inverse onto them misses the workload's
weak directions (R·A ≠ W by 10⁻⁷ on SF1). So each sector's range comes from the unweighted
sector, ``U = U_0 P`` with ``U_0ᵀ G_s U_0 = P Σ Pᵀ``, and ``N L = U_0 U_0ᵀ`` holds to rounding.

Certificate: the symmetry-reduced dual bound (γ_F: at the same q; γ₂: at the solver's best
dual point, ``METHOD_GAMMA_2``); ``symmetry.verify_bound`` re-derives it from ``cert.sym.*``;
upper = the value the plan achieves. Encoding: the union codec with family ``"symmetric"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy, measured_scale
from .symmetry import Reduction, Sector
from .workload_blocks import WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.records import FamilyCertificate

FAMILY = "symmetric"
#: Both objectives' certificate (``certificate.symmetry`` names the bound: METHOD for γ_F,
#: METHOD_GAMMA_2 with row-orbit weights ``cert.sym.v`` for γ₂).
CERTIFICATE = ("symmetric: the symmetry-reduced γ_F dual at the plan's orbit weights "
               "(certificate.symmetry, re-derived from cert.sym.*); upper = the value the plan "
               "achieves")
CERTIFICATE_GAMMA_2 = ("symmetric: the symmetry-reduced γ₂ dual at the plan's row-orbit and cell-orbit "
                       "weights (certificate.symmetry, re-derived from cert.sym.*); upper = the value "
                       "the plan achieves")
#: Eigenvalues of a sector below this fraction of its largest are its null space.
REL_TOL = 1e-13


def verify_certificate(plan: Any, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap): the achieved value (re-derived by the caller's claims check) and
    the symmetry bound re-derived from the plan's arrays."""
    from factorize.numerics import relative_gap

    from .blocks import StructureError
    from .symmetry import verify_bound

    wanted = CERTIFICATE_GAMMA_2 if plan.certificate["norm"] == "gamma_2" else CERTIFICATE
    if plan.certificate["method"] != wanted:
        raise StructureError(f"a {plan.certificate['norm']} plan of the symmetric family states "
                             f"the certificate {plan.certificate['method']!r}, not {wanted!r}")
    lower = verify_bound(plan, W)
    upper = float(plan.certificate["achieved"])
    return upper, lower, relative_gap(upper, lower)


def _class_sizes(red: Reduction, attrs: Sequence[int]) -> np.ndarray:
    """Cells per class tuple of ``attrs`` (C order)."""
    out: np.ndarray = np.ones(1)
    for j in attrs:
        out = np.kron(out, red.class_sizes[j].astype(np.float64))
    return out


def _range(gram: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the range of a sector matrix: its eigenvectors above
    :data:`REL_TOL` of the largest eigenvalue."""
    sig, U = np.linalg.eigh(gram)
    if not sig.size or sig[-1] <= 0:
        return U[:, :0]
    return U[:, sig > REL_TOL * sig[-1]]


def _sector_factor(s: Sector, weights: np.ndarray, basis: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(L_s, N_s)`` at t = 1 over the class tuples of the sector's free attributes (module
    docstring), None when the sector is zero. With ``G_s = U Σ Uᵀ`` (its range) and
    ``K = Σ^{1/2} Uᵀ D U Σ^{1/2}``, ``X_s = D^{-1/2}(D^{1/2}G_sD^{1/2})^{1/2}D^{-1/2} =
    U Σ^{1/2} K^{-1/2} Σ^{1/2} Uᵀ`` (the square root of ``YᵀY`` is ``Yᵀ(YYᵀ)^{-1/2}Y``), so
    ``L = K^{-1/4} Σ^{1/2} Uᵀ`` and its right inverse ``N = U Σ^{-1/2} K^{1/4}`` (``N L = U Uᵀ``)
    need no ``D^{-1/2}``: orbits of (near-)zero weight stay finite.

    ``basis``: an orthonormal basis ``U_0`` of the range, known from a better-conditioned
    matrix with the same range (γ₂: the unweighted sector, whose range every positive row
    weighting keeps). Then ``U = U_0 P`` with ``U_0ᵀ G_s U_0 = P Σ Pᵀ``, so ``N L = U_0U_0ᵀ``
    holds to rounding whatever the spread of the weights: the eigenvectors of a sector whose
    weights span many orders of magnitude are accurate only to ``ε·σ_max/σ``, and a projector
    onto them would leave the workload's weak directions short (R·A ≠ W)."""
    d = np.asarray(weights[s.index], dtype=np.float64).reshape(-1)
    if np.any(d < 0) or not np.all(np.isfinite(d)):
        raise StructureError("orbit weights must be finite and non-negative")
    if basis is None:
        sig, U = np.linalg.eigh(s.gram)
        if not sig.size or sig[-1] <= 0:
            return None
        keep = sig > REL_TOL * sig[-1]
        sig, U = sig[keep], U[:, keep]
    else:
        if not basis.shape[1]:
            return None
        H = basis.T @ s.gram @ basis
        sig, P = np.linalg.eigh(0.5 * (H + H.T))
        if not sig[0] > 0:
            raise StructureError("the row weights do not span a sector of the workload: its "
                                 "closed-form strategy is singular")
        U = basis @ P
    root = np.sqrt(sig)
    K = root[:, None] * (U.T @ (d[:, None] * U)) * root[None, :]
    kap, P = np.linalg.eigh(0.5 * (K + K.T))
    if not kap[0] > REL_TOL * kap[-1]:
        raise StructureError("the dual weights do not span a sector of the workload: its "
                             "closed-form strategy is singular")
    q = np.sqrt(np.sqrt(kap))
    L = (P / q[None, :]) @ P.T @ (root[:, None] * U.T)
    N = (U / root[None, :]) @ (P * q[None, :]) @ P.T
    return L, N


def _normaliser(red: Reduction, factors: list[tuple[Sector, np.ndarray]]) -> float:
    """t: the largest cell of diag X for the sector factors L (at t = 1): a cell whose value
    on attribute j lies in class c gets ``1/s_c`` from a free attribute (normalised class
    indicator) and ``(s_c − 1)/s_c`` from a fixed one in its class (Helmert columns), times
    ``‖L e_κ‖²`` at its free class tuple κ. Only a scale: the plan's sensitivity is computed
    on the strategy itself."""
    diag = np.zeros(red.shape)
    for s, L in factors:
        col = np.einsum("ij,ij->j", L, L) / _class_sizes(red, s.free)
        for j, c in s.fixed:
            col = col * (1.0 - 1.0 / float(red.class_sizes[j][c]))
        part = diag[s.index]
        diag[s.index] = part + np.asarray(col).reshape(part.shape)
    return float(np.max(diag))


class _Arrays:
    """The plan's named arrays, each distinct one stored once (``<prefix>.<i>``)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.named: dict[tuple, str | None] = {}
        self._dense: dict[str, np.ndarray] = {}

    def dense(self, f: Any) -> np.ndarray:
        """A workload factor's dense matrix, formed once per distinct factor (a factor is read
        by every sector's term)."""
        if f.key not in self._dense:
            self._dense[f.key] = np.asarray(f.dense(), dtype=np.float64)
        return self._dense[f.key]

    def put(self, key: tuple, prefix: str, make: Any) -> str | None:
        """The name of ``make()`` under ``key`` (None for an all-zero array)."""
        if key not in self.named:
            A = np.ascontiguousarray(make(), dtype=np.float64)
            if not np.any(A):
                self.named[key] = None
            else:
                self.named[key] = name = f"{prefix}.{len(self.arrays)}"
                self.arrays[name] = A
        return self.named[key]

    def get(self, key: tuple) -> np.ndarray:
        return self.arrays[str(self.named[key])]


def _contrast(red: Reduction, sizes: Sequence[int], j: int, c: int) -> np.ndarray:
    """The measured Helmert contrasts inside class c of attribute j, ``(s_c − 1) × n_j``."""
    from factorize.privacy.lattice import quantize

    from .residual import helmert

    members = np.flatnonzero(red.labels[j] == c)
    H = np.zeros((members.size - 1, sizes[j]))
    H[:, members] = helmert(members.size)
    return quantize(H).measured


def _partition(red: Reduction, sizes: Sequence[int], j: int) -> np.ndarray:
    """The 0/1 class partition Z_j of attribute j, ``m_j × n_j``."""
    Z = np.zeros((red.class_sizes[j].size, sizes[j]))
    Z[red.labels[j], np.arange(sizes[j])] = 1.0
    return Z


@dataclass(frozen=True)
class _Measured:
    """One sector's block: the sector, its mixed and summed attributes, the block's scale and
    its mixing inverse N (None for a plain block)."""

    sector: Sector
    mixed: tuple[int, ...]
    summed: tuple[int, ...]
    scale: float
    inverse: np.ndarray | None


def _strategy(sizes: tuple[int, ...], red: Reduction, weights: np.ndarray, store: _Arrays,
              ranges: Reduction | None = None) -> tuple[list[KronBlock], list[_Measured]]:
    """The sector blocks of the module docstring (M quantized to what the executor measures);
    ``ranges``: a reduction whose sectors have the same ranges as ``red``'s (``_sector_factor``)."""
    from factorize.privacy.lattice import quantize

    bases = None if ranges is None else {(x.free, x.fixed): _range(x.gram) for x in ranges.sectors}
    factors = [(s, LN) for s, LN in ((s, _sector_factor(s, weights, None if bases is None else
                                                       bases[(s.free, s.fixed)]))
                                     for s in red.sectors)
               if LN is not None]
    t = _normaliser(red, [(s, LN[0]) for s, LN in factors])
    blocks: list[KronBlock] = []
    out: list[_Measured] = []
    for s, (L0, N0) in factors:
        L, N = L0 / math.sqrt(t), N0 * math.sqrt(t)
        fixed = dict(s.fixed)
        mixed = tuple(j for j in s.free if red.class_sizes[j].size > 1)
        summed = tuple(j for j in s.free if red.class_sizes[j].size == 1)
        scale = math.prod(1.0 / math.sqrt(sizes[j]) for j in summed)
        support = tuple(sorted(set(fixed) | set(mixed)))
        names = tuple(str(store.put(("h", j, fixed[j]), "A", partial(_contrast, red, sizes, j, fixed[j])))
                      if j in fixed else str(store.put(("z", j), "A", partial(_partition, red, sizes, j)))
                      for j in support)
        if mixed:
            size = np.sqrt(_class_sizes(red, mixed))
            M = quantize(L / size[None, :]).measured
            mname = str(store.put(("M", len(blocks)), "M", lambda M=M: M))
            blocks.append(KronBlock(measured_scale(scale), support, names, mname, mixed))
            out.append(_Measured(s, mixed, summed, blocks[-1].scale, size[:, None] * N))
        else:  # one class tuple: L is 1×1
            blocks.append(KronBlock(measured_scale(float(scale * L[0, 0])), support, names))
            out.append(_Measured(s, mixed, summed, blocks[-1].scale, None))
    return blocks, out


def _term(o: int, b: int, wb: WorkloadBlock, sec: _Measured, red: Reduction, sizes: Sequence[int],
          store: _Arrays, nname: str | None) -> Term | None:
    """Sector b's term for workload block o (module docstring), None when it is zero: a fixed
    class on which ``W_{o,j}`` is constant (β = 0, decided exactly on its columns), or a
    mixed attribute whose class sums vanish."""
    fixed = dict(sec.sector.fixed)
    attrs = tuple(sorted(set(fixed) | set(sec.mixed) | (set(wb.active()) & set(sec.summed))))
    names: list[str] = []
    for j in attrs:
        f = wb.factor(j)
        Wd = store.dense(f)
        if j in fixed:
            members = np.flatnonzero(red.labels[j] == fixed[j])
            if np.all(Wd[:, members] == Wd[:, members[:1]]):
                return None
            H = store.get(("h", j, fixed[j]))
            name = store.put((f.key, "h", j, fixed[j]), "R", lambda Wd=Wd, H=H: Wd @ H.T)
        elif j in sec.mixed:
            Z = store.get(("z", j))
            cs = red.class_sizes[j][None, :]
            name = store.put((f.key, "z", j), "R", lambda Wd=Wd, Z=Z, cs=cs: (Wd @ Z.T) / cs)
        else:
            name = store.put((f.key, "1", j), "R",
                             lambda Wd=Wd, j=j: Wd.sum(axis=1, keepdims=True) / sizes[j])
        if name is None:
            return None
        names.append(name)
    return Term(o, b, float(wb.weight / sec.scale), attrs, tuple(names), nname)


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], red: Reduction,
          weights: np.ndarray, lower: float, norm: str, *, ranges: Reduction | None = None,
          bound: tuple[Sequence[float], np.ndarray] | None = None
          ) -> tuple[StructuredStrategy, StructuredReconstruction, tuple[dict[str, Any], dict[str, np.ndarray]],
                     FamilyCertificate, dict[str, np.ndarray]]:
    """Strategy, reconstruction, encoding, certificate and certificate arrays (module
    docstring) from the reduction ``red`` and dual weights ``weights`` (per cell on the orbit
    tensor) whose certified bound is ``lower``.

    γ_F: ``red`` reduces the workload and ``weights`` are the bound's. γ₂: ``red`` reduces
    ``D_p^{1/2} W``, the row-orbit sub-blocks re-weighted (``structured.symmetry_gamma_2``), so
    the strategy is the weighted γ_F optimum at (p, q) — the γ₂ optimum when (p, q) is the γ₂
    dual's (docs/math.md §5.4c) — while the reconstruction reads the unweighted W's blocks;
    ``ranges`` (the reduction of W itself) gives each sector's range (``_sector_factor``) and
    ``bound`` the row-orbit and cell weights ``(v, d)`` at which ``lower`` was certified."""
    from . import symmetry, union

    if norm not in ("gamma_f", "gamma_2") or (norm == "gamma_2") != (bound is not None) or (
            (ranges is None) != (bound is None)):
        raise StructureError("the symmetric family optimises gamma_f, or gamma_2 with its bound's "
                             "weights and the workload's sector ranges")
    sizes = tuple(int(n) for n in sizes)
    weights = np.asarray(weights, dtype=np.float64).reshape(red.shape)
    store = _Arrays()
    blocks, measured = _strategy(sizes, red, weights, store, ranges)
    strategy = StructuredStrategy(sizes, blocks, dict(store.arrays), FAMILY)
    terms: list[Term] = []
    for b, sec in enumerate(measured):
        nname = store.put(("N", b), "N", lambda sec=sec: sec.inverse) if sec.inverse is not None else None
        for o, wb in enumerate(wblocks):
            term = _term(o, b, wb, sec, red, sizes, store, nname)
            if term is not None:
                terms.append(term)
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, dict(store.arrays), strategy)
    if bound is None:
        cert: FamilyCertificate = {"method": CERTIFICATE, "norm": norm, "lower": float(lower),
                                   "symmetry": {"method": symmetry.METHOD, "lower": float(lower)}}
        cert_arrays = {"cert.sym.d": weights.reshape(1, -1).copy()}
    else:
        cert = {"method": CERTIFICATE_GAMMA_2, "norm": norm, "lower": float(lower),
                "symmetry": {"method": symmetry.METHOD_GAMMA_2, "norm": "gamma_2", "lower": float(lower)}}
        cert_arrays = {"cert.sym.d": np.asarray(bound[1], dtype=np.float64).reshape(1, -1),
                       "cert.sym.v": np.asarray(bound[0], dtype=np.float64).reshape(1, -1)}
    cert_arrays.update(symmetry.label_arrays(red.labels))
    return strategy, recon, union.encode(strategy, recon, FAMILY), cert, cert_arrays
