"""The planner: from a workload to a certified factorization W = R·A.

    routes.py            solve(): method choice (dual fixed point, generic SDP, marginal
                         algebra, low-rank), per-Kronecker-factor solves, composition, verify
    recovery.py          solver output → factorization candidates and dual witnesses
    certificate.py       dual witnesses, lower bounds and the independent verify()
    strategies.py        standard strategies (histogram, W itself, b-ary trees) as exact
                         W = R·A: plan candidates and report baselines
    marginal_algebra.py  marginal workloads in the algebra of attribute subsets (P_T, λ_T)
    marginal_optimum.py  γ_F / γ₂ of marginal workloads in that algebra, with its re-check
    lowrank.py           approximate γ₂ at scale (Burer–Monteiro + augmented Lagrangian)

Importing this package loads nothing: ``certificate`` is read by the executor's plan checks,
which must not pull in a solver, so :func:`solve` is imported on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["solve"]


def __getattr__(name: str) -> Any:
    if name == "solve":
        from factorize.planner.routes import solve

        return solve
    raise AttributeError(f"module 'factorize.planner' has no attribute {name!r}")
