"""The any-mechanism lower bound a plan reports next to its own error (issue 5 item 7).

A plan's certificate bounds the *factorization* mechanisms (its dual witness); this adds a
bound on *every* mechanism satisfying the plan's guarantee, from ``geometry.lower_bounds``:

* (ε, δ)-DP: the spectral bound (seed 002 §2.3.3, explicit constants), RMS error per query;
* ρ-zCDP: the same, for the (ρ + 2√(ρ ln(1/δ)), δ)-DP that ρ-zCDP implies at δ = 10⁻⁹
  (any δ gives a valid bound; this one is stated in the result);
* pure ε-DP: the spectral bound at δ = 10⁻⁹ (an ε-DP mechanism is (ε, δ)-DP for every δ) and
  the packing bound (seed 000 Lemma 7) when n is known; the larger is reported.

Only for workloads small enough to densify (N ≤ ``MAX_CELLS``); the subset search is the
module's heuristic below ``SEARCH_ENTRIES`` entries, pivoted QR above. Returns a JSON-ready
dict (value, measure, binds, bound, and for the spectral bound its ``witness``: the column
subset S and the anchor) or None. The verifier re-evaluates the bound at the stored witness
(``witness=``: one certified SVD of W_S, no search) — the bound holds for any S, so a plan
can only state the value its own witness gives.
"""

from __future__ import annotations

import math
from typing import Any

MAX_CELLS = 4096
SEARCH_ENTRIES = 200_000
IMPLIED_DELTA = 1e-9


def any_mechanism_lower_bound(W: Any, guarantee: Any, relation: str,
                              n: int | None = None, witness: Any = None) -> dict[str, Any] | None:
    """See the module docstring."""
    from factorize.geometry.lower_bounds import packing_lower_bound, spectral_lower_bound

    k, N = W.shape
    if N > MAX_CELLS:
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
                and all(isinstance(c, int) and not isinstance(c, bool) for c in witness["subset"])):
            raise ValueError("the any-mechanism bound's witness must list column indices")
        anchor = witness.get("anchor")
        best = spectral_lower_bound(Wd, eps, delta, n=n, relation=relation,
                                    subset=witness["subset"], anchor=anchor)
    else:
        best = spectral_lower_bound(Wd, eps, delta, n=n, relation=relation, method=method)
    name = "spectral (seed 002 §2.3.3, explicit constants)"
    found = {"subset": [int(c) for c in (best.subset or ())],
             "anchor": best.details.get("anchor")}
    if g.kind == "pure_dp" and n is not None:
        pack = packing_lower_bound(Wd, g.epsilon, n, relation=relation)
        if pack.value > best.value:
            best, name, note = pack, "packing (seed 000 Lemma 7, explicit constants)", ""
    out = {"value": float(best.value), "bound": name, "measure": best.measure,
           "binds": best.binds + note}
    if name.startswith("spectral"):
        out["witness"] = found
    return out
