"""The plan layer's shared rules: what every plan kind (``factorize.kinds``) reads, writes,
builds and verifies by.

- :mod:`.files`: the container, its integrity checks, the manifest basics and typed records;
- :mod:`.manifest`: the domain, noise and guarantee sections and the interval multipliers;
- :mod:`.rules`: limits, tolerances, the lattice grid, the strategy-choice objective;
- :mod:`.checks` / :mod:`.check_record`: the verifier's shared rules and its record;
- :mod:`.records`: the typed manifest sections; :mod:`.bias`, :mod:`.embedded`,
  :mod:`.lower_bound`, :mod:`.search_record`: the parts several kinds share;
- :mod:`.build_inputs`: what every builder parses first (builder side only).

``factorize.plan.load_plan``, ``save_plan`` and ``verify_plan`` are the registry's
(``factorize.kinds``), the same functions as ``factorize.load_plan`` &c.: any plan kind.
Importing this package never imports cvxpy or a solver.
"""

from __future__ import annotations

from typing import Any

from .errors import PlanError

__all__ = ["PlanError", "load_plan", "save_plan", "verify_plan"]


def __getattr__(name: str) -> Any:  # lazy: keeps `import factorize.plan` light
    if name in ("load_plan", "save_plan", "verify_plan"):
        from factorize import kinds

        return getattr(kinds, name)
    raise AttributeError(name)
