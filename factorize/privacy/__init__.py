"""Privacy layer: guarantees, sensitivities, noise calibration and exact samplers.

See docs/math.md §1 (neighbouring relations, sensitivities) and §6 (calibration, exact sampling).

- :mod:`.guarantees`: ``ApproxDP``, ``ZCDP``, ``PureDP``, ``parse_guarantee``, ``Neighbouring``.
- :mod:`.sensitivity`: L1/L2 sensitivities of a strategy matrix (dense or Kronecker factors)
  under add/remove and replace neighbours.
- :mod:`.calibration`: analytic Gaussian, zCDP, Laplace, ℓ2 K-norm calibration; ``NoiseSpec``
  and ``calibrate``; discretisation inflation for lattice releases. The Gaussian and zCDP
  calibrations live in :mod:`.gaussian` and :mod:`.zcdp` and are re-exported by it.
- :mod:`.sampling`: exact discrete Laplace / discrete Gaussian samplers (Canonne–Kamath–Steinke
  2020), ``SecureRandom`` / ``TestRandom``, and ``sample_on_grid`` for lattice releases.
"""

from .calibration import (
    KNormParams,
    NoiseSpec,
    analytic_gaussian_sigma,
    calibrate,
    classical_gaussian_sigma,
    discrete_gaussian_sigma,
    discretized_sensitivity,
    gaussian_approx_dp_holds,
    gaussian_delta,
    gaussian_log_delta,
    gaussian_sigma_threshold,
    knorm_expected_sq_norm,
    l2_ball_knorm,
    laplace_scale,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_gaussian_sigma,
    zcdp_to_approx_dp,
)
from .guarantees import (
    ZCDP,
    ApproxDP,
    Guarantee,
    Neighbouring,
    PrivacyError,
    PureDP,
    guarantee_from_dict,
    parse_guarantee,
)
from .sampling import (
    RandomSourceError,
    SecureRandom,
    TestRandom,
    add_noise,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    lattice_laplace_scale,
    lattice_sigma2,
    round_to_grid,
    sample_float_noise,
    sample_lattice,
    sample_on_grid,
    sampled_variance,
)
from .sensitivity import (
    Sensitivity,
    add_remove_sensitivity,
    column_norms,
    kron_sensitivity,
    kron_spread,
    replace_sensitivity,
    replace_sensitivity_bound,
    sensitivity,
)

__all__ = [
    # guarantees
    "PrivacyError", "Neighbouring", "ApproxDP", "ZCDP", "PureDP", "Guarantee",
    "parse_guarantee", "guarantee_from_dict",
    # sensitivity
    "Sensitivity", "column_norms", "add_remove_sensitivity", "replace_sensitivity",
    "replace_sensitivity_bound", "sensitivity", "kron_sensitivity", "kron_spread", "sampled_variance",
    # calibration
    "gaussian_delta", "gaussian_log_delta", "analytic_gaussian_sigma", "classical_gaussian_sigma",
    "zcdp_gaussian_sigma", "zcdp_to_approx_dp", "zcdp_delta", "zcdp_epsilon",
    "discrete_gaussian_sigma", "laplace_scale", "KNormParams", "l2_ball_knorm",
    "knorm_expected_sq_norm", "discretized_sensitivity", "NoiseSpec", "calibrate",
    "gaussian_approx_dp_holds", "gaussian_sigma_threshold",
    # sampling
    "RandomSourceError", "SecureRandom", "TestRandom", "bernoulli_exp", "discrete_laplace",
    "discrete_gaussian", "round_to_grid", "lattice_sigma2", "lattice_laplace_scale", "sample_on_grid", "sample_lattice",
    "sample_float_noise", "add_noise",
]
