"""The any-mechanism lower bound a plan reports next to its own error.

A plan's certificate bounds the *factorization* mechanisms (its dual witness); this adds a
bound on *every* mechanism satisfying the plan's guarantee, from ``geometry.lower_bounds``:

* (ε, δ)-DP: the spectral bound (Nikolov, Talwar & Zhang 2013, §2.3.3, explicit constants), RMS error per query;
* ρ-zCDP: the same, for the (ρ + 2√(ρ ln(1/δ)), δ)-DP that ρ-zCDP implies at δ = 10⁻⁹
  (any δ gives a valid bound; this one is stated in the result);
* pure ε-DP: the spectral bound at δ = 10⁻⁹ (an ε-DP mechanism is (ε, δ)-DP for every δ) and
  the packing bound (Nikolov 2023, Lemma 7) when n is known; the larger is reported.

Only for workloads small enough to densify (N ≤ ``MAX_CELLS`` and k·N within
``workloads.DEFAULT_MAX_DENSE_ENTRIES``: a Kronecker product of a few thousand cells may have
millions of queries, and its plan is built factor by factor); the subset search is the
module's heuristic below ``SEARCH_ENTRIES`` entries, pivoted QR above. Returns a JSON-ready
dict (value, measure, binds, bound, and for the spectral bound its ``witness``: the column
subset S and the anchor) or None. The verifier re-evaluates the bound at the stored witness
(``witness=``: one certified SVD of W_S, no search) — the bound holds for any S, so a plan
can only state the value its own witness gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from factorize.numerics import is_int

from .errors import PlanError
from .records import AnyMechanismBound, LaplaceFactorizationBound, SpectralWitness

MAX_CELLS = 4096
SEARCH_ENTRIES = 200_000
IMPLIED_DELTA = 1e-9


def any_mechanism_lower_bound(W: Any, guarantee: Any, relation: str,
                              n: int | None = None, witness: Any = None) -> AnyMechanismBound | None:
    """See the module docstring."""
    from factorize.geometry.lower_bounds import packing_lower_bound, spectral_lower_bound
    from workloads import DEFAULT_MAX_DENSE_ENTRIES

    k, N = W.shape
    if N > MAX_CELLS or k * N > DEFAULT_MAX_DENSE_ENTRIES:
        return None
    Wd = W.dense()
    method = "auto" if k * N <= SEARCH_ENTRIES else "qr"
    g = guarantee
    if g.kind == "approx_dp":
        eps, delta, note = g.epsilon, g.delta, ""
    elif g.kind == "zcdp":
        delta = IMPLIED_DELTA
        eps = g.rho + 2.0 * math.sqrt(g.rho * math.log(1.0 / delta))
        note = f" (via the ({eps:.4g}, {delta:g})-DP that ρ-zCDP implies)"
    else:
        eps, delta, note = g.epsilon, IMPLIED_DELTA, f" (as ({g.epsilon:g}, {IMPLIED_DELTA:g})-DP)"
    if witness is not None:
        if not (isinstance(witness, dict) and isinstance(witness.get("subset"), list)
                and all(is_int(c) for c in witness["subset"])):
            raise PlanError("the any-mechanism bound's witness must list column indices")
        anchor = witness.get("anchor")
        best = spectral_lower_bound(Wd, eps, delta, n=n, relation=relation,
                                    subset=witness["subset"], anchor=anchor)
    else:
        best = spectral_lower_bound(Wd, eps, delta, n=n, relation=relation, method=method)
    name = "spectral (seed 002 §2.3.3, explicit constants)"
    found: SpectralWitness = {"subset": [int(c) for c in (best.subset or ())],
                              "anchor": best.details.get("anchor")}
    if g.kind == "pure_dp" and n is not None:
        pack = packing_lower_bound(Wd, g.epsilon, n, relation=relation)
        if pack.value > best.value:
            best, name, note = pack, "packing (seed 000 Lemma 7, explicit constants)", ""
    out: AnyMechanismBound = {"value": float(best.value), "bound": name, "measure": best.measure,
                              "binds": best.binds + note}
    if name.startswith("spectral"):
        out["witness"] = found
    return out


#: Where the pure-DP factorization bound comes from (stated in every plan that carries it).
LAPLACE_BOUND = ("Laplace factorization bound: ‖A‖₁→₁ ≥ ‖A‖₁→₂, so Laplace noise of scale "
                 "‖A‖₁→₁/ε gives per-query RMSE ≥ √2·γ_F(W)/ε (worst-query std ≥ √2·γ₂(W)/ε) "
                 "for every W = R·A; γ the certificate's re-verified lower bound")


def laplace_factorization_bound(norm: str, certified_lower: float, guarantee: Any,
                                relation: str) -> LaplaceFactorizationBound | None:
    """A re-checkable lower bound for pure-DP factorization mechanisms.

    A factorization mechanism ``W = R·A`` with Laplace noise calibrated to the add/remove L1
    sensitivity ``Δ₁ = ‖A‖₁→₁ = max_x ‖A e_x‖₁`` has per-coordinate variance ``2Δ₁²/ε²``, so
    its per-query RMSE is ``√2·Δ₁·‖R‖_F/(ε√k)`` and its worst per-query std
    ``√2·Δ₁·‖R‖_{2→∞}/ε``. Since ``‖a‖₁ ≥ ‖a‖₂`` for every column, ``Δ₁ ≥ ‖A‖₁→₂``, and by
    the definitions of γ_F and γ₂ (docs/math.md §2.2: ``γ_F(W) = min k^{-1/2}‖R‖_F‖A‖₁→₂``,
    ``γ₂(W) = min ‖R‖_{2→∞}‖A‖₁→₂``) every such mechanism has

        RMSE ≥ √2·γ_F(W)/ε,        max_i std_i ≥ √2·γ₂(W)/ε.

    With ``certified_lower`` ≤ γ (the certificate's dual bound, re-verified by
    ``certificate.verify``) the value ``√2·L/ε`` rounded down is a bound for the mechanism
    class. It is tight when an optimal strategy has 1-sparse columns (the identity workload:
    √2/ε). The lattice release only adds noise (its scale is calibrated to an inflated
    sensitivity), so a plan's stated error is above the bound too. Add/remove neighbours and
    γ_F / γ₂ objectives only (None otherwise: the replace L1 sensitivity of a difference of
    columns has no such comparison with γ).
    """
    from factorize.numerics import round_down

    if guarantee.kind != "pure_dp" or relation != "add_remove" or norm not in ("gamma_f", "gamma_2"):
        return None
    if not (math.isfinite(certified_lower) and certified_lower > 0):
        return None
    value = round_down(math.sqrt(2.0) * float(certified_lower) / float(guarantee.epsilon), 4)
    return {"value": value, "measure": "rmse" if norm == "gamma_f" else "per_query_std_max",
            "bound": LAPLACE_BOUND,
            "binds": "every factorization mechanism W = R·A with Laplace noise at this ε "
                     "(add/remove neighbours)"}


def laplace_bound(norm: str, certified_lower: float, guarantee: Any, relation: str,
                  family: str) -> LaplaceFactorizationBound | None:
    """:func:`laplace_factorization_bound` for a plan whose noise family is ``family`` (the
    bound is stated only where the plan adds Laplace noise)."""
    if family != "laplace":
        return None
    return laplace_factorization_bound(norm, certified_lower, guarantee, relation)


def laplace_bound_problems(stated: Any, recomputed: LaplaceFactorizationBound | None,
                           expected_error: Mapping[str, Any]) -> list[str]:
    """What is wrong with a plan's stated Laplace factorization bound (empty: nothing), given
    the bound re-derived from its re-verified certificate. A plan may state none (a plan
    written before this bound existed); one it states must equal the re-derived one, and the plan's own error
    must not be below it."""
    if stated is None:
        return []
    if recomputed is None or not isinstance(stated, dict):
        return [f"laplace_factorization stated where none applies: {str(stated)[:120]}"]
    from .check_record import same_number

    if not (same_number(stated.get("value"), recomputed["value"])
            and all(stated.get(key) == recomputed[key] for key in ("measure", "bound", "binds"))):
        return [f"laplace_factorization {stated.get('value')!r} ({stated.get('measure')!r}) ≠ "
                f"{recomputed['value']!r} ({recomputed['measure']})"]
    own = expected_error.get(recomputed["measure"])
    if not (isinstance(own, (int, float)) and own >= recomputed["value"] * (1.0 - 1e-12)):
        return [f"the plan's {recomputed['measure']} {own!r} is below the Laplace factorization "
                f"bound {recomputed['value']!r}"]
    return []


def laplace_bound_line(bound: LaplaceFactorizationBound | None, expected_error: Mapping[str, Any]) -> str | None:
    """The ``inspect`` line of a plan's Laplace factorization bound, with the plan's gap."""
    if not bound:
        return None
    own = expected_error[bound["measure"]]
    return (f"pure DP     {bound['measure']} ≥ {bound['value']:.6g} for every factorization "
            f"mechanism with Laplace noise at this ε; this plan {own:.6g} (gap "
            f"{own / bound['value'] - 1.0:.3g}; ‖A‖₁→₁ ≥ ‖A‖₁→₂ and the certificate's lower bound)")
