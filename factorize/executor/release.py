"""Running a plan: verification, data, exact noise, answers with standard errors and 95% CIs.

Order of operations in :func:`run_plan` (nothing private is touched before step 3):

1. ``plan_file.load_plan`` (digests, schema) and ``checks.verify_plan`` (workload, W = RA,
   sensitivity recomputed, noise re-derived: an under-noised plan is refused);
2. a ``"float"`` sampler is refused unless ``allow_float_noise``;
3. the histogram h is read (``data.load_histogram``; ``DataError`` on any bad input);
4. ``y = A h`` (Kronecker products factor by factor), released as ``γ(round(y/γ) + Y)`` with Y
   exact discrete Gaussian / Laplace integers (``privacy.sample_on_grid``), randomness from
   the OS (``SecureRandom``) — or ``TestRandom(seed)`` in test mode, whose outputs are all
   marked ``test_mode: true`` / NOT PRIVATE;
5. estimates ``R·ỹ``; standard error ``√v·‖r_i‖`` with v the variance bound of the noise
   *actually sampled* (the lattice parameter is rounded up by ≤ 2⁻¹⁵ relative); 95% interval
   ``estimate ± (c·se + b_i)`` where c = 1.959963984540054 for Gaussian noise (normal
   approximation; the discrete Gaussian has variance ≤ σ² and is σ-subgaussian), c = √20 for
   Laplace / K-norm (Chebyshev: valid for any noise with that variance), and
   ``b_i = (γ/2)‖r_i‖₁`` bounds the deterministic rounding bias of a lattice release;
6. optional post-processing of the released values (``postprocess``);
7. everything is computed in memory first; the output is written atomically — all answers
   or none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.plan.model import Plan, PlanError, ci_method, ci_multiplier, row_l1_norms_R

from .kron import kron_matvec

NOT_PRIVATE = "NOT PRIVATE: produced in --seed test mode (reproducible noise)"


class ExecutionError(PlanError):
    """The plan cannot be run (refused sampler, inconsistent state)."""


@dataclass
class Release:
    estimate: np.ndarray
    std_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    metadata: dict[str, Any]
    postprocessed: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, np.ndarray]:
        cols = {"query": np.arange(self.estimate.size, dtype=np.int64), "estimate": self.estimate,
                "std_error": self.std_error, "ci_low": self.ci_low, "ci_high": self.ci_high}
        if self.postprocessed is not None:
            cols["estimate_postprocessed"] = self.postprocessed
        return cols


def noise_spec(plan: Plan):
    """The plan's noise as a ``privacy.NoiseSpec`` (unknown informational keys dropped)."""
    from factorize.privacy import NoiseSpec

    known = {"family", "scale", "sensitivity", "sensitivity_norm", "relation", "guarantee",
             "sampler", "grid", "dim", "base_sensitivity", "accounting"}
    return NoiseSpec.from_dict({k: v for k, v in plan.noise.items() if k in known})


def sampled_variance(plan: Plan) -> float:
    """Per-coordinate variance bound of the noise the sampler actually draws."""
    from factorize.privacy import lattice_laplace_scale, lattice_sigma2

    n = plan.noise
    if n["sampler"] == "discrete_gaussian":
        s2, _ = lattice_sigma2(n["scale"], n["grid"])
        return float(s2) * n["grid"] ** 2 * (1.0 + 1e-12)
    if n["sampler"] == "discrete_laplace":
        b = lattice_laplace_scale(n["scale"], n["grid"])
        return 2.0 * float(b) ** 2 * n["grid"] ** 2 * (1.0 + 1e-12)
    from factorize.plan.model import variance_bound
    return variance_bound(n)


def make_rng(seed: int | None):
    from factorize.privacy import SecureRandom, TestRandom

    return SecureRandom() if seed is None else TestRandom(seed)


def release_answers(plan: Plan, h: np.ndarray, rng: Any, *, workload: Any = None,
                    allow_float_noise: bool = False, metadata: dict[str, Any] | None = None) -> Release:
    """Steps 4–6 of the module docstring for an already verified plan and a validated h."""
    from factorize.privacy import add_noise

    fact = plan.factorization
    spec = noise_spec(plan)
    if spec.sampler not in ("discrete_gaussian", "discrete_laplace"):
        if not (spec.sampler == "float" and allow_float_noise):
            raise ExecutionError(f"the plan's sampler {spec.sampler!r} is not an exact sampler; "
                                 "refusing (pass --allow-float-noise to accept floating-point noise)")
    h = np.asarray(h, dtype=np.float64)
    if h.shape != (plan.shape[1],):
        raise ExecutionError(f"histogram of length {h.shape[0] if h.ndim else 0}, the plan needs N={plan.shape[1]}")
    _check_public_n(plan, h)
    y = kron_matvec(fact.A_factors, h)
    noisy = add_noise(y, spec, rng)
    del y
    est = kron_matvec(fact.R_factors, noisy)
    sd = math.sqrt(sampled_variance(plan))
    se = sd * fact.row_norms_R()
    bias = 0.5 * spec.grid * row_l1_norms_R(fact) if spec.grid else np.zeros_like(se)
    c = ci_multiplier(plan.noise)
    half = c * se + bias
    meta = dict(metadata or {})
    test_mode = bool(getattr(rng, "is_test_mode", False))
    meta.update({
        "test_mode": test_mode,
        "workload": plan.workload["spec"],
        "workload_fingerprint": plan.workload["fingerprint"],
        "domain": {"attributes": list(plan.domain["attributes"]),
                   "sizes": [int(s) for s in plan.domain["sizes"]]},
        "guarantee": plan.guarantee,
        "neighbouring": plan.relation,
        "noise": {"family": spec.family, "sampler": spec.sampler, "scale": spec.scale, "grid": spec.grid},
        "ci": {"level": 0.95, "method": ci_method(plan.noise), "multiplier": c,
               "rounding_bias_added": bool(spec.grid)},
        "n_queries": int(est.size),
    })
    if test_mode:
        meta["warning"] = NOT_PRIVATE
    rel = Release(estimate=est, std_error=se, ci_low=est - half, ci_high=est + half, metadata=meta)
    if plan.postprocess:
        W = workload
        if W is None:
            from workloads import parse_workload
            W = parse_workload(plan.workload["spec"])
        pp = _postprocess(plan, W, est, se)
        rel.postprocessed = pp["answers"]
        meta["postprocess"] = {k: v for k, v in pp.items() if k not in ("answers", "histogram")}
    return rel


def _check_public_n(plan: Plan, h: np.ndarray) -> None:
    """A least-squares plan with a public n (replace neighbours) runs only on data of that size."""
    post = plan.postprocess or {}
    n = post.get("n")
    if n is None:
        return
    if plan.relation != "replace":
        raise ExecutionError("the plan states a public dataset size but add/remove neighbours "
                             "(under which the size is private); refusing")
    if float(h.sum()) != float(n):
        from factorize.engines.errors import DataError
        raise DataError(f"the plan's public dataset size is n={int(n)} (replace-one neighbours); "
                        "the data has a different number of records")


def _postprocess(plan: Plan, W: Any, est: np.ndarray, se: np.ndarray) -> dict[str, Any]:
    """Run the plan's post-processing on the released estimates (never on private data)."""
    from factorize.plan.model import least_squares_rmse_bound

    from .postprocess import least_squares, nonneg_consistent

    post = plan.postprocess
    if post["method"] == "nonneg":
        return nonneg_consistent(W, est, max_iter=int(post.get("max_iter", 2000)),
                                 tol=float(post.get("tol", 1e-8)))
    if post["method"] == "least_squares":
        pp = least_squares(W, est, n=post.get("n"), gap_tol=float(post["gap_tol"]),
                           max_iter=int(post["max_iter"]))
        k = est.size
        linear_rmse = float(np.sqrt(np.mean(se * se)))
        coef = post.get("bound_coefficient")
        pp["rmse_bound"] = least_squares_rmse_bound(coef, linear_rmse, pp["n_hat"], k, pp["gap"])
        pp["rmse_bound_note"] = ("min(linear RMSE, sqrt(c·n/k)) + sqrt(2·gap/k), c from the plan "
                                 "(Gaussian noise); " + ("n public, exact" if post.get("n") is not None
                                                         else "evaluated at n̂: exact only if n̂ = n"))
        return pp
    raise ExecutionError(f"unknown post-processing {post['method']!r}")


def run_plan(plan_path: str, data_path: str, out_path: str | None = None, *, seed: int | None = None,
             allow_float_noise: bool = False, allow_extra_columns: bool = False,
             engine: str = "duckdb", ledger: str | None = None,
             dataset: str | None = None) -> Release:
    """Load + verify the plan, read the data, release, and write ``out_path`` (all or nothing).

    ``engine``: where the histogram is computed (``executor.data.load_histogram``).
    ``ledger`` / ``dataset``: charge the plan's guarantee to the dataset's privacy budget
    (``factorize.ledger``) — committed before any noise is drawn or answer written; a run
    that would exceed the budget is refused; the release is recorded once the output is in
    place. A crash after the charge loses that budget but never leaves answers without a
    charge. A test-mode run (``seed``) is never charged (its output is marked NOT PRIVATE).
    """
    from factorize.plan.checks import verify_plan
    from factorize.plan.plan_file import file_sha256, load_plan
    from workloads import Domain

    from .data import load_histogram
    from .output import output_format

    if out_path is not None:
        output_format(out_path)  # refuse a bad suffix before anything else
    plan = load_plan(plan_path)
    check = verify_plan(plan, raise_on_failure=True)
    if plan.noise["sampler"] == "float" and not allow_float_noise:
        raise ExecutionError("the plan uses floating-point noise (sampler 'float'); refusing "
                             "(pass --allow-float-noise to accept it)")
    if (ledger is None) != (dataset is None):
        raise ExecutionError("--ledger and --dataset go together")
    book = None
    if ledger is not None:
        from factorize.ledger import Ledger

        book = Ledger.open(ledger)  # refuses a missing or tampered ledger before any data is read
    domain = Domain(plan.domain["attributes"], plan.domain["sizes"])
    h = load_histogram(data_path, domain, allow_extra_columns=allow_extra_columns, engine=engine)
    _check_public_n(plan, h)  # before the charge: a refused run spends nothing
    plan_sha = file_sha256(plan_path)
    meta: dict[str, Any] = {"plan_sha256": plan_sha}
    charge = _charge(book, dataset, plan, plan_sha, seed)
    if charge is not None:
        meta["ledger"] = {"dataset": dataset, "charge_id": charge.id}
    rel = release_answers(plan, h, make_rng(seed), workload=check.workload,
                          allow_float_noise=allow_float_noise, metadata=meta)
    del h
    if out_path is not None:
        write_answers_checkpointed(out_path, rel.columns(), rel.metadata)
    if charge is not None:
        book.mark_released(charge.id, file_sha256(out_path) if out_path is not None else None)
    return rel


def _charge(book: Any, dataset: str | None, plan: Any, plan_sha: str, seed: int | None) -> Any:
    """Commit the plan's guarantee against the dataset's budget (None without a ledger or in
    test mode); the fault checkpoints bracket the commit for the crash tests."""
    from factorize.ledger.faults import checkpoint

    checkpoint("before_charge")
    if book is None or seed is not None:
        return None
    charge = book.charge(dataset, plan.guarantee, plan_sha256=plan_sha, relation=plan.relation)
    checkpoint("after_charge")
    return charge


def write_answers_checkpointed(out_path: str, columns: dict[str, np.ndarray],
                               metadata: dict[str, Any]) -> None:
    """``output.write_answers`` with the ``during_write`` / ``after_write`` fault checkpoints
    (the first fires while the temporary file is half written, before it is moved in place)."""
    from factorize.ledger.faults import checkpoint

    from .output import write_answers

    write_answers(out_path, columns, metadata, on_partial=lambda: checkpoint("during_write"))
    checkpoint("after_write")
