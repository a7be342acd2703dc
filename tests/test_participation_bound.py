"""The participation lower bound (``planner.participation_bound``) against feasible strategies
(it may never exceed their error), the single-participation optimum (epochs=1: the γ_F dual),
and the figures of jax_privacy's multi-epoch optimiser at n = 256, four epochs."""

from __future__ import annotations

import numpy as np
import pytest

from factorize.planner.participation_bound import lower_bound
from factorize.planner.routes import solve
from factorize.privacy.participation import Participation, participation_sensitivity
from factorize.training.certificate import bound_patterns, pattern_bound_value


def _scaled_error(W: np.ndarray, A: np.ndarray, p: Participation) -> float:
    """tr(W A⁺ A⁺ᵀ Wᵀ) · Δ² — a feasible strategy's error at unit sensitivity."""
    R = W @ np.linalg.pinv(A)
    return float(np.sum(R * R)) * participation_sensitivity(A, p).value ** 2


@pytest.mark.parametrize("key", ["epochs=1", "epochs=2", "epochs=4", "k=2,min_sep=8", "k=3,min_sep=5"])
def test_never_above_a_feasible_strategy(key):
    n = 32
    W = np.tril(np.ones((n, n)))
    p = Participation.parse(key)
    bound = lower_bound(W, p)
    single = solve("prefix:32", "gamma_f").certificate.factorization.A_factors[0]
    for A in (np.eye(n), W, single):
        assert bound.value <= _scaled_error(W, A, p) * (1 + 1e-12)


def test_one_epoch_is_the_gamma_f_optimum():
    n = 32
    W = np.tril(np.ones((n, n)))
    res = solve("prefix:32", "gamma_f")
    opt = res.verification.upper ** 2 * n  # γ_F normalised by √k
    bound = lower_bound(W, Participation.parse("epochs=1")).value
    assert bound <= opt * (1 + 1e-9)
    assert bound >= opt * (1 - 1e-4)


def test_poor_multipliers_stay_valid():
    n = 16
    W = np.tril(np.ones((n, n)))
    pats = bound_patterns(n, Participation.parse("epochs=4"))
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, c = rng.uniform(0, 3, len(pats)), rng.uniform(0, 3, len(pats))
        assert pattern_bound_value(W, pats, a, c) <= _scaled_error(W, W, Participation.parse("epochs=4"))


def test_four_epochs_at_256_sits_below_jax_privacys_optimum():
    n = 256
    W = np.tril(np.ones((n, n)))
    b = lower_bound(W, Participation.parse("epochs=4")).value
    assert 6800 < b <= 6954.1  # jax_privacy's multi-epoch optimum (the figure)
