"""Mechanism plans: everything needed to run a factorization mechanism, in one file.

- :mod:`.model`: the :class:`Plan` (workload, domain, neighbouring relation, guarantee,
  factorization + certificate, noise spec, post-processing, expected error, provenance).
- :mod:`.plan_file`: the ``.plan`` file format (safetensors + JSON manifest, SHA-256 per
  array and over the manifest); schema version and compatibility policy.
- :mod:`.checks`: verification of a loaded plan before any private data is read.
- :mod:`.build`: building a plan (needs the planner and cvxpy; imported only on demand).

Importing this package (or ``model``, ``plan_file``, ``checks``) never imports cvxpy or a solver.
"""

from .errors import PlanError
from .model import Plan

__all__ = ["Plan", "PlanError", "build_plan", "load_plan", "save_plan", "verify_plan"]


def __getattr__(name):  # lazy: keeps `import factorize.plan` light
    if name == "build_plan":
        from .build import build_plan
        return build_plan
    if name == "load_plan":  # any kind, as factorize.load_plan
        from .registry import load_any_plan
        return load_any_plan
    if name == "save_plan":
        from .plan_file import save_plan
        return save_plan
    if name == "verify_plan":
        from .checks import verify_plan
        return verify_plan
    raise AttributeError(name)
