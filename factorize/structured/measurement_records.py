"""A structured release restated as measurement records: per clique, ``y = Q·m_clique + noise``
with independent noise of one known standard deviation — private-pgm's ``LinearMeasurement``
(McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019, §3) — computed from the released answers and the public plan only.

A structured plan measures ``ỹ_b = Ã_b m_{S_b} + z_b`` per strategy block b (``Ã_b = s_b ⊗_{j∈S_b}
F_{b,j}``, ``structured.strategy``; z_b independent, per coordinate variance σ² — the noise's
``privacy.sampled_variance``) and releases ``e = R ỹ`` (``executor.structured``); ỹ itself is
discarded. Every record here is ``y = T ỹ`` for a matrix T whose rows lie in R's row space, so
y is a function of e (post-processing: nothing beyond the release), and ``T Tᵀ = I``, so T z
has covariance σ² I: independent N(0, σ²) coordinates for continuous Gaussian noise; for the
exact discrete Gaussian of a lattice release (variance ≤ σ², CKS20 Cor. 9) the coordinates are
independent where T is a coordinate selection (records that are a block's own measurement) and
uncorrelated where T mixes coordinates. Three forms, chosen from the plan:

* **marginal blocks** (every factor an identity, any scales; ``marginal_weights``): the Gram is
  diagonal in the residual basis, so the release's least-squares estimate splits into
  independent parts per attribute set U of the released tables' downward closure. With
  ``B_U = ⊗_{j∈U} H_j`` (orthonormal Helmert rows, ``structured.residual.helmert``) and
  ``P_{b,U} = Π_{j∈S_b∖U} n_j``, block b estimates ``B_U m_U`` with variance ``σ² P_{b,U}/s_b²``
  (i.i.d.: the rows of ``B_U ⊗ 𝟙ᵀ`` are orthogonal, of squared norm P), and the consistent
  least-squares tables combine them by inverse variance, ``λ_U = Σ_{b: S_b⊇U} s_b²/P_{b,U}``. The
  record of U is ``Q = √λ_U B_U`` on clique U and ``y = Q m̂_U`` (m̂ the released tables'
  U-marginal): ``T = Σ_b (s_b/P_{b,U}/√λ_U)(B_U ⊗ 𝟙ᵀ_{S_b∖U})`` per block, noise σ² I;
* **orthogonal blocks** (the blocks' rows mutually orthogonal, ``A_b A_cᵀ = 0``: residual bases,
  ``residual``, ``subset_algebra``, ``symmetric`` without mixed sectors), one least-squares
  estimate (``FamilyCodec.one_estimate``): ``Ã_b m̂_{S_b} = Π_{range Ã_b} ỹ_b`` (the blocks'
  normal equations decouple), so the record of block b is its own measurement, ``Q = Ã_b``,
  ``y = ỹ_b`` — or, where a factor lacks full row rank, ``Q = s_b ⊗_j U_jᵀF_{b,j}`` with ``U_j``
  an orthonormal basis of ``range F_{b,j}`` (``T = ⊗_j U_jᵀ``, the whitening);
* **separate blocks** (``union``, ``kron_groups``: workload block o answered from strategy
  block b alone, one Kronecker term ``c ⊗_j G_j``, ``S_b`` = the table of o): block o's table
  estimate is ``m̂_o = M ỹ_b``, ``M = (c/w_o) ⊗_j P_j``, ``P_j = W_{o,j}⁺ G_j`` (W⁺ the workload
  factor's pseudo-inverse, ``postprocess.tables``), covariance ``σ² M Mᵀ``. Whitened with it:
  ``P_j P_jᵀ = V Λ Vᵀ``, ``K_j = Λ^{-1/2} Vᵀ`` (positive eigenvalues), ``y = (w_o/c) ⊗_j K_j m̂_o``,
  ``Q = s_b ⊗_j K_j P_j F_{b,j}``; ``T = ⊗_j K_j P_j`` has orthonormal rows.

The first two need the release to be the least-squares estimate ``W (ÃᵀÃ)⁺Ãᵀ ỹ`` (the family's
``one_estimate``) and the released answers to determine the tables (workload factors of full
column rank, ``postprocess.tables.marginal_layout``); the second needs every block's support
inside a released table. Anything else is refused (:class:`MeasurementExportError`), before a
release is charged: Laplace noise (its records are uncorrelated, not Gaussian), mixed blocks,
blocks that are neither marginals nor orthogonal under one estimate (their release couples
cliques), a strategy block read by several separately estimated workload blocks. And every
plan's records are checked against its own reconstruction (:func:`probe`): for a public probe
vector u in place of ỹ, the records read from ``R u`` must be ``T u`` — a reconstruction that is
not the least-squares one a form assumes is refused, not exported with a wrong noise statement.

A lattice release adds the rounding of ``round(Ã_b m/γ)``: each record coordinate carries a
deterministic bias of at most ``(γ/2)·max_i ‖t_i‖₁`` (t_i the rows of T; ``rounding_bias``);
σ is the release's ``sd``.
Queries are stored as Kronecker products of small explicit matrices, ``Q = scale ⊗_{j∈clique}
Q_j`` (C order, the clique's attributes in schema order): :meth:`MeasurementRecord.matrix` forms
Q densely.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.errors import InputError
from factorize.kron import kron_matvec

#: Relative size below which a factor product, singular value or eigenvalue counts as zero.
ZERO_TOL = 1e-12


class MeasurementExportError(InputError):
    """A release that cannot be stated as measurement records of independent noise per clique
    (module docstring); raised before anything is charged."""


@dataclass(frozen=True)
class MeasurementRecord:
    """``values = Q·m_attrs + noise``, noise i.i.d. with standard deviation ``stddev`` (module
    docstring), ``Q = scale ⊗_i factors[i]`` over the clique ``attrs`` (strictly increasing
    attribute indices; the empty clique is the total), plus a deterministic bias of at most
    ``rounding_bias`` per coordinate (0 for a float sampler)."""

    attrs: tuple[int, ...]
    scale: float
    factors: tuple[np.ndarray, ...]
    values: np.ndarray
    stddev: float
    rounding_bias: float

    @property
    def rows(self) -> int:
        return int(self.values.size)

    def matrix(self) -> np.ndarray:
        """Q as a dense (rows × cells of the clique) array."""
        Q = np.array([[self.scale]])
        for F in self.factors:
            Q = np.kron(Q, F)
        return Q

    def apply(self, table: np.ndarray) -> np.ndarray:
        """``Q·vec(table)`` for a table over the clique (C order; factor by factor)."""
        return self.scale * kron_matvec(self.factors, np.asarray(table, dtype=np.float64).reshape(-1))


@dataclass(frozen=True)
class _Reader:
    """How one record's values come from the release: ``scale ⊗ factors`` applied to the
    consistent table on ``attrs`` (``block`` None) or to workload block ``block``'s own table."""

    attrs: tuple[int, ...]
    scale: float
    factors: tuple[np.ndarray, ...]
    block: int | None


@dataclass(frozen=True)
class MeasurementExporter:
    """The records of a plan's release, fixed before the charge (:func:`exporter`);
    :meth:`records` reads their values from the released estimate."""

    form: str
    sizes: tuple[int, ...]
    stddev: float
    layout: Any
    shapes: tuple[tuple[tuple[int, ...], float, tuple[np.ndarray, ...], float], ...]
    readers: tuple[_Reader, ...]
    #: per record, T's terms ``(block b, coefficient, factors over S_b)``: ``y = Σ c ⊗F ỹ_b``
    transforms: tuple[tuple[tuple[int, float, tuple[np.ndarray, ...]], ...], ...]

    def records(self, estimate: np.ndarray) -> list[MeasurementRecord]:
        """The records (module docstring) with values read from the released ``estimate``."""
        from factorize.postprocess.tables import marginal

        est = np.asarray(estimate, dtype=np.float64)
        lay = self.layout
        if est.shape != (lay.k,):
            raise MeasurementExportError(f"{est.size} released answers, the workload has {lay.k}")
        tables: list[np.ndarray] = []
        if any(r.block is None for r in self.readers):
            tables = lay.targets(est)[0]
        out = []
        for (attrs, scale, factors, bias), rd in zip(self.shapes, self.readers, strict=True):
            if rd.block is None:
                t = next(i for i, T in enumerate(lay.tables) if set(rd.attrs) <= set(T))
                src = marginal(tables[t], lay.tables[t], rd.attrs)
            else:
                o = rd.block
                pinv = [np.eye(lay.sizes[j]) if f is None else f.pinv
                        for j, f in zip(rd.attrs, lay.block_factors[o], strict=True)]
                src = kron_matvec(pinv, est[lay.offsets[o]:lay.offsets[o + 1]]) / lay.block_weight[o]
            vals = rd.scale * kron_matvec(rd.factors, np.asarray(src, dtype=np.float64).reshape(-1))
            out.append(MeasurementRecord(attrs, scale, factors, vals, self.stddev, bias))
        return out

    def total(self, estimate: np.ndarray) -> float:
        """An estimate of the number of records from the release: the mean of the released
        tables' totals (one value under one least-squares estimate)."""
        tables = self.layout.targets(np.asarray(estimate, dtype=np.float64))[0]
        return float(np.mean([float(np.sum(t)) for t in tables]))


def exporter(plan: Any, W: Any) -> MeasurementExporter:
    """The records of a verified structured plan ``plan`` with workload ``W`` (module
    docstring); :class:`MeasurementExportError` where its release has no such statement."""
    from factorize.postprocess.errors import PostprocessError
    from factorize.postprocess.tables import marginal_layout
    from factorize.privacy import sampled_variance

    from .families import codec

    spec = plan.noise
    if spec.family != "gaussian":
        raise MeasurementExportError(
            f"the plan's noise is {spec.family}: measurement records state Gaussian noise of a "
            "known standard deviation (private-pgm's model); a Laplace release is not exported")
    sizes = tuple(int(n) for n in plan.domain.sizes)
    try:
        layout = marginal_layout(W, sizes)
    except PostprocessError as exc:
        raise MeasurementExportError(f"the released answers do not determine marginal tables: {exc}") from None
    strategy = plan.strategy.measured()
    if any(b.mix is not None for b in strategy.blocks):
        raise MeasurementExportError(
            "the strategy has mixed blocks (a dense matrix across attributes, structured.mixing): "
            "exporting them is not implemented")
    sd = math.sqrt(sampled_variance(spec))
    half = 0.5 * spec.grid if spec.grid else 0.0
    if codec(plan.family).one_estimate:
        if all(_is_identity(strategy.arrays[n]) for b in strategy.blocks for n in b.names):
            ex = _marginal_form(strategy, layout, sizes, sd, half)
        else:
            ex = _orthogonal_form(strategy, layout, sizes, sd, half, plan.family)
    else:
        ex = _separate_form(strategy, plan.reconstruction, layout, sizes, sd, half)
    probe(ex, plan.reconstruction, strategy)
    return ex


#: The largest relative difference :func:`probe` accepts (floating-point rounding only).
PROBE_TOL = 1e-8


def probe(ex: MeasurementExporter, recon: Any, strategy: Any) -> None:
    """The records are what they state, for this plan's reconstruction R: for a probe vector u
    in place of ỹ (public and deterministic: no data, no noise, no random generator — the Weyl
    sequence ``u_i = cos(√2·(i + 1))``, generic enough to expose any linear mismatch), the
    records read from ``R u`` must equal
    ``T u`` computed from u directly (``transforms``) — which fails where the release is not the
    least-squares estimate a form assumes. :class:`MeasurementExportError` otherwise."""
    u = np.cos(np.sqrt(2.0) * np.arange(1, strategy.m + 1))
    for i, (rec, terms) in enumerate(zip(ex.records(recon.apply(u)), ex.transforms, strict=True)):
        direct = np.zeros(rec.rows)
        for b, c, facs in terms:
            direct += c * kron_matvec(facs, u[strategy.offsets[b]:strategy.offsets[b + 1]])
        scale = max(1.0, float(np.abs(direct).max(initial=0.0)))
        if not float(np.abs(rec.values - direct).max(initial=0.0)) <= PROBE_TOL * scale:
            raise MeasurementExportError(
                f"record {i} (attributes {rec.attrs}) read from the release is not the linear "
                f"statement of the measurement the {ex.form} form assumes (a probe differs by "
                f"{float(np.abs(rec.values - direct).max()):.3g}): the release is not the "
                "least-squares estimate of its measurements")


def _is_identity(F: np.ndarray) -> bool:
    return F.shape[0] == F.shape[1] and bool(np.array_equal(F, np.eye(F.shape[0])))


def _closure(tables: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    from factorize.postprocess.consistency import downward_closure

    return downward_closure(tables)


def _marginal_form(strategy: Any, layout: Any, sizes: tuple[int, ...], sd: float,
                   half: float) -> MeasurementExporter:
    from .residual import helmert

    shapes, readers, transforms = [], [], []
    for U in _closure(layout.tables):
        if any(sizes[j] < 2 for j in U):
            continue  # no residual on a one-value attribute
        lam, bias_w = 0.0, 0.0
        for b in strategy.blocks:
            if set(U) <= set(b.support):
                P = math.prod(sizes[j] for j in b.support if j not in U)
                lam += b.scale * b.scale / P
                bias_w += abs(b.scale)
        if not lam > 0:
            raise MeasurementExportError(f"the released table on attributes {U} has a part no "
                                         "strategy block measures")
        H = tuple(helmert(sizes[j]) for j in U)
        root = math.sqrt(lam)
        l1 = math.prod(float(np.abs(h).sum(axis=1).max()) for h in H)
        shapes.append((U, root, H, half * l1 * bias_w / root))
        readers.append(_Reader(U, root, H, None))
        transforms.append(tuple(
            (b, blk.scale / math.prod(sizes[j] for j in blk.support if j not in U) / root,
             tuple(H[U.index(j)] if j in U else np.ones((1, sizes[j])) for j in blk.support))
            for b, blk in enumerate(strategy.blocks) if set(U) <= set(blk.support)))
    return MeasurementExporter("marginal blocks", sizes, sd, layout, tuple(shapes), tuple(readers),
                               tuple(transforms))


def _block_factors(strategy: Any, b: int) -> list[np.ndarray | None]:
    """Block b's factor on every attribute (None: ``𝟙ᵀ``, summed out)."""
    blk = strategy.blocks[b]
    names = dict(zip(blk.support, blk.names, strict=True))
    return [strategy.arrays[names[j]] if j in names else None for j in range(strategy.d)]


def _orthogonal(F: np.ndarray | None, G: np.ndarray | None, n: int) -> bool:
    """``F Gᵀ = 0`` (``𝟙ᵀ`` for None) relative to ``‖F‖_F ‖G‖_F``."""
    f = np.ones((1, n)) if F is None else F
    g = np.ones((1, n)) if G is None else G
    prod = f @ g.T
    return float(np.linalg.norm(prod)) <= ZERO_TOL * float(np.linalg.norm(f) * np.linalg.norm(g))


def _check_orthogonal(strategy: Any, family: str) -> None:
    """Every two blocks' rows orthogonal: some attribute where their factors are."""
    factors = [_block_factors(strategy, b) for b in range(len(strategy.blocks))]
    names = [dict(zip(blk.support, blk.names, strict=True)) for blk in strategy.blocks]
    memo: dict[tuple[int, str | None, str | None], bool] = {}
    for b in range(len(factors)):
        for c in range(b + 1, len(factors)):
            for j in range(strategy.d):
                key = (j, names[b].get(j), names[c].get(j))
                if key not in memo:
                    memo[key] = _orthogonal(factors[b][j], factors[c][j], strategy.sizes[j])
                if memo[key]:
                    break
            else:
                raise MeasurementExportError(
                    f"strategy blocks {b} and {c} of this {family} plan are not orthogonal and not "
                    "marginals: their least-squares release couples the cliques "
                    f"{strategy.blocks[b].support} and {strategy.blocks[c].support}, which no "
                    "per-clique record of independent noise states")


def _range_basis(F: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis (columns) of ``range F`` where F lacks full row rank, else None."""
    U, s, _ = np.linalg.svd(F, full_matrices=False)
    r = int(np.sum(s > ZERO_TOL * max(F.shape) * (s[0] if s.size else 0.0)))
    return None if r == F.shape[0] else U[:, :r]


def _orthogonal_form(strategy: Any, layout: Any, sizes: tuple[int, ...], sd: float, half: float,
                     family: str) -> MeasurementExporter:
    _check_orthogonal(strategy, family)
    shapes, readers, transforms = [], [], []
    for b, blk in enumerate(strategy.blocks):
        if not any(set(blk.support) <= set(T) for T in layout.tables):
            raise MeasurementExportError(
                f"strategy block {b} measures attributes {blk.support} jointly, but no released "
                "table contains them: the release reveals only part of that measurement")
        facs, whiten, l1 = [], [], 1.0
        for n in blk.names:
            F = strategy.arrays[n]
            U = _range_basis(F)
            if U is None:
                facs.append(F)
                whiten.append(np.eye(F.shape[0]))
            else:
                facs.append(U.T @ F)
                whiten.append(U.T)
                l1 *= float(np.abs(U.T).sum(axis=1).max())
        Q = tuple(facs)
        shapes.append((blk.support, float(blk.scale), Q, half * l1))
        readers.append(_Reader(blk.support, float(blk.scale), Q, None))
        transforms.append(((b, 1.0, tuple(whiten)),))
    return MeasurementExporter("orthogonal blocks", sizes, sd, layout, tuple(shapes), tuple(readers),
                               tuple(transforms))


def _separate_form(strategy: Any, recon: Any, layout: Any, sizes: tuple[int, ...], sd: float,
                   half: float) -> MeasurementExporter:
    by_out: dict[int, list[Any]] = {}
    readers_of: dict[int, list[int]] = {}
    for t in recon.terms:
        by_out.setdefault(t.out_block, []).append(t)
        readers_of.setdefault(t.in_block, []).append(t.out_block)
    shapes, readers, transforms = [], [], []
    for o in range(len(layout.block_table)):
        terms = by_out.get(o, [])
        if len(terms) != 1:
            raise MeasurementExportError(f"workload block {o} is read from {len(terms)} "
                                         "reconstruction terms; separate blocks need exactly one")
        t = terms[0]
        b = t.in_block
        if len(set(readers_of[b])) != 1:
            raise MeasurementExportError(
                f"strategy block {b} is read by workload blocks {sorted(set(readers_of[b]))}, each "
                "estimated separately: their answers are not one statement of its measurement")
        blk = strategy.blocks[b]
        T = layout.tables[layout.block_table[o]]
        if tuple(blk.support) != tuple(T):
            raise MeasurementExportError(f"workload block {o} reads the table {T} from strategy block "
                                         f"{b} on attributes {blk.support}")
        c = float(t.scale)
        G: dict[int, np.ndarray] = {}
        for j, name in zip(t.attrs, t.names, strict=True):
            g = recon.arrays[name]
            if j in T:
                G[j] = g
            elif g.shape == (1, 1):
                c *= float(g[0, 0])
            else:
                raise MeasurementExportError(f"reconstruction term of workload block {o} has a "
                                             f"factor on attribute {j} outside its table {T}")
        if set(G) != set(T) or c == 0.0:
            raise MeasurementExportError(f"the reconstruction of workload block {o} is not one "
                                         "Kronecker product over its table")
        K, Qf, KPs, l1 = [], [], [], 1.0
        for j, f, name in zip(T, layout.block_factors[o], blk.names, strict=True):
            P = G[j] if f is None else f.pinv @ G[j]
            lam, V = np.linalg.eigh(P @ P.T)
            keep = lam > ZERO_TOL * max(P.shape) * max(float(lam[-1]), 0.0)
            Kj = (V[:, keep] / np.sqrt(lam[keep])).T
            KP = Kj @ P
            K.append(Kj)
            KPs.append(KP)
            Qf.append(KP @ strategy.arrays[name])
            l1 *= float(np.abs(KP).sum(axis=1).max())
        w = layout.block_weight[o]
        shapes.append((T, float(blk.scale), tuple(Qf), half * l1))
        readers.append(_Reader(T, w / c, tuple(K), o))
        transforms.append(((b, 1.0, tuple(KPs)),))
    return MeasurementExporter("separate blocks", sizes, sd, layout, tuple(shapes), tuple(readers),
                               tuple(transforms))
