"""What the calibration modules (:mod:`.gaussian`, :mod:`.zcdp`, :mod:`.calibration`) share:
the certified round-up of a computed scale, the margin in log δ by which every calibration
is certified (defined here once), and the check of a δ argument."""

from __future__ import annotations

from typing import Any

from factorize.numerics import positive_number, round_up

from .guarantees import PrivacyError

# --------------------------------------------------------------------------------------------
# validation helpers


def privacy_round_up(x: float, ops: int = 2) -> float:
    """A computed privacy-critical quantity rounded up past the error of ``ops`` roundings
    (``numerics.round_up``: ×(1 + (ops+2)·2⁻⁵²), then one ulp)."""
    return round_up(x, ops)


#: Margin in log δ by which every calibration is certified: the floating-point evaluation of a
#: log δ bound (log_ndtr, log1p, a few products) is accurate to ~1e-15 absolute for the
#: parameter ranges accepted here; 1e-9 covers it with room, so δ holds for the exact value.
#: (The CKS20 conversion is evaluated as ``−α log1p(1/a)``, accurate for every α; the analytic
#: Gaussian's ``ε + log Φ(−a−b) − log Φ(a−b)`` cancels, losing about 2L·ulp(L)/ε with
#: L = ln(1/δ): within the margin for ε ≳ 1e-3, not below about ε = 1e-4 at δ = 1e-12.)
LOG_SAFETY = 1e-9


def check_delta(v: Any) -> float:
    x = positive_number("delta", v, PrivacyError)
    if not x < 1:
        raise PrivacyError(f"delta must satisfy 0 < delta < 1, got {v!r}")
    return x
