"""Running a factorization plan: verification, data, exact noise, answers with error bars.

Order of operations of a run (``executor.pipeline``, the one pipeline of every plan kind;
``executor.session`` frames it: nothing is charged that is not released, nothing released that
is not charged):

1. the answers file is opened (writable, not the data, plan or ledger), ``--seed`` with
   ``--ledger`` refused, the ledger opened;
2. ``codec.load_plan`` (digests, schema) and ``kinds.factorization.verify.verify_plan`` — the workload, W = RA,
   the sensitivity of the measured strategy (certified), the noise, every accuracy claim and
   the certificate: an under-noised or inconsistent plan is refused; a ``"float"`` sampler
   is refused unless ``allow_float_noise``;
3. the histogram h is read (``data.load_histogram``; ``DataError`` on any bad input); the
   guarantee's δ must be below 1/n (``privacy.policy``); the measurement
   ``q = round(Ã h / γ)`` is computed exactly (``privacy.lattice``) — all before the charge;
4. the charge; then ``γ(q + Y)`` with Y exact discrete Gaussian / Laplace integers
   (``privacy.sample_lattice``), randomness from the OS (``SecureRandom``) — or
   ``TestRandom(seed)`` in test mode, whose outputs are all marked NOT PRIVATE;
5. estimates ``R·ỹ``; standard error ``√v·‖r_i‖`` with v the variance bound of the noise
   *actually sampled*; 95% interval ``estimate ± (c·se + (γ/2)‖r_i‖₁ + β·n⁺)``: c the
   two-sided quantile at 0.049 (normal for Gaussian noise — the discrete Gaussian has
   variance ≤ σ² and is σ-subgaussian —, Chebyshev otherwise), the rounding bias, and the
   reconstruction bias β·n⁺ with n⁺ a bound on n from the release that fails with
   probability ≤ 10⁻³ (``plan.bias``): coverage ≥ 95% by the union bound;
6. optional post-processing of the released values (``postprocess``), bounded in iterations
   and wall-clock time;
7. the answers are written whole or not at all, then the release recorded.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from factorize.kinds.factorization.plan import Plan, row_l1_norms_R
from factorize.kron import kron_matvec
from factorize.plan.check_record import PlanCheck
from factorize.plan.manifest import domain_manifest
from factorize.structured.families import ONE_ESTIMATE

from .linear_release import AnswerColumn, LinearMeasurement, Release, release
from .session import POSTPROCESS_SECONDS, ExecutionError


def make_rng(seed: int | None) -> Any:
    from factorize.privacy import SecureRandom, TestRandom

    return SecureRandom() if seed is None else TestRandom(seed)


def measure(plan: Plan, h: np.ndarray) -> np.ndarray:
    """The exact measurement of a verified plan: ``round(Ã h/γ)`` (int64 or Python ints,
    ``privacy.lattice``) for a lattice sampler, ``fl(Ã h)`` for a float sampler."""
    from factorize.privacy.lattice import lattice_image, measured_factors

    fact = plan.factorization
    h = np.asarray(h)
    if h.shape != (plan.shape[1],):
        raise ExecutionError(f"histogram of length {h.shape[0] if h.ndim else 0}, the plan needs N={plan.shape[1]}")
    if h.dtype.kind == "f":  # counts given as floats: exact non-negative integers only
        if not (np.all(np.isfinite(h)) and np.all(h == np.rint(h)) and np.all(h >= 0)
                and (h.size == 0 or float(h.max()) < 2.0 ** 53)):
            raise ExecutionError("the histogram must hold non-negative integer counts")
        h = h.astype(np.int64)
    if plan.noise.sampler == "float":
        return kron_matvec(measured_factors(fact.A_factors), h.astype(np.float64))
    if plan.noise.grid is None:  # verified plans with an exact sampler state their lattice grid
        raise ExecutionError("the plan's exact sampler has no lattice grid")
    return lattice_image(fact.A_factors, h, plan.noise.grid)


def release_dense(plan: Plan, h: np.ndarray, rng: Any, *, workload: Any = None,
                  allow_float_noise: bool = False, metadata: dict[str, Any] | None = None,
                  check: PlanCheck | None = None, measurement: np.ndarray | None = None,
                  postprocess_seconds: float = POSTPROCESS_SECONDS) -> Release:
    """The dense / Kronecker kind's release half: steps 4–6 of the module docstring for a
    verified plan (``check``: its PlanCheck; verified here when not given) and a validated h,
    through the one release (``executor.linear_release``). Not a public way to release: it
    charges no ledger — ``executor.pipeline.run`` is (tests call it for Monte Carlo)."""
    from factorize.plan.bias import n_upper

    from .linear_release import refuse_float_noise

    if check is None:  # privacy and the claims the release uses (the certificate is not one)
        from factorize.kinds.factorization.verify import verify_plan

        check = verify_plan(plan, raise_on_failure=True, workload=workload, certificate=False)
    fact = plan.factorization
    spec = plan.noise
    refuse_float_noise(spec.sampler, allow_float_noise)
    if measurement is None:
        check_public_n(plan, np.asarray(h))
        measurement = measure(plan, h)
    beta = check.established_number("beta")
    n_bound, n_weights = check.established("n_bound"), check.established("n_weights")
    mu, b_l1 = check.established_number("mu"), check.established_number("b_l1")
    public_n = (plan.postprocess or {}).get("n")

    def n_plus(noisy: np.ndarray, est: np.ndarray, sd: float) -> float:
        n = n_upper(n_bound, n_weights, est, fact.R_factors, mu, beta, b_l1, sd, spec.family, spec.grid)
        return min(n, float(public_n)) if public_n is not None else n

    norms = fact.row_norms_R()
    m = LinearMeasurement(
        values=measurement, noise=spec, reconstruct=lambda y: kron_matvec(fact.R_factors, y),
        row_norms=lambda lo, hi: norms[lo:hi], row_l1_norms=lambda: row_l1_norms_R(fact), beta=beta,
        n_upper=n_plus, n_bound=n_bound,
        describe={"workload": plan.workload["spec"], "estimates": ONE_ESTIMATE,
                  "workload_fingerprint": plan.workload["fingerprint"],
                  "domain": domain_manifest(plan.domain), "guarantee": plan.guarantee.to_dict(),
                  "neighbouring": plan.relation.key})
    rel = release(m, rng, allow_float_noise=allow_float_noise, metadata=metadata)
    est, se, meta = rel.estimate, rel.std_error, rel.metadata
    if plan.postprocess:
        W = check.workload if check.workload is not None else workload
        try:
            pp = _postprocess(plan, W, est, se, time.monotonic() + postprocess_seconds)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            # post-processing reads released values only; if it fails, the release stands
            meta["postprocess"] = {"method": plan.postprocess.get("method"), "failed": str(exc)[:300]}
            return rel
        answers = np.asarray(pp["answers"], dtype=np.float64)
        if answers.shape == est.shape and np.all(np.isfinite(answers)):
            rel.postprocessed = answers
            meta["postprocess"] = {k: v for k, v in pp.items() if k not in ("answers", "histogram")}
        else:
            meta["postprocess"] = {"method": plan.postprocess.get("method"),
                                   "failed": "non-finite answers"}
    return rel


def check_public_n(plan: Plan, h: np.ndarray) -> None:
    """A least-squares plan with a public n (replace neighbours) runs only on data of that size."""
    post = plan.postprocess or {}
    n = post.get("n")
    if n is None:
        return
    if plan.relation.key != "replace":
        raise ExecutionError("the plan states a public dataset size but add/remove neighbours "
                             "(under which the size is private); refusing")
    if float(h.sum()) != float(n):
        from factorize.engines.errors import DataError
        raise DataError(f"the plan's public dataset size is n={int(n)} (replace-one neighbours); "
                        "the data has a different number of records")


def _postprocess(plan: Plan, W: Any, est: np.ndarray, se: np.ndarray | AnswerColumn,
                 deadline: float) -> dict[str, Any]:
    """Run the plan's (verified) post-processing on the released estimates (never on private
    data), stopping at ``deadline`` (``time.monotonic()``) if it has not converged."""
    from factorize.kinds.factorization.plan import least_squares_rmse_bound

    from .postprocess import integer_consistent, least_squares, nonneg_consistent

    post = plan.postprocess
    if post is None:
        raise ExecutionError("the plan states no post-processing")
    if post["method"] == "nonneg":
        return nonneg_consistent(W, est, max_iter=int(post["max_iter"]), tol=float(post["tol"]),
                                 deadline=deadline)
    if post["method"] == "integer":
        return integer_consistent(W, est, max_iter=int(post["max_iter"]), tol=float(post["tol"]),
                                  deadline=deadline)
    if post["method"] == "least_squares":
        pp = least_squares(W, est, n=post.get("n"), gap_tol=float(post["gap_tol"]),
                           max_iter=int(post["max_iter"]), deadline=deadline)
        k = est.size
        linear_rmse = float(np.sqrt(np.mean(se * se)))
        coef = post.get("bound_coefficient")
        pp["rmse_bound"] = least_squares_rmse_bound(coef, linear_rmse, pp["n_hat"], k, pp["gap"])
        pp["rmse_bound_note"] = ("min(linear RMSE, sqrt(c·n/k)) + sqrt(2·gap/k), c from the plan "
                                 "(Gaussian noise); " + ("n public, exact" if post.get("n") is not None
                                                         else "evaluated at n̂: exact only if n̂ = n"))
        return pp
    raise ExecutionError(f"unknown post-processing {post['method']!r}")


