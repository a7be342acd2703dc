"""factorize: optimal factorization mechanisms for differentially private linear queries.

The public API — everything a user needs, imported on first use (``import factorize`` loads
neither numpy nor a solver; the executor's names never load a solver):

* workloads and domains: :func:`parse_workload` (the spec language), :class:`Domain`,
  :class:`DomainSchema` (raw values ↔ codes ↔ labels, ``docs/schema.md``);
* guarantees: :class:`ApproxDP`, :class:`ZCDP`, :class:`PureDP`, :func:`parse_guarantee`;
* planning: :func:`solve` (γ_F / γ₂ / approximate γ₂ with a re-checked certificate),
  :func:`build_plan` (dense / Kronecker plans, every mechanism), :func:`build_structured_plan`
  (marginals at any domain size, unions of Kronecker products, marginal weights);
* plan files: :func:`save_plan`, :func:`load_plan` (any plan kind), :func:`verify_plan`
  (from first principles; a ``PlanCheck`` with ``passed`` and ``failures``);
* releasing: :func:`run` (verify → charge → measure → noise → write, all or nothing);
* errors: :class:`FactorizeError`, the root of every error raised on purpose, with
  :class:`InputError` (bad input: a ``ValueError``) and :class:`SolverError` under it.

Everything else is internal by convention; ARCHITECTURE.md maps the modules.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name → (module, attribute).
_PUBLIC = {
    "parse_workload": ("workloads.spec", "parse_workload"),
    "Domain": ("workloads.domain", "Domain"),
    "DomainSchema": ("workloads.schema", "DomainSchema"),
    "read_domain": ("workloads.schema", "read_domain"),
    "ApproxDP": ("factorize.privacy.guarantees", "ApproxDP"),
    "ZCDP": ("factorize.privacy.guarantees", "ZCDP"),
    "PureDP": ("factorize.privacy.guarantees", "PureDP"),
    "parse_guarantee": ("factorize.privacy.guarantees", "parse_guarantee"),
    "solve": ("factorize.planner.routes", "solve"),
    "build_plan": ("factorize.kinds.factorization.build", "build_plan"),
    "build_structured_plan": ("factorize.kinds.structured.build", "build_structured_plan"),
    "save_plan": ("factorize.kinds", "save_plan"),
    "load_plan": ("factorize.kinds", "load_plan"),
    "verify_plan": ("factorize.kinds", "verify_plan"),
    "run": ("factorize.executor.pipeline", "run"),
    "FactorizeError": ("factorize.errors", "FactorizeError"),
    "InputError": ("factorize.errors", "InputError"),
    "SolverError": ("factorize.errors", "SolverError"),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    target = _PUBLIC.get(name)
    if target is None:
        raise AttributeError(f"module 'factorize' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
