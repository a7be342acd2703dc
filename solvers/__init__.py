"""SDP back-ends and the convex programs of the planner (raw solver output only).

The solvers return primal and dual matrices as the back-end produced them; turning them
into a factorization and a re-checked certificate is ``factorize.planner.recovery`` /
``factorize.planner.certificate``'s job, so nothing here is trusted without verification.
"""

import importlib
from typing import Any

#: Where each public name lives; submodules are imported on first use, so that
#: ``import solvers.errors`` (the executor's error mapping) and ``solvers.options`` (the
#: planner's options and back-end check) never load cvxpy.
_HOME = {
    **dict.fromkeys(("BACKENDS", "SolveInfo", "SolverOptions", "require_backend"), "solvers.options"),
    **dict.fromkeys(("available_backends",), "solvers.backends"),
    "mosek_available": "solvers.mosek_licence",
    **dict.fromkeys(("BackendUnavailableError", "CertificateGapError", "CertificateInvalidError",
                     "SolverError", "SolverFailedError", "SolverInaccurateError",
                     "SolverInputError", "SolverTimeLimitError"), "solvers.errors"),
    **dict.fromkeys(("GrothendieckResult", "gamma_2_star", "gamma_2_star_at",
                     "solve_grothendieck"), "solvers.grothendieck"),
    **dict.fromkeys(("ApproxGamma2SDPResult", "solve_approx_gamma_2_sdp"), "solvers.sdp_approx_gamma_2"),
    **dict.fromkeys(("Gamma2SDPResult", "solve_gamma_2_sdp"), "solvers.sdp_gamma_2"),
    **dict.fromkeys(("GammaFSDPResult", "solve_gamma_f_sdp"), "solvers.sdp_gamma_f"),
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


__all__ = [
    "BACKENDS", "SolveInfo", "SolverOptions", "require_backend", "available_backends",
    "mosek_available",
    "SolverError", "BackendUnavailableError", "SolverFailedError", "SolverInaccurateError",
    "SolverTimeLimitError", "CertificateGapError", "CertificateInvalidError", "SolverInputError",
    "solve_gamma_f_sdp", "GammaFSDPResult", "solve_gamma_2_sdp", "Gamma2SDPResult",
    "solve_approx_gamma_2_sdp", "ApproxGamma2SDPResult",
    "solve_grothendieck", "GrothendieckResult", "gamma_2_star", "gamma_2_star_at",
]
