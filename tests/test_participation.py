"""Multi-participation sensitivity (``privacy.participation``) against brute force: every
pattern enumerated, the exact elliptope maximum where it has a closed form (two participations:
``X_ss + X_tt + 2|X_st|``), all-equal contributions where X ≥ 0, and closed forms for the
identity and prefix-sum strategies."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation, participation_sensitivity


def _patterns_min_sep(n: int, k: int, b: int):
    for size in range(1, k + 1):
        for pat in itertools.combinations(range(n), size):
            if all(y - x >= b for x, y in itertools.pairwise(pat)):
                yield list(pat)


def _exact_two(X: np.ndarray, pats) -> float:
    """max over patterns of at most two steps of the elliptope maximum (closed form)."""
    best = 0.0
    for p in pats:
        if len(p) == 1:
            best = max(best, X[p[0], p[0]])
        else:
            s, t = p
            best = max(best, X[s, s] + X[t, t] + 2 * abs(X[s, t]))
    return best


def test_parse():
    assert Participation.parse("epochs=4") == Participation("epochs", 4)
    assert Participation.parse("k=3, min_sep=16").key == "k=3,min_sep=16"
    for bad in ("epochs=0", "k=2", "min_sep=3", "epochs=two"):
        with pytest.raises(PrivacyError):
            Participation.parse(bad)


def test_identity_strategy_is_root_k():
    for p in (Participation("epochs", 4), Participation("min_sep", 4, 3)):
        s = participation_sensitivity(np.eye(16), p)
        assert s.exact and s.value == pytest.approx(2.0, rel=1e-14) and s.lower <= 2.0 <= s.value


def test_prefix_strategy_epochs_closed_form():
    n, K = 12, 3
    P = np.tril(np.ones((n, n)))
    X = P.T @ P  # X_st = n − max(s, t)
    b = n // K
    exact = max(sum(n - max(s, t) for s in range(i, n, b) for t in range(i, n, b)) for i in range(b))
    got = participation_sensitivity(P, Participation("epochs", K))
    assert got.exact and got.lower <= math.sqrt(exact) <= got.value
    assert got.value == pytest.approx(math.sqrt(exact), rel=1e-13)
    assert np.all(X >= 0)


@pytest.mark.parametrize("seed", range(6))
def test_two_participations_match_the_elliptope_maximum(seed):
    rng = np.random.default_rng(seed)
    n = 8
    A = rng.normal(size=(10, n))  # X has negative entries: |X_st| is still exact for K = 2
    X = A.T @ A
    ep = participation_sensitivity(A, Participation("epochs", 2))
    pats = [[i, i + n // 2] for i in range(n // 2)]
    assert ep.value == pytest.approx(math.sqrt(_exact_two(X, pats)), rel=1e-12)
    ms = participation_sensitivity(A, Participation("min_sep", 2, 3))
    exact = math.sqrt(_exact_two(X, _patterns_min_sep(n, 2, 3)))
    assert ms.value >= exact * (1 - 1e-14)  # an upper bound (each step's best partner)
    assert not ms.exact or ms.value == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_min_sep_bound_covers_every_pattern(seed):
    rng = np.random.default_rng(100 + seed)
    n, K, B = 10, 3, 2
    A = np.abs(rng.normal(size=(12, n)))  # X ≥ 0: all-equal contributions attain each pattern's value
    X = A.T @ A
    exact = max(X[np.ix_(p, p)].sum() for p in _patterns_min_sep(n, K, B))
    got = participation_sensitivity(A, Participation("min_sep", K, B))
    assert got.lower <= math.sqrt(exact) * (1 + 1e-12)
    assert got.value >= math.sqrt(exact) * (1 - 1e-14)
    if got.exact:
        assert got.value == pytest.approx(math.sqrt(exact), rel=1e-12)


def test_epochs_need_divisible_steps():
    with pytest.raises(PrivacyError, match="divisible"):
        participation_sensitivity(np.eye(10), Participation("epochs", 3))
