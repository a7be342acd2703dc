"""The planner: solve for an optimal factorization and return it with a verified certificate.

``solve(workload, norm, method="auto")``:

1. structure first: a workload of marginals (any family of attribute subsets) is solved
   in the algebra of attribute subsets (``planner.marginal_optimum``), never forming its N
   columns; otherwise a Kronecker workload is split into its leaf factors and each
   *distinct* factor is solved once (γ_F and γ₂ are multiplicative, docs/math.md §5.1:
   ``X = ⊗X_i`` is primal-feasible and ``q = ⊗q_i`` (``p = ⊗p_i``) dual-feasible);
2. each dense factor is solved by the specialised dual solver (``method="dual"``:
   fixed-point iteration on the dual weights, ``solvers.dual_gamma_f`` /
   ``solvers.dual_gamma_2``) or by the generic cvxpy SDP (``method="sdp"``); ``auto``
   picks the dual solver and falls back to the SDP when it does not reach the gap;
   approximate γ₂ goes to the low-rank Burer–Monteiro solver (``method="low-rank"``,
   ``planner.lowrank``) from k + N ≥ 32 on, to the SDP below;
3. every route yields primal candidates (``factorize.planner.recovery``) and dual weights; the
   best candidate is kept, the leaves are composed, and ``certificate.verify`` — the only
   source of the numbers returned — re-checks the whole certificate (a one-leaf workload's
   leaf check is that same call, so it is not repeated); a failed check or a
   certified relative gap above ``gap_tol`` raises.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from factorize.choices import METHODS, Method, Norm
from factorize.factorization import Factorization, kron_compose
from factorize.planner import recovery
from factorize.planner.certificate import (
    DEFAULT_RESIDUAL_TOL,
    NORMS,
    Certificate,
    Gamma2Witness,
    GammaFWitness,
    Verification,
    Witness,
    verify,
)
from factorize.planner.errors import PlannerError
from solvers.dual_gamma_2 import solve_gamma_2_dual
from solvers.dual_gamma_f import solve_gamma_f_dual
from solvers.errors import (
    CertificateGapError,
    CertificateInvalidError,
    SolverError,
    SolverFailedError,
    SolverInaccurateError,
    SolverTimeLimitError,
)
from solvers.options import SolveInfo, SolverOptions, require_backend
from workloads import Workload, parse_workload
from workloads.structured import kron_leaves

if TYPE_CHECKING:
    from factorize.planner.marginal_optimum import MarginalSolution

#: Default bound on the certified relative gap ``upper / lower − 1``.
DEFAULT_GAP_TOL = 1e-6

#: Methods ``solve`` accepts: ``auto`` picks structure first, then the dual solver, then the SDP.

#: ``auto`` solves approximate γ₂ by the low-rank (Burer–Monteiro) solver from this k + N
#: on, the SDP below (measured: prefix:16 low-rank 0.8 s against SCS 3.6 s, random ±1
#: 12×10 0.4 s against 0.3 s; prefix:32 1.1 s against 67 s).
LOWRANK_MIN_SIZE = 32

#: ``auto`` solves marginal workloads in the algebra of attribute subsets above this many
#: cells; below it the dense route is as fast (milliseconds) and yields dense factors that
#: the executor and ``--out`` can use, which an algebra solution does not have.
ALGEBRA_MIN_CELLS = 4096

#: Back-end tolerances tried in turn when the caller does not fix one (see _solve_dense).
TOLERANCE_SCHEDULE = {"scs": (1e-6, 1e-7, 1e-8, 1e-9, 1e-10),
                      "clarabel": (1e-8, 1e-9, 1e-10),
                      "mosek": (1e-8, 1e-10)}
#: Looser tolerances tried, in turn, when the back-end stalls at the schedule's first one
#: (interior-point back-ends can stall short of 1e-8 on degenerate SDPs whose solution at 1e-7
#: certifies a gap of 1e-8 or better: the certificate, re-checked, decides what is kept).
LOOSER_ON_STALL = {"scs": (), "clarabel": (1e-7, 1e-6), "mosek": (1e-7, 1e-6)}


@dataclass(frozen=True)
class FactorSolve:
    """One SDP solve of one distinct Kronecker factor (or of the whole dense workload)."""

    shape: tuple[int, int]
    method: Method  # "dual" (specialised fixed-point solver) or "sdp" (generic cvxpy)
    backend: str
    status: str
    seconds: float
    iterations: int | None
    primal_route: str  # "gram" (from the SDP's X) or "weights" (from its dual)
    uses: int  # how many leaves of the workload this solve serves
    eps: float | None  # the back-end tolerance of the SDP solve that was kept (None: dual)
    gap: float  # the factor's own certified relative gap

    def to_dict(self) -> dict:
        """Plain-JSON form (shape as a list)."""
        return {**self.__dict__, "shape": list(self.shape)}


@dataclass(frozen=True)
class CertifiedFactorization:
    """A factorization with its certificate and the verification that produced its numbers."""

    workload: Workload
    norm: Norm
    eta: float | None
    certificate: Certificate
    verification: Verification
    solves: tuple[FactorSolve, ...]
    seconds: float

    @property
    def factorization(self) -> Factorization:
        return self.certificate.factorization

    @property
    def value(self) -> float:
        """The achieved norm of the returned factorization (= the certified upper bound)."""
        return self.verification.upper

    @property
    def lower(self) -> float:
        return self.verification.lower

    @property
    def upper(self) -> float:
        return self.verification.upper

    @property
    def gap(self) -> float:
        return self.verification.gap

    def summary_dict(self) -> dict:
        """The JSON summary printed by ``factorize solve --json``."""
        k, N = self.workload.shape
        return {
            "workload": self.workload.spec,
            "fingerprint": self.workload.fingerprint(),
            "shape": [k, N],
            "norm": self.norm,
            "eta": self.eta,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "gap": self.gap,
            "residual": self.verification.residual,
            "verified": self.verification.passed,
            "seconds": self.seconds,
            "kron_factors": len(self.factorization.R_factors),
            "method": "+".join(sorted({s.method for s in self.solves})),
            "solves": [s.to_dict() for s in self.solves],
        }


def solve(workload: Workload | str, norm: Norm = "gamma_f", *, eta: float | None = None,  # noqa: C901 (counted allow-list)
          method: Method = "auto", options: SolverOptions | None = None,
          gap_tol: float = DEFAULT_GAP_TOL,
          residual_tol: float = DEFAULT_RESIDUAL_TOL) -> CertifiedFactorization | MarginalSolution:
    """Optimal γ_F / γ₂ / approximate-γ₂ factorization of ``workload`` with a verified certificate.

    Marginal workloads (``auto`` or ``algebra``) return a ``planner.marginal_optimum.MarginalSolution``:
    its strategy lives in the algebra of attribute subsets, with no dense factors.

    ``method``: ``auto`` (default), ``dual`` (the specialised solvers only), ``sdp`` (the
    generic cvxpy SDP only; ``options`` picks its back-end) or ``algebra`` (marginal
    workloads). Raises a ``solvers.SolverError`` subclass when a solve fails, stalls or
    times out, ``CertificateInvalidError`` when the re-check fails and
    ``CertificateGapError`` when the certified relative gap exceeds ``gap_tol``.
    """
    start = time.perf_counter()
    options = options or SolverOptions()
    W = parse_workload(workload) if isinstance(workload, str) else workload
    if norm not in NORMS:
        raise PlannerError(f"unknown norm {norm!r}; expected one of {', '.join(NORMS)}")
    if (norm == "approx_gamma_2") != (eta is not None):
        raise PlannerError("--eta is required with approx_gamma_2 and meaningless otherwise")
    if method not in METHODS:
        raise PlannerError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if norm == "approx_gamma_2" and method == "dual":
        raise PlannerError("method 'dual' solves γ_F and γ₂; approximate γ₂ uses 'low-rank' or "
                         "'sdp' (or 'auto')")
    if method == "low-rank" and norm != "approx_gamma_2":
        raise PlannerError("method 'low-rank' solves approximate γ₂ (--norm approx_gamma_2)")
    if method in ("auto", "sdp"):
        require_backend(options)  # a back-end asked for must exist, even if auto never needs it
    if method in ("auto", "algebra") and norm != "approx_gamma_2":
        from factorize.planner.marginal_algebra import marginal_family
        from factorize.planner.marginal_optimum import solve_marginals

        family = marginal_family(W)
        if family is not None and (method == "algebra" or W.shape[1] > ALGEBRA_MIN_CELLS):
            return solve_marginals(W, norm, gap_tol=gap_tol)
    if method == "algebra":
        raise PlannerError("method 'algebra' needs a marginal workload (a stack of Kronecker "
                         "products of identities and all-ones rows) and norm gamma_f or gamma_2")

    leaves = [W] if norm == "approx_gamma_2" else kron_leaves(W)
    by_fingerprint: dict[str, tuple[Factorization, tuple, FactorSolve, Verification]] = {}
    order: list[str] = []
    for leaf in leaves:
        fp = leaf.fingerprint()
        order.append(fp)
        if fp in by_fingerprint:
            f, wit, rep, leaf_check = by_fingerprint[fp]
            by_fingerprint[fp] = (f, wit, FactorSolve(**{**rep.__dict__, "uses": rep.uses + 1}),
                                  leaf_check)
            continue
        opts = options.remaining(time.perf_counter() - start)
        by_fingerprint[fp] = _solve_leaf(leaf.dense(), norm, eta, method, opts, residual_tol,
                                         gap_target=_leaf_gap_target(gap_tol, len(leaves)),
                                         structure=leaf)

    fact = kron_compose([by_fingerprint[fp][0] for fp in order])
    parts = [by_fingerprint[fp][1] for fp in order]
    witness: Witness
    if norm == "gamma_f":
        witness = GammaFWitness(q=tuple(p[0] for p in parts))
    elif norm == "gamma_2":
        witness = Gamma2Witness(p=tuple(p[0] for p in parts), q=tuple(p[1] for p in parts))
    else:
        witness = parts[0][0]
    cert = Certificate(norm=norm, factorization=fact, witness=witness, eta=eta)
    # one leaf: its own check (the same verify on the same dense matrix) is the certificate's
    check = (by_fingerprint[order[0]][3] if len(leaves) == 1
             else verify(cert, W, residual_tol=residual_tol))
    if not check.passed:
        raise CertificateInvalidError("the certificate failed verification: " + check.summary())
    solves = tuple(by_fingerprint[fp][2] for fp in dict.fromkeys(order))
    if not check.gap <= gap_tol:
        raise CertificateGapError(
            f"certified relative gap {check.gap:.3g} exceeds the requested {gap_tol:g} "
            f"(lower {check.lower:.10g}, upper {check.upper:.10g}) with "
            + ", ".join(sorted({_describe(s) for s in solves}))
            + "; try another --method or --solver, a longer --time-limit, or loosen --gap-tol")
    return CertifiedFactorization(workload=W, norm=norm, eta=eta, certificate=cert,
                                  verification=check, solves=solves,
                                  seconds=time.perf_counter() - start)


#: What solving one leaf returns: its factorization, witness parts, report and its verify().
_LeafResult = tuple[Factorization, tuple, FactorSolve, Verification]

#: One SDP attempt of :func:`_solve_dense`: factorization, witness parts, primal route, solve
#: info, certified gap, back-end tolerance and the verify() it was certified by.
_Attempt = tuple[Factorization, tuple, str, SolveInfo, float, float, Verification]


def _radius(eta: float | None) -> float:
    """The entrywise radius η of approximate γ₂ (:func:`solve` requires it with that norm)."""
    if eta is None:
        raise PlannerError("approx_gamma_2 needs the entrywise radius eta")
    return eta


def _describe(s: FactorSolve) -> str:
    if s.method in ("dual", "low-rank"):
        return f"the {s.method} solver ({s.iterations} iterations)"
    return f"the {s.backend} SDP at tolerance {s.eps:g}"


def _solve_leaf(W: np.ndarray, norm: Norm, eta: float | None, method: Method, opts: SolverOptions,
                residual_tol: float, gap_target: float,
                structure: Workload | None = None) -> _LeafResult:
    """One dense factor by the chosen method (``_solve_unit_leaf``), solved at unit scale.

    The norms are homogeneous — ``ν(cW) = c ν(W)``, and ``W = R·A`` iff ``cW = (cR)·A`` with
    the same dual witness (the lower bounds are linear in W, and in η for approximate γ₂) —
    while the solvers' tolerances are absolute. So the leaf is solved as ``W·2^(−e)`` with
    ``max|W·2^(−e)| ∈ [½, 1)`` (an exact scaling), R is scaled back by ``2^e`` (exact) and the
    certificate re-checked against W itself. (A random 6×5 workload of entries up to 30 missed
    the gap target by 4% unscaled and reaches 2e-7 scaled.)

    ``structure``: the workload W is the dense matrix of, when there is one; the checks then
    take its γ_F lower bound from the structure (``certificate.verify``).
    """
    from factorize.numerics import binade

    e = binade(W)
    if e == 0:
        return _solve_unit_leaf(W, norm, eta, method, opts, residual_tol, gap_target, structure)
    fact, parts, report, _ = _solve_unit_leaf(
        np.ldexp(W, -e), norm, None if eta is None else math.ldexp(eta, -e), method, opts,
        residual_tol, gap_target, _scaled_structure(structure, -e))
    fact = Factorization(tuple(np.ldexp(R, e) for R in fact.R_factors), fact.A_factors)
    check = _leaf_check(W, norm, eta, fact, parts, residual_tol, structure)
    return fact, parts, FactorSolve(**{**report.__dict__, "gap": _gap_of(check)}), check


def _scaled_structure(structure: Workload | None, e: int) -> Workload | None:
    """``2^e · structure`` as a workload (exact: a power of two), None when there is none or
    the weight is outside what ``workloads.compose`` accepts."""
    if structure is None:
        return None
    from workloads.compose import scale_workload
    from workloads.errors import WorkloadError

    try:
        return scale_workload(math.ldexp(1.0, e), structure)
    except WorkloadError:
        return None


def _solve_unit_leaf(W: np.ndarray, norm: Norm, eta: float | None, method: Method, opts: SolverOptions,
                     residual_tol: float, gap_target: float,
                     structure: Workload | None = None) -> _LeafResult:
    """One dense factor by the chosen method; ``auto`` tries the dual solver, then the SDP.

    The dual solvers handle γ_F and γ₂; approximate γ₂ goes to the SDP. In ``auto`` mode a
    dual solve that fails or misses ``gap_target`` within its budget hands over to the SDP
    with the time left; the better certified of the two results is kept.
    """
    if norm == "approx_gamma_2" and (method == "low-rank" or
                                     (method == "auto" and sum(W.shape) >= LOWRANK_MIN_SIZE)):
        return _solve_dense_lowrank(W, _radius(eta), opts, residual_tol, gap_target)
    if norm == "approx_gamma_2" or method == "sdp":
        return _solve_dense(W, norm, eta, opts, residual_tol, gap_target, structure)
    start = time.perf_counter()
    try:
        result = _solve_dense_dual(W, norm, opts, residual_tol, gap_target, structure)
    except (SolverError, CertificateInvalidError):
        if method == "dual":
            raise
        result = None
    if result is not None and (result[2].gap <= gap_target or method == "dual"):
        return result
    remaining = opts.remaining(time.perf_counter() - start)
    try:
        fallback = _solve_dense(W, norm, eta, remaining, residual_tol, gap_target, structure)
    except SolverError:
        if result is None:
            raise
        return result
    return fallback if result is None or fallback[2].gap < result[2].gap else result


def _solve_dense_dual(W: np.ndarray, norm: Norm, opts: SolverOptions, residual_tol: float,
                      gap_target: float, structure: Workload | None = None) -> _LeafResult:
    """The specialised dual solver on one dense factor, its best primal and its witness.

    The solver's own gap estimate aims at half the factor's target; the certified gap
    (``verify``, with rounding allowances) is what the report and the planner use.
    """
    start = time.perf_counter()
    target = 0.5 * gap_target
    if norm == "gamma_f":
        res = solve_gamma_f_dual(W.T @ W, W.shape[0], target_gap=target, time_limit=opts.time_limit)
        parts: tuple = (res.q,)
    else:
        res = solve_gamma_2_dual(W, target_gap=target, time_limit=opts.time_limit)
        parts = (res.p, res.q)
    candidates = {name: (lambda A=A: recovery.factorization_from_strategy(W, A))
                  for name, A in res.strategies.items()}
    route, fact = _best_candidate(W, candidates, norm, residual_tol)
    check = _leaf_check(W, norm, None, fact, parts, residual_tol, structure)
    gap = _gap_of(check)
    if opts.time_limit is not None and not gap <= gap_target and res.seconds >= opts.time_limit:
        raise SolverTimeLimitError(
            f"the dual solver reached the {opts.time_limit:g} s limit after {res.iterations} "
            f"iterations at certified gap {gap:.3g}")
    report = FactorSolve(shape=(int(W.shape[0]), int(W.shape[1])), method="dual",
                         backend="numpy", status="converged" if res.converged else "stalled",
                         seconds=time.perf_counter() - start, iterations=res.iterations,
                         primal_route=route, uses=1, eps=None, gap=gap)
    return fact, parts, report, check


def _solve_dense_lowrank(W: np.ndarray, eta: float, opts: SolverOptions, residual_tol: float,
                         gap_target: float) -> _LeafResult:
    """Approximate γ₂ by the Burer–Monteiro augmented-Lagrangian solver (``planner.lowrank``),
    which stops on its own re-checked certificate."""
    from factorize.planner.lowrank import solve_approx_gamma_2_scalable

    start = time.perf_counter()
    fact, witness, info = solve_approx_gamma_2_scalable(
        W, eta, gap_tol=gap_target, time_limit=opts.time_limit, residual_tol=residual_tol)
    report = FactorSolve(shape=(int(W.shape[0]), int(W.shape[1])), method="low-rank",
                         backend="numpy", status="converged", seconds=time.perf_counter() - start,
                         iterations=info.get("inner_iterations"), primal_route="bm-alm", uses=1,
                         eps=None, gap=info["gap"])
    return fact, (witness,), report, info["verification"]


def _solve_dense(W: np.ndarray, norm: Norm, eta: float | None, opts: SolverOptions,
                 residual_tol: float, gap_target: float,
                 structure: Workload | None = None) -> _LeafResult:
    """Solve one dense factor: (factorization, witness parts, report).

    With an explicit ``opts.eps`` this is one solve. Otherwise the back-end tolerance is
    tightened along ``TOLERANCE_SCHEDULE`` until the factor's re-checked certificate has
    relative gap ≤ ``gap_target`` (a looser solve is far cheaper for first-order back-ends,
    and the certificate, not the back-end's own residuals, decides when to stop).
    """
    schedule = (opts.eps,) if opts.eps is not None else TOLERANCE_SCHEDULE[opts.backend]
    start = time.perf_counter()
    best: _Attempt | None = None
    for i, eps in enumerate(schedule):
        step = SolverOptions(opts.backend, eps, opts.max_iters, opts.time_limit, opts.verbose)
        step = step.remaining(time.perf_counter() - start)
        try:
            fact, parts, route, info = _solve_dense_once(W, norm, eta, step, residual_tol)
        except SolverInaccurateError:
            if best is None and opts.eps is None:
                # stalled at the first tolerance: a looser one may still certify (its gap is
                # re-checked below and enforced by the caller); if none solves, the stall stands
                best = _first_looser(W, norm, eta, opts, residual_tol, start, structure)
                if best is None:
                    raise
                break
            if best is None or i == len(schedule) - 1:
                raise
            break  # the back-end cannot go tighter: keep the best certificate so far
        check = _leaf_check(W, norm, eta, fact, parts, residual_tol, structure)
        gap = _gap_of(check)
        if best is None or gap < best[4]:
            best = (fact, parts, route, info, gap, eps, check)
        if gap <= gap_target:
            break
    if best is None:  # every schedule has a tolerance: the loop solved once or raised
        raise SolverError(f"no back-end tolerance to solve at for {opts.backend}")
    fact, parts, route, info, gap, eps, check = best
    report = FactorSolve(shape=(int(W.shape[0]), int(W.shape[1])), method="sdp", backend=info.backend,
                         status=info.status, seconds=time.perf_counter() - start,
                         iterations=info.iterations, primal_route=route, uses=1,
                         eps=eps, gap=gap)
    return fact, parts, report, check


def _first_looser(W: np.ndarray, norm: Norm, eta: float | None, opts: SolverOptions,
                  residual_tol: float, start: float,
                  structure: Workload | None = None) -> _Attempt | None:
    """The first of ``LOOSER_ON_STALL[backend]`` at which the back-end solves (the best-so-far
    tuple of :func:`_solve_dense`), or None if it stalls at every one."""
    for eps in LOOSER_ON_STALL[opts.backend]:
        step = SolverOptions(opts.backend, eps, opts.max_iters, opts.time_limit, opts.verbose)
        step = step.remaining(time.perf_counter() - start)
        try:
            fact, parts, route, info = _solve_dense_once(W, norm, eta, step, residual_tol)
        except SolverInaccurateError:
            continue
        check = _leaf_check(W, norm, eta, fact, parts, residual_tol, structure)
        return (fact, parts, route, info, _gap_of(check), eps, check)
    return None


def _leaf_gap_target(gap_tol: float, n_leaves: int) -> float:
    """Per-factor gap so that the composed gap Π(1 + g_i) − 1 stays within ``gap_tol``.

    Upper and lower bounds multiply over the Kronecker factors, so the composed ratio is
    the product of the factors' ratios; 0.9 leaves room for the composed rounding.
    """
    return 0.9 * ((1.0 + gap_tol) ** (1.0 / n_leaves) - 1.0)


def _leaf_check(W: np.ndarray, norm: Norm, eta: float | None, fact: Factorization, parts: tuple,
                residual_tol: float, structure: Workload | None = None) -> Verification:
    """``verify`` of one factor's certificate (for a one-leaf workload it is the final one);
    with ``structure`` (the workload W is the dense matrix of) verify sees the workload, so a
    stack of Kronecker products gets its γ_F lower bound without an SVD of W."""
    witness = {"gamma_f": lambda: GammaFWitness(q=(parts[0],)),
               "gamma_2": lambda: Gamma2Witness(p=(parts[0],), q=(parts[1],)),
               "approx_gamma_2": lambda: parts[0]}[norm]()
    cert = Certificate(norm=norm, factorization=fact, witness=witness, eta=eta)
    if structure is not None and norm == "gamma_f" and tuple(structure.shape) == W.shape:
        return verify(cert, structure, residual_tol=residual_tol, dense=W)
    return verify(cert, W, residual_tol=residual_tol)


def _gap_of(check: Verification) -> float:
    """The certified relative gap, inf when the certificate does not verify."""
    return check.gap if check.passed else float("inf")


def _solve_dense_once(W: np.ndarray, norm: Norm, eta: float | None, opts: SolverOptions,
                      residual_tol: float) -> tuple[Factorization, tuple, str, SolveInfo]:
    """One SDP solve of a dense factor and the recovery of its primal and dual.

    The SDP modules (and with them cvxpy, seconds to import) are loaded here, on the first
    SDP actually solved: pure-DP and dual-solver plans never load them."""
    from solvers.sdp_approx_gamma_2 import solve_approx_gamma_2_sdp
    from solvers.sdp_gamma_2 import solve_gamma_2_sdp
    from solvers.sdp_gamma_f import solve_gamma_f_sdp

    if norm == "gamma_f":
        res_f = solve_gamma_f_sdp(W, opts)
        q = recovery.normalized_weights(res_f.diag_multipliers)
        candidates = {"gram": lambda: recovery.factorization_from_gram(W, res_f.X),
                      "weights": lambda: recovery.factorization_from_weights(W, None, q)}
        route, fact = _best_candidate(W, candidates, norm, residual_tol)
        return fact, (q,), route, res_f.info
    if norm == "gamma_2":
        res_2 = solve_gamma_2_sdp(W, opts)
        p = recovery.normalized_weights(res_2.row_multipliers)
        q = recovery.normalized_weights(res_2.col_multipliers)
        candidates = {"gram": lambda: recovery.factorization_from_gram(W, res_2.X),
                      "weights": lambda: recovery.factorization_from_weights(W, p, q)}
        route, fact = _best_candidate(W, candidates, norm, residual_tol)
        return fact, (p, q), route, res_2.info
    eta = _radius(eta)
    w_max = float(np.max(np.abs(W)))
    if eta >= w_max:
        raise PlannerError(f"eta = {eta:g} ≥ max|W_ij| = {w_max:g}: W̃ = 0 is within the radius, "
                         "so γ₂(W; η) = 0 and there is nothing to plan")
    res_a = solve_approx_gamma_2_sdp(W, eta, opts)
    radius = eta + 0.5 * residual_tol * w_max  # half of verify's slack
    fact = recovery.factorization_from_psd_blocks(W, res_a.P, radius)
    return fact, (recovery.approx_witness_from_dual(W, res_a.Y),), "psd-blocks", res_a.info


def _best_candidate(W: np.ndarray, candidates: dict, norm: Norm,
                    residual_tol: float) -> tuple[str, Factorization]:
    """The candidate with the smallest value among those with ``||W − RA||_max`` in tolerance."""
    limit = residual_tol * float(np.max(np.abs(W)))
    best: tuple[str, Factorization] | None = None
    errors = []
    for name, build in candidates.items():
        try:
            f = build()
        except (ValueError, SolverFailedError, np.linalg.LinAlgError) as exc:
            errors.append(f"{name}: {exc}")
            continue
        res = float(np.max(np.abs(W - f.R_factors[0] @ f.A_factors[0])))
        if not res <= limit:
            errors.append(f"{name}: residual {res:.3g} > {limit:.3g}")
            continue
        if best is None or f.value(norm) < best[1].value(norm):
            best = (name, f)
    if best is None:
        raise CertificateInvalidError("no primal factorization could be recovered from the "
                                      "solver output: " + "; ".join(errors))
    return best

