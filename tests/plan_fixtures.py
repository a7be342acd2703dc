"""Small plans for the plan/executor tests, built from explicit certificates (no SDP)."""

from __future__ import annotations

import numpy as np

from factorize.factorization import Factorization
from factorize.plan.build import build_plan
from factorize.planner.certificate import Certificate, GammaFWitness
from workloads import parse_workload


def identity_certificate(spec: str) -> Certificate:
    """R = W, A = I (a valid factorization of any W) with a uniform γ_F witness."""
    W = parse_workload(spec).dense()
    N = W.shape[1]
    return Certificate("gamma_f", Factorization.dense(W, np.eye(N)), GammaFWitness((np.ones(N),)))


def small_plan(spec: str = "prefix:8", privacy: str = "epsilon=1,delta=1e-6", **kw):
    return build_plan(spec, privacy, certificate=identity_certificate(spec), **kw)
