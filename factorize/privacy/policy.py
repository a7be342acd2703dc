"""Guarantees that protect nothing are refused unless the caller overrides explicitly.

A plan may state any valid guarantee, but some protect nobody: ε = 10³⁰⁰ bounds the
likelihood ratio by e^(10³⁰⁰); δ = 0.99 allows the mechanism to publish a record outright
with probability 0.99; and for a dataset of n records any δ ≥ 1/n allows publishing one
random record in full. The documented ceilings:

* pure and approximate DP: ``ε ≤ EPSILON_CEILING = 10`` (e¹⁰ ≈ 22,026);
* zCDP: ``ρ ≤ RHO_CEILING = 10`` (the (ε, 10⁻⁶)-DP it implies has ε ≈ 33.5);
* approximate DP: ``δ ≤ DELTA_CEILING = 10⁻³`` when planning and verifying, and ``δ < 1/n``
  for the data at hand when running.

What the ``δ < 1/n`` refusal reveals. It is the one refusal of a valid plan that depends on
the records, through their number n alone, and it is not private: it happens before any
budget is charged or noise drawn, so it costs nothing, and whoever sees it learns one bit --
whether ``δ·n ≥ 1``, i.e. ``n ≥ 1/δ``. Its message states δ (the plan's, public) and never n.
One bit per run is not nothing: an author whose plans, with different δ, are all run on the
same data can bisect n in about log₂ n runs. A data holder who must keep n from plans'
authors should treat the check's outcome as public and run only plans whose δ is below
``1/n_min`` for a public lower bound ``n_min`` on the size (then the check can never refuse,
and refusals reveal nothing); ``factorize data check`` (for the data holder only, NOT
private) prints n.

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
            # never n itself: the refusal is free, so it reveals one bit only (module docstring)
            out.append(f"δ = {guarantee.delta:g} is not below 1/n for this dataset (a δ ≥ 1/n "
                       "allows publishing a record outright; n is not shown)")
    return out


def check_guarantee(guarantee: Any, *, n: int | None = None, allow_weak: bool = False) -> None:
    """Raise :class:`PrivacyError` for a guarantee beyond the ceilings (module docstring),
    unless ``allow_weak``."""
    problems = guarantee_problems(guarantee, n)
    if problems and not allow_weak:
        raise PrivacyError("the guarantee protects too little: " + "; ".join(problems)
                           + f" (documented ceilings; pass {OVERRIDE_FLAG} to release anyway)")
