"""Projection plans: measure, add noise, then project onto the feasible answers (not W = R·A).

Three mechanisms of issue 5 release a noisy linear *measurement* of the data and decode it by a
projection — post-processing of released values only, run inside the executor:

* ``jl`` (seed 000 Alg. 1, pure ε-DP): measurement ``T W h`` with a random ``T ∈ R^{ℓ×k}``
  (±1/√ℓ, drawn at planning time from OS randomness and stored in the plan), ℓ2-ball K-norm
  noise with ``Δ = sensitivity of TW``, decode ``ŷ = W x*``, ``x* = argmin_{x ∈ n·Δ_N}
  ‖TWx − z̃‖`` (``geometry.jl``); ℓ minimises the explicit bound ``geometry.jl_error_bound``.
* ``covariance`` (seed 000 §6): records in {±1}^d, workload ``parity:d:2`` (the off-diagonal
  second moments Σ x_a x_b), measurement = the workload itself with Gaussian (or Laplace /
  K-norm) noise; decode: the moment matrix ``n·I + offdiag(ṽ)`` projected onto
  ``{M ⪰ 0, tr M = n·d}`` by one eigendecomposition (``geometry.project_second_moment``).
* ``relaxed-projection`` (seed 001 §4): the same release, projected onto the Grothendieck
  relaxation ``n·E_d = {M ⪰ 0, diag M = n}`` ⊇ n·conv{x xᵀ} by Frank–Wolfe whose linear step is
  a MAX-CUT-type SDP (``geometry.project_to_elliptope``) — d up to 100s of attributes; the
  data are read as records (the 2^d-cell histogram is never formed).

All three need the dataset size n for the projection; it is public only under replace-one
neighbours, so these plans require ``relation="replace"`` and a public ``n`` (the executor
refuses data of another size). The file is a ``factorize.io.container`` of format
``factorize-projection-plan`` (a factorization-plan reader refuses it by format).
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model import PlanError

PROJECTION_KINDS = ("jl", "covariance", "relaxed-projection")
MOMENT_KINDS = ("covariance", "relaxed-projection")
#: Frank–Wolfe gap target, relative to the expected squared noise in the decode's space.
DECODE_GAP_FRACTION = 1e-3
DECODE_MAX_ITER = 20000


@dataclass
class ProjectionPlan:
    """A measure-noise-project plan (module docstring); pure data, numpy arrays in ``arrays``."""

    kind: str
    workload: dict[str, Any]
    domain: dict[str, Any]
    relation: str
    guarantee: dict[str, Any]
    n: int
    noise: dict[str, Any]
    decoder: dict[str, Any]
    bounds: dict[str, Any]
    expected_error: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload["shape"]
        return int(k), int(N)

    def manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "workload": dict(self.workload),
                "domain": {"attributes": list(self.domain["attributes"]),
                           "sizes": [int(s) for s in self.domain["sizes"]]},
                "neighbouring": self.relation, "guarantee": dict(self.guarantee), "n": int(self.n),
                "noise": dict(self.noise), "decoder": dict(self.decoder),
                "bounds": dict(self.bounds), "expected_error": dict(self.expected_error),
                "provenance": dict(self.provenance)}

    def summary_lines(self) -> list[str]:
        k, N = self.shape
        g, nz, b = self.guarantee, self.noise, self.bounds
        gtxt = {"approx_dp": lambda: f"(ε={g['epsilon']:g}, δ={g['delta']:g})-DP",
                "zcdp": lambda: f"ρ={g['rho']:g}-zCDP",
                "pure_dp": lambda: f"ε={g['epsilon']:g} pure DP"}[g["type"]]()
        lines = [
            f"workload    {self.workload['spec']}  ({k} queries × {N} cells)",
            f"mechanism   {self.kind}: {self.decoder['description']}",
            f"fingerprint {self.workload['fingerprint']}",
            f"guarantee   {gtxt} under {self.relation.replace('_', '/')} neighbours, public n = {self.n}",
            f"measure     m={nz['dim']} noisy coordinates; {nz['family']} scale {nz['scale']:.6g} "
            f"calibrated to {nz['sensitivity_norm']} sensitivity {nz['sensitivity']:.6g}; "
            f"sampler {nz['sampler']}",
            f"error       RMSE per query ≤ {b['upper_rmse']:.6g} ({b['upper_note']})",
        ]
        if b.get("lower_rmse") is not None:
            lines.append(f"lower bound RMSE per query ≥ {b['lower_rmse']:.6g} ({b['lower_note']})")
        if nz.get("warning"):
            lines.append(f"warning     {nz['warning']}")
        return lines


# ---------------------------------------------------------------------------------------
# the measurement and its sensitivity (shared by build, verification and the executor)


def parity_attributes(W: Any) -> int:
    """d for a ``parity:d:2`` workload (k = d(d−1)/2 rows, N = 2^d); PlanError otherwise."""
    spec = getattr(W, "spec", "") or ""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != "parity" or parts[2] != "2":
        raise PlanError(f"the {'/'.join(MOMENT_KINDS)} mechanisms release the 2-way parities "
                        f"(second moments) of ±1 records: workload parity:d:2, got {spec!r}")
    d = int(parts[1])
    if tuple(W.shape) != (d * (d - 1) // 2, 2 ** d):
        raise PlanError(f"workload {spec!r} has shape {tuple(W.shape)}, expected (d(d−1)/2, 2^d)")
    return d


def moment_sensitivity(d: int, norm: str, relation: str) -> float:
    """Sensitivity of v(x) = (x_a x_b)_{a<b}, x ∈ {±1}^d (exact, by the flip-set argument).

    add/remove: ‖v(x)‖₂ = √(d(d−1)/2), ‖v(x)‖₁ = d(d−1)/2. replace: x' = x flipped on a set S
    changes exactly the |S|(d−|S|) pairs with one end in S, each by 2, so
    Δ₂ = 2√(⌊d/2⌋⌈d/2⌉) and Δ₁ = 2⌊d/2⌋⌈d/2⌉ (maximised at |S| = ⌊d/2⌋).
    """
    pairs = d * (d - 1) // 2
    cut = (d // 2) * ((d + 1) // 2)
    if relation == "add_remove":
        return math.sqrt(pairs) if norm == "l2" else float(pairs)
    return 2.0 * math.sqrt(cut) if norm == "l2" else 2.0 * cut


def moment_matrix(v: np.ndarray, d: int, n: float) -> np.ndarray:
    """The symmetric ±1 second-moment matrix n·I + offdiag(v), v in the parity:d:2 row order
    (pairs (a, b), a < b, lexicographic — the order of ``workloads`` ``parity:d:2``)."""
    M = np.zeros((d, d))
    iu = np.triu_indices(d, 1)
    M[iu] = v
    M = M + M.T
    M[np.diag_indices(d)] = n
    return M


def moment_rmse_bound(sigma: float, d: int, n: float, linear_rmse: float, gap: float = 0.0) -> float:
    """RMSE bound per pair for both moment decoders (Gaussian noise of scale σ per pair).

    Let Z be the symmetric noise matrix (zero diagonal, σ-subgaussian entries above it), M the
    true moments and P the exact projection of M + Z onto a convex body B ∋ M contained in
    n·{X ⪰ 0, tr X = n·d}/n (both bodies are). Then ‖P − M‖_F² ≤ ⟨Z, P − M⟩ ≤
    n·d·(λ_max(Z) − λ_min(Z)) ≤ 2nd‖Z‖₂, and by the matrix Gaussian series bound (Tropp 2015,
    Thm 4.1.1, variance ‖Σ A_i²‖ = σ²(d−1)): E‖Z‖₂ ≤ σ√(2(d−1) ln(2d)). The released pairs
    are half the off-diagonal entries, so per pair E‖v̂ − v‖²/k ≤ n·d·σ√(2(d−1)ln 2d)/k; the
    projection is non-expansive toward M, so also ≤ the linear RMSE. A Frank–Wolfe iterate
    with gap g adds √(g/k) (½‖·‖_F² is 1-strongly convex: ‖X − P‖_F ≤ √(2g), half of it on
    the released pairs in squared norm).
    """
    k = d * (d - 1) // 2
    proj = n * d * sigma * math.sqrt(2.0 * (d - 1) * math.log(2.0 * d)) / k
    return min(linear_rmse, math.sqrt(proj)) + math.sqrt(max(gap, 0.0) / k)


# ---------------------------------------------------------------------------------------
# building


def build_projection_plan(workload: Any, guarantee: Any, kind: str, *, n: int,
                          relation: str = "replace", domain: Any = None,
                          noise_family: str | None = None, exact: bool = True,
                          rng: Any = None) -> ProjectionPlan:
    """A ``jl`` / ``covariance`` / ``relaxed-projection`` plan (module docstring).

    ``rng``: the randomness for T (jl); default OS randomness (``SecureRandom``) — T is public
    and data-independent, but a predictable T is not what a production plan should ship.
    """
    from factorize.privacy import Neighbouring, calibrate, parse_guarantee
    from workloads import parse_workload

    from .build import choose_grid, default_domain

    t0 = time.perf_counter()
    if kind not in PROJECTION_KINDS:
        raise PlanError(f"unknown projection mechanism {kind!r}; expected one of {PROJECTION_KINDS}")
    W = parse_workload(workload) if isinstance(workload, str) else workload
    if not W.spec:
        raise PlanError("the workload needs a spec (the plan rebuilds W from it)")
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    rel = Neighbouring.parse(relation)
    if rel.key != "replace":
        raise PlanError(f"the {kind} mechanism projects onto n·K and needs the dataset size n, "
                        "which is public only under replace-one neighbours (--neighbouring replace)")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise PlanError(f"the public dataset size n must be a positive integer, got {n!r}")
    n = int(n)
    k, N = W.shape
    arrays: dict[str, np.ndarray] = {}
    if kind == "jl":
        if g.kind != "pure_dp":
            raise PlanError("the JL mechanism is the pure ε-DP mechanism of seed 000; use "
                            "--mechanism least-squares for (ε, δ)-DP or zCDP")
        if noise_family not in (None, "l2_knorm"):
            raise PlanError("the JL mechanism uses ℓ2-ball K-norm noise (seed 000 Lemma 15)")
        from factorize.geometry.jl import (choose_projection_dim, jl_sensitivity, project_workload,
                                           sample_projection, workload_diameter)
        from factorize.privacy import SecureRandom

        Wd = W.dense()
        norms = np.linalg.norm(Wd, axis=0)
        diam = workload_diameter(Wd)
        choice = choose_projection_dim(n, g.epsilon, k, norms, diameter=diam, relation=rel.key)
        ell = int(choice.ell)
        T = sample_projection(ell, k, rng if rng is not None else SecureRandom())
        TW = project_workload(T, Wd)
        sens = jl_sensitivity(TW, rel.key)
        spec = calibrate(g, sensitivity_l2=sens, dim=ell, relation=rel, family="l2_knorm")
        arrays["T"] = T
        energy = ell * (ell + 1) * spec.scale ** 2  # E‖Z‖² of the ℓ2-ball K-norm
        gap_tol = DECODE_GAP_FRACTION * energy
        from factorize.geometry.jl import jl_error_bound

        bound = jl_error_bound(ell, n, g.epsilon, k, norms, diameter=diam, relation=rel.key,
                               fw_gap=gap_tol)
        decoder = {"method": "jl", "gap_tol": gap_tol, "max_iter": DECODE_MAX_ITER, "ell": ell,
                   "description": f"ŷ = W·argmin_(x ∈ n·Δ) ‖TWx − z̃‖ with T ∈ R^({ell}×{k}) ±1/√ℓ "
                                  "(seed 000 Alg. 1; ℓ minimises the explicit error bound)"}
        upper = min(bound.total, bound.trivial) / math.sqrt(k)
        upper_note = ("explicit JL bound (geometry.jl_error_bound), expectation over T and Z"
                      if bound.useful else "the diameter bound n·max‖w_i − w_j‖ (the JL bound is "
                      "larger at this n·ε)")
        sigma_lin = None
    else:
        d = parity_attributes(W)
        family = noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
        snorm = "l1" if family == "laplace" else "l2"
        sens = moment_sensitivity(d, snorm, rel.key)
        grid = choose_grid(sens, k, snorm) if exact and family != "l2_knorm" else None
        spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                         sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=k,
                         relation=rel, family=family)
        from .model import variance_bound

        var = variance_bound({**spec.to_dict(), "dim": k})
        sigma_lin = math.sqrt(var)
        gap_tol = DECODE_GAP_FRACTION * k * var
        if kind == "covariance":
            decoder = {"method": "spectraplex", "trace": n * d, "gap_tol": 0.0, "max_iter": 0,
                       "description": "moments n·I + offdiag(ṽ) projected onto {M ⪰ 0, tr M = n·d} "
                                      "by one eigendecomposition (seed 000 §6)"}
            gap_tol = 0.0
        else:
            decoder = {"method": "elliptope", "gap_tol": gap_tol, "max_iter": 2000,
                       "description": "moments n·I + offdiag(ṽ) projected onto the Grothendieck "
                                      "relaxation {M ⪰ 0, diag M = n} by Frank–Wolfe with a "
                                      "MAX-CUT-type SDP step (seed 001 §4)"}
        if family == "gaussian":
            upper = moment_rmse_bound(sigma_lin, d, n, sigma_lin, gap_tol)
            upper_note = ("min(linear RMSE, √(n·d·σ·√(2(d−1) ln 2d)/k)) + √(gap/k) "
                          "(plan.projection_plan.moment_rmse_bound)")
        else:
            upper = sigma_lin + math.sqrt(gap_tol / k)
            upper_note = "linear RMSE (non-expansive projection) + √(gap/k)"
    noise = spec.to_dict()
    if spec.sampler == "float":
        noise["warning"] = ("floating-point noise (Mironov 2012): not an exact sampler; "
                            "`factorize run` refuses it unless --allow-float-noise")
    dom = domain if domain is not None else default_domain(W)
    if dom.size != N:
        raise PlanError(f"the workload has N={N} cells but the domain has {dom.size}")
    lower = _lower_bound(W, g, n, kind)
    bounds = {"upper_rmse": upper, "upper_note": upper_note,
              "lower_rmse": None if lower is None else lower["value"],
              "lower_note": None if lower is None else lower["note"]}
    from factorize.io.provenance import versions

    return ProjectionPlan(
        kind=kind,
        workload={"spec": W.spec, "fingerprint": W.fingerprint(), "shape": [int(k), int(N)]},
        domain={"attributes": list(dom.attributes), "sizes": [int(s) for s in dom.sizes]},
        relation=rel.key, guarantee=g.to_dict(), n=n, noise=noise, decoder=decoder,
        bounds=bounds,
        expected_error={"rmse_bound": upper, "linear_rmse": sigma_lin},
        arrays=arrays,
        provenance={"versions": versions(), "mechanism": kind,
                    "plan_seconds": time.perf_counter() - t0,
                    "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")},
    )


def _lower_bound(W: Any, g: Any, n: int, kind: str) -> dict[str, Any] | None:
    """A lower bound on any mechanism's RMSE (``plan.lower_bound``), with a note; or None."""
    from .lower_bound import any_mechanism_lower_bound

    b = any_mechanism_lower_bound(W, g, "replace", n)
    return None if b is None else {"value": b["value"], "note": f"{b['bound']}; {b['binds']}"}
