"""SDP back-ends and the convex programs of the planner (raw solver output only).

The solvers return primal and dual matrices as the back-end produced them; turning them
into a factorization and a re-checked certificate is ``factorize.recovery`` /
``factorize.certificate``'s job, so nothing here is trusted without verification.
"""

from solvers.backends import BACKENDS, SolveInfo, SolverOptions, available_backends, mosek_available
from solvers.errors import (BackendUnavailableError, CertificateGapError, CertificateInvalidError,
                            SolverError, SolverFailedError, SolverInaccurateError, SolverTimeLimitError)
from solvers.grothendieck import GrothendieckResult, gamma_2_star, gamma_2_star_at, solve_grothendieck
from solvers.sdp_approx_gamma_2 import ApproxGamma2SDPResult, solve_approx_gamma_2_sdp
from solvers.sdp_gamma_2 import Gamma2SDPResult, solve_gamma_2_sdp
from solvers.sdp_gamma_f import GammaFSDPResult, solve_gamma_f_sdp

__all__ = [
    "BACKENDS", "SolveInfo", "SolverOptions", "available_backends", "mosek_available",
    "SolverError", "BackendUnavailableError", "SolverFailedError", "SolverInaccurateError",
    "SolverTimeLimitError", "CertificateGapError", "CertificateInvalidError",
    "solve_gamma_f_sdp", "GammaFSDPResult", "solve_gamma_2_sdp", "Gamma2SDPResult",
    "solve_approx_gamma_2_sdp", "ApproxGamma2SDPResult",
    "solve_grothendieck", "GrothendieckResult", "gamma_2_star", "gamma_2_star_at",
]
