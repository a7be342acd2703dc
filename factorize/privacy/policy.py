"""Guarantees that protect nothing are refused unless the caller overrides explicitly.

A plan may state any valid guarantee, but some protect nobody: ε = 10³⁰⁰ bounds the
likelihood ratio by e^(10³⁰⁰); δ = 0.99 allows the mechanism to publish a record outright
with probability 0.99; and for a dataset of n records any δ ≥ 1/n allows publishing one
random record in full. The documented ceilings:

* pure and approximate DP: ``ε ≤ EPSILON_CEILING = 10`` (e¹⁰ ≈ 22,026);
* zCDP: ``ρ ≤ RHO_CEILING = 10`` (the (ε, 10⁻⁶)-DP it implies has ε ≈ 33.5);
* approximate DP: ``δ ≤ DELTA_CEILING = 10⁻³`` when planning and verifying, and ``δ < 1/n``
  for the data at hand when running (the one data-dependent refusal: it reveals only that n
  is at least 1/δ, and it happens before any budget is charged or noise drawn).

``factorize plan | verify | run`` and the local client apply them; ``--allow-weak-guarantee``
(``allow_weak=True``) releases anyway, and says so in the output's metadata.
"""

from __future__ import annotations

from typing import Any

from .guarantees import PrivacyError

EPSILON_CEILING = 10.0
RHO_CEILING = 10.0
DELTA_CEILING = 1e-3
OVERRIDE_FLAG = "--allow-weak-guarantee"


def guarantee_problems(guarantee: Any, n: int | None = None) -> list[str]:
    """Why ``guarantee`` protects too little (empty when it is within the ceilings)."""
    out: list[str] = []
    kind = getattr(guarantee, "kind", None)
    if kind in ("pure_dp", "approx_dp") and guarantee.epsilon > EPSILON_CEILING:
        out.append(f"ε = {guarantee.epsilon:g} is above the ceiling ε ≤ {EPSILON_CEILING:g}")
    if kind == "zcdp" and guarantee.rho > RHO_CEILING:
        out.append(f"ρ = {guarantee.rho:g} is above the ceiling ρ ≤ {RHO_CEILING:g}")
    if kind == "approx_dp":
        if guarantee.delta > DELTA_CEILING:
            out.append(f"δ = {guarantee.delta:g} is above the ceiling δ ≤ {DELTA_CEILING:g}")
        if n is not None and n > 0 and guarantee.delta * n >= 1.0:
            out.append(f"δ = {guarantee.delta:g} is not below 1/n for this dataset (a δ ≥ 1/n "
                       "allows publishing a record outright)")
    return out


def check_guarantee(guarantee: Any, *, n: int | None = None, allow_weak: bool = False) -> None:
    """Raise :class:`PrivacyError` for a guarantee beyond the ceilings (module docstring),
    unless ``allow_weak``."""
    problems = guarantee_problems(guarantee, n)
    if problems and not allow_weak:
        raise PrivacyError("the guarantee protects too little: " + "; ".join(problems)
                           + f" (documented ceilings; pass {OVERRIDE_FLAG} to release anyway)")
