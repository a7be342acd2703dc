"""Verification of a plan before any private data is read (issue #3, item 6).

``verify_plan(plan)`` re-derives from the arrays and the public parameters everything the
release depends on, trusting none of the numbers stored in the manifest:

1. file integrity (digests, shapes, finite values, schema version) — already enforced by
   ``plan_file.load_plan``; recorded here;
2. the workload rebuilt from its spec has the recorded fingerprint and shape, and the
   domain has N cells;
3. ``W ≈ R·A``: exactly, factor by factor, for Kronecker plans and small dense ones; for a
   large dense plan (k·N·m above ``EXACT_RESIDUAL_FLOPS``) by 24 random ±1 probes x,
   ``|(W − RA)x|_i ≤ limit + rounding allowance`` — a residual entry above the limit passes
   one probe with probability ≤ 1/2, so all probes with probability ≤ 2⁻²⁴;
4. the sensitivity of A recomputed from its columns under the plan's neighbouring relation
   (``privacy.kron_sensitivity``) must not exceed the one the noise was calibrated to;
5. the noise scale re-derived from the privacy parameters (``privacy.calibrate`` with the
   plan's grid and m) must not exceed the plan's: an under-noised plan is refused with both
   numbers in the message; grid inflation and sampler are re-checked;
6. the expected-error summary is recomputed;
7. optionally (``certificate=True``; ``factorize verify`` does it) the certificate's lower
   and upper bounds are recomputed by ``certificate.verify`` (one SVD per factor).

Only numpy, the workloads package and ``factorize.privacy`` (imported on call) are used;
no cvxpy, no solver.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.certificate import DEFAULT_RESIDUAL_TOL

from .model import Plan, PlanError, expected_error

#: Above this many multiply-adds (k·N·m) a dense residual is checked by random probes.
EXACT_RESIDUAL_FLOPS = 2e9
N_PROBES = 24
_U = 2.0 ** -53


class PlanRefused(PlanError):
    """Verification failed: the plan must not be run."""


@dataclass
class PlanCheck:
    passed: bool
    checks: list[dict[str, Any]]
    required_scale: float | None = None
    recomputed_sensitivity: float | None = None
    workload: Any = None
    seconds: float = 0.0
    certificate: dict[str, Any] | None = None
    failures: list[str] = field(default_factory=list)

    def record(self, name: str, ok: bool, detail: str) -> bool:
        """Append one check's outcome; returns ``ok``."""
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        return bool(ok)

    def finish(self, t0: float, raise_on_failure: bool) -> "PlanCheck":
        """Collect the failures and the time; raise :class:`PlanRefused` when asked and any failed."""
        self.failures = [f"{c['name']}: {c['detail']}" for c in self.checks if not c["ok"]]
        self.passed = not self.failures
        self.seconds = time.perf_counter() - t0
        if raise_on_failure and not self.passed:
            raise PlanRefused("plan refused: " + "; ".join(self.failures))
        return self

    def lines(self) -> list[str]:
        return [f"{'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in self.checks]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": self.checks, "required_scale": self.required_scale,
                "recomputed_sensitivity": self.recomputed_sensitivity, "seconds": self.seconds,
                "certificate": self.certificate, "failures": self.failures}


def verify_plan(plan: Plan, *, certificate: bool = False, raise_on_failure: bool = False,
                workload: Any = None) -> PlanCheck:
    """Run the checks of the module docstring; ``raise_on_failure`` raises :class:`PlanRefused`."""
    from factorize.privacy import (Neighbouring, PrivacyError, calibrate, guarantee_from_dict,
                                   kron_sensitivity)

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    checks, record = out.checks, out.record
    record("file", True, "schema version, array digests, manifest digest, shapes, finite values")
    fact = plan.factorization
    m = fact.strategy_rows
    k, N = plan.shape

    # 2. workload
    W = rebuild_workload(plan.workload, workload, record)
    out.workload = W

    # 3. residual
    if W is not None and checks[-1]["ok"]:
        try:
            ok, detail = _residual_check(W, fact, plan.certificate.eta or 0.0)
        except Exception as exc:  # noqa: BLE001
            ok, detail = False, f"cannot compare W with R·A: {exc}"
        record("W = R·A", ok, detail)

    # 4–5. sensitivity and noise
    noise = plan.noise
    try:
        guarantee = guarantee_from_dict(plan.guarantee)
        relation = Neighbouring.parse(plan.relation)
        if noise.get("relation") != relation.key:
            raise PrivacyError(f"the noise was calibrated for {noise.get('relation')!r} neighbours, "
                               f"the plan states {relation.key!r}")
        snorm = "l1" if noise["family"] == "laplace" else "l2"
        if noise.get("sensitivity_norm") != snorm:
            raise PrivacyError(f"{noise['family']} noise needs {snorm} sensitivity")
        sens = kron_sensitivity(list(fact.A_factors), snorm, relation)
        out.recomputed_sensitivity = sens.value
        ok = sens.value <= float(noise["base_sensitivity"])
        record("sensitivity", ok,
               f"{snorm} sensitivity of A under {relation.key} recomputed from its columns: "
               f"{sens.value:.12g} ({'exact' if sens.exact else 'upper bound'}); the plan states "
               f"{float(noise['base_sensitivity']):.12g}")
        grid = noise.get("grid")
        if noise["sampler"] == "float":
            if grid is not None:
                raise PrivacyError("a float sampler has no grid")
        elif not (isinstance(grid, (int, float)) and math.isfinite(grid) and grid > 0):
            raise PrivacyError(f"sampler {noise['sampler']} needs a positive grid")
        if noise.get("dim") != m:
            raise PrivacyError(f"the noise was calibrated for dim={noise.get('dim')}, A has m={m} rows")
        required = calibrate(guarantee, sensitivity_l2=sens.value if snorm == "l2" else None,
                             sensitivity_l1=sens.value if snorm == "l1" else None,
                             grid=grid if noise["sampler"] != "float" else None, dim=m,
                             relation=relation, family=noise["family"])
        out.required_scale = required.scale
        if required.sampler != noise["sampler"]:
            raise PrivacyError(f"the guarantee needs sampler {required.sampler!r}, the plan has "
                               f"{noise['sampler']!r}")
        scale = float(noise["scale"])
        record("noise", scale >= required.scale,
               f"{noise['family']} scale {scale:.12g} vs {required.scale:.12g} required by "
               f"{guarantee} at {noise['sensitivity_norm']} sensitivity {required.sensitivity:.12g}"
               + (f" (grid γ={grid:.6g} inflates {sens.value:.6g} → {required.sensitivity:.6g})"
                  if grid else "")
               + ("" if scale >= required.scale else
                  f": UNDER-NOISED — the plan's scale {scale:.12g} is smaller than the required "
                  f"{required.scale:.12g}"))
        if float(noise["sensitivity"]) < required.sensitivity:
            record("noise sensitivity", False,
                   f"the plan states sensitivity {noise['sensitivity']:.12g} < recomputed "
                   f"{required.sensitivity:.12g}")
    except (PrivacyError, KeyError, TypeError, ValueError) as exc:
        record("noise", False, f"cannot re-derive the noise: {exc}")

    # 6. expected error
    try:
        exp = expected_error(fact, noise)
        stored = plan.expected_error
        keys = ("per_query_std_max", "rmse", "expected_max_bound")
        ok = all(math.isclose(float(stored.get(key, math.nan)), exp[key], rel_tol=1e-9) for key in keys)
        record("expected error", ok, f"per-query std ≤ {exp['per_query_std_max']:.6g}, RMSE "
               f"{exp['rmse']:.6g}, E[max] ≤ {exp['expected_max_bound']:.6g}"
               + ("" if ok else " (the plan states different values)"))
    except (KeyError, TypeError, ValueError, PlanError) as exc:
        record("expected error", False, f"cannot recompute: {exc}")

    # 7. certificate
    if certificate and W is not None and checks[1]["ok"]:
        from factorize.certificate import verify
        try:
            v = verify(plan.certificate, W)
            out.certificate = {"upper": v.upper, "lower": v.lower, "gap": v.gap, "residual": v.residual,
                               "passed": v.passed}
            record("certificate", v.passed, v.summary())
        except Exception as exc:  # noqa: BLE001
            record("certificate", False, f"cannot re-verify: {exc}")

    return out.finish(t0, raise_on_failure)


def rebuild_workload(stated: dict[str, Any], workload: Any, record: Any) -> Any:
    """The workload rebuilt from the plan's spec (or the one given) if its fingerprint and
    shape match the plan's; records the check ``"workload"``; None when it cannot be used."""
    from workloads import parse_workload

    k, N = stated["shape"]
    try:
        W = workload if workload is not None else parse_workload(stated["spec"])
        same = W.fingerprint() == stated["fingerprint"] and tuple(W.shape) == (k, N)
        record("workload", same, f"{stated['spec']!r} rebuilt: shape {tuple(W.shape)}, "
               f"fingerprint {'matches' if same else 'DIFFERS from the plan'}")
        return W
    except Exception as exc:  # noqa: BLE001 - a bad spec is a refused plan
        record("workload", False, f"cannot rebuild {stated.get('spec')!r}: {exc}")
        return None


def _residual_check(W: Any, fact, eta: float) -> tuple[bool, str]:
    from factorize.factorization import kron_residual_max
    from factorize.structure import kron_leaves

    leaves = kron_leaves(W)
    if fact.is_kron:
        if len(leaves) != len(fact.R_factors):
            return False, (f"the plan has {len(fact.R_factors)} Kronecker factors, the workload "
                           f"{len(leaves)}")
        Wf = [leaf.dense() for leaf in leaves]
        if [w.shape for w in Wf] != [(R.shape[0], A.shape[1]) for R, A in zip(fact.R_factors, fact.A_factors)]:
            return False, "factor shapes differ from the workload's Kronecker factors"
        res = kron_residual_max(Wf, fact)
        wmax = math.prod(float(np.max(np.abs(w))) for w in Wf)
        limit = DEFAULT_RESIDUAL_TOL * max(1.0, wmax) + eta
        return res <= limit, f"max|W − RA| ≤ {res:.3g} (limit {limit:.3g}, exact, per factor)"
    R, A = fact.R_factors[0], fact.A_factors[0]
    k, m = R.shape
    N = A.shape[1]
    if k * N * m <= EXACT_RESIDUAL_FLOPS:
        Wd = W.dense()
        res = float(np.max(np.abs(Wd - R @ A)))
        limit = DEFAULT_RESIDUAL_TOL * max(1.0, float(np.max(np.abs(Wd)))) + eta
        return res <= limit, f"max|W − RA| = {res:.3g} (limit {limit:.3g}, exact)"
    # random ±1 probes (see module docstring)
    from factorize.privacy import SecureRandom

    bits = SecureRandom().words((N * N_PROBES + 63) // 64)
    signs = np.unpackbits(bits.view(np.uint8))[: N * N_PROBES].reshape(N, N_PROBES)
    X = signs.astype(np.float64) * 2.0 - 1.0
    WX = np.asarray(W.matvec(X), dtype=np.float64)
    D = np.abs(WX - R @ (A @ X))
    absW = W.dense() if k * N <= 5e7 else None
    wmax = float(np.max(np.abs(absW))) if absW is not None else float(np.max(np.abs(WX)))
    rowW = np.abs(absW).sum(axis=1) if absW is not None else np.abs(WX).max(axis=1) * N
    allowance = 4.0 * (N + m + 2) * _U * (rowW + np.abs(R) @ np.abs(A).sum(axis=1))
    limit = DEFAULT_RESIDUAL_TOL * max(1.0, wmax) + eta
    worst = float(np.max(D - allowance[:, None]))
    ok = worst <= limit
    return ok, (f"{N_PROBES} random ±1 probes: max|(W − RA)x| − rounding allowance = {worst:.3g} "
                f"(limit {limit:.3g}; a residual above the limit escapes with probability ≤ 2^-{N_PROBES})")
