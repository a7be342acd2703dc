"""Small plans for the plan/executor tests, built from explicit certificates (no SDP)."""

from __future__ import annotations

import numpy as np

from factorize.factorization import Factorization
from factorize.kinds.factorization.build import build_plan
from factorize.planner.certificate import Certificate, GammaFWitness
from workloads import parse_workload


def identity_certificate(spec: str) -> Certificate:
    """R = W, A = I (a valid factorization of any W) with a uniform γ_F witness."""
    W = parse_workload(spec).dense()
    N = W.shape[1]
    return Certificate("gamma_f", Factorization.dense(W, np.eye(N)), GammaFWitness((np.ones(N),)))


def small_plan(spec: str = "prefix:8", privacy: str = "epsilon=1,delta=1e-6", **kw):
    return build_plan(spec, privacy, certificate=identity_certificate(spec), **kw)


def forge_structured_plan(src, dst, edit) -> None:
    """Rewrite the structured plan ``src`` as ``dst`` after ``edit(body, arrays)``, with valid
    digests (the project's own writer): only verification stands between it and the data."""
    from factorize.io import container
    from factorize.kinds.structured.plan import FORMAT, SCHEMA_VERSION
    from factorize.plan.files import write_plan_container

    manifest, arrays = container.read(src, FORMAT, SCHEMA_VERSION)
    body = {k: v for k, v in manifest.items()
            if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    edit(body, arrays)
    write_plan_container(dst, FORMAT, SCHEMA_VERSION, body, arrays)


def structured_refusal(path) -> str:
    """Why the structured plan at ``path`` is refused (load error or failed checks); asserts
    that it is refused."""
    from factorize.kinds.structured.plan import load_structured_plan
    from factorize.kinds.structured.verify import verify_structured_plan
    from factorize.plan.errors import PlanError

    try:
        plan = load_structured_plan(path)
    except PlanError as exc:
        return f"load: {exc}"
    check = verify_structured_plan(plan)
    assert not check.passed, "the forged plan passed verification"
    return "; ".join(check.failures)
