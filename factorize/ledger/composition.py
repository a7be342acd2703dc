"""Privacy-budget arithmetic: what a release costs against a budget, how costs add up, and
whether a total fits. Pure: exact rationals only — no I/O, no database, no clock.

**Budgets and costs.** A dataset's budget is a guarantee dict — ``pure_dp`` ε, ``approx_dp``
(ε, δ), ``zcdp`` ρ — and is tracked per component (:data:`COMPONENTS`). A release's cost
against a budget (:func:`charge_cost`):

======================  ===============  =================  ===============
release \\ budget        pure ε-DP        (ε, δ)-DP          ρ-zCDP
======================  ===============  =================  ===============
pure ε-DP               ε                (ε, 0)             ρ = ε²/2
(ε, δ)-DP               refused          (ε, δ)             refused
ρ-zCDP                  refused          refused            ρ
======================  ===============  =================  ===============

**Composition theorems relied on.** A dataset's releases compose by adding costs
componentwise (:func:`add`):

* pure ε-DP and (ε, δ)-DP — basic composition, Σε_i and Σδ_i: Dwork & Roth 2014, "The
  Algorithmic Foundations of Differential Privacy", Theorem 3.16 (Corollary 3.15 for pure DP,
  δ = 0); first shown in Dwork, Kenthapadi, McSherry, Mironov & Naor 2006, "Our Data,
  Ourselves: Privacy via Distributed Noise Generation". A pure release on an (ε, δ) budget
  costs (ε, 0): ε-DP is (ε, 0)-DP by definition.
* ρ-zCDP — Σρ_i: Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications,
  Extensions, and Lower Bounds", Lemma 2.3 (composition, adaptive). A pure release on a zCDP
  budget costs ε²/2: ε-DP implies (ε²/2)-zCDP (same paper, Proposition 1.4).
* Not used: the conversion ρ-zCDP ⇒ (ρ + 2√(ρ log(1/δ)), δ)-DP (same paper, Proposition 1.3).
  Applying it to every release and adding the ε's composes loosely (the √ term is paid per
  release); ρ adds up exactly and should be converted once, at the end — so a zCDP release on
  an (ε, δ) budget is refused (give the dataset a zCDP budget). Refused as well: zCDP or
  (ε, δ) releases on a pure budget (neither implies pure DP) and (ε, δ) releases on a zCDP
  budget ((ε, δ)-DP with δ > 0 implies no zCDP bound).
* The analyst may choose each release, and its guarantee, after seeing earlier answers, and
  the ledger stops at the budget: it is a privacy *filter*. Basic composition remains valid as
  a filter (Rogers, Roth, Ullman & Vadhan 2016, "Privacy Odometers and Filters: Pay-as-you-Go
  Composition"), and so does adding ρ's (zCDP is Rényi DP of every order α with ε(α) = ρα;
  Feldman & Zrnic 2021, "Individual Privacy Accounting via a Rényi Filter").
* Every theorem above is stated for one neighbouring relation; the ledger enforces that a
  dataset's releases share one (:mod:`factorize.ledger.replay`, :meth:`Ledger.charge`).

**Exact arithmetic.** A guarantee's numbers are taken as the decimal numbers they print as
(Python's shortest round-trip ``repr``: the float 0.1 is the decimal 0.1, :func:`exact`) and
summed exactly as rationals (:class:`fractions.Fraction`); a charge is accepted iff
``spent + cost ≤ budget`` holds exactly in every component (:func:`exceeds`). So ten charges
of ε = 0.1 fit a budget ε = 1 exactly and an eleventh does not, and no rounding can let a total
exceed its budget. (The floats differ from those decimals by less than one ulp, far inside the
calibration's conservative rounding of the noise.) ε²/2 of a decimal ε is again a finite
decimal, so every cost and total is stored as an exact decimal string (:func:`exact_str`).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .errors import LedgerError

#: A budget type → its components, in the order they are stored and printed.
COMPONENTS = {"pure_dp": ("epsilon",), "approx_dp": ("epsilon", "delta"), "zcdp": ("rho",)}

_SYMBOLS = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}


# ----------------------------------------------------------------------------- exact numbers

def exact(x: Any) -> Fraction:
    """The decimal number a guarantee's float prints as, exactly (``0.1`` → 1/10)."""
    return Fraction(repr(float(x)))


def exact_str(q: Fraction) -> str:
    """``q`` as an exact decimal string when it has one (always, for sums of decimals and
    ε²/2), else ``p/q``."""
    q = Fraction(q)
    den, k2, k5 = q.denominator, 0, 0
    while den % 2 == 0:
        den //= 2
        k2 += 1
    while den % 5 == 0:
        den //= 5
        k5 += 1
    if den != 1:
        return f"{q.numerator}/{q.denominator}"
    k = max(k2, k5)
    scaled = q.numerator * 10 ** k // q.denominator
    sign, digits = ("-" if scaled < 0 else ""), str(abs(scaled))
    if k == 0:
        return sign + digits
    digits = digits.rjust(k + 1, "0")
    return f"{sign}{digits[:-k]}.{digits[-k:]}"


def exact_dict(d: Mapping[str, Fraction]) -> dict[str, str]:
    """Components as exact decimal strings (how costs are stored and shown)."""
    return {k: exact_str(v) for k, v in d.items()}


# ----------------------------------------------------------------------------- budgets, costs

def budget_components(budget: Mapping[str, Any]) -> dict[str, Fraction]:
    """A budget (guarantee dict) as exact components: {"epsilon": …, "delta": …} etc."""
    return {k: exact(budget[k]) for k in COMPONENTS[budget["type"]]}


def nothing_spent(budget_type: str) -> dict[str, Fraction]:
    """The zero of a budget type's components (a new dataset's spending)."""
    return {k: Fraction(0) for k in COMPONENTS[budget_type]}


def charge_cost(budget_type: str, guarantee: Mapping[str, Any]) -> dict[str, Fraction]:
    """The cost of a release with ``guarantee`` against a budget of ``budget_type`` (exact;
    the table of the module docstring), or :class:`LedgerError` when the guarantee cannot be
    charged to such a budget."""
    gt = guarantee["type"]
    if budget_type == "pure_dp":
        if gt == "pure_dp":
            return {"epsilon": exact(guarantee["epsilon"])}
        raise LedgerError(f"a {_kind_words(gt)} release cannot be charged to a pure ε-DP budget "
                          "(it does not satisfy pure DP); give the dataset an (ε, δ) "
                          + ("or zCDP budget" if gt == "zcdp" else "budget"))
    if budget_type == "approx_dp":
        if gt == "pure_dp":
            return {"epsilon": exact(guarantee["epsilon"]), "delta": Fraction(0)}
        if gt == "approx_dp":
            return {"epsilon": exact(guarantee["epsilon"]), "delta": exact(guarantee["delta"])}
        raise LedgerError("a zCDP release cannot be charged to an (ε, δ) budget: converting "
                          "each ρ to (ε, δ) at every charge and adding the ε's composes loosely "
                          "(ρ adds up exactly and should be converted once, at the end); give "
                          "the dataset a zCDP budget (--budget rho=…)")
    if budget_type == "zcdp":
        if gt == "zcdp":
            return {"rho": exact(guarantee["rho"])}
        if gt == "pure_dp":
            e = exact(guarantee["epsilon"])
            return {"rho": e * e / 2}  # ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)
        raise LedgerError("an approximate (ε, δ)-DP release cannot be charged to a zCDP budget "
                          "((ε, δ)-DP does not imply zCDP); give the dataset an (ε, δ) budget")
    raise LedgerError(f"unknown budget type {budget_type!r}")


# ----------------------------------------------------------------------------- composition

def add(spent: Mapping[str, Fraction], cost: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """``spent + cost``, componentwise and exact (the composition theorems of the module
    docstring; ``spent`` has the budget's components)."""
    return {k: spent[k] + cost[k] for k in spent}


def exceeds(total: Mapping[str, Fraction], budget: Mapping[str, Fraction]) -> bool:
    """Whether ``total`` exceeds ``budget`` in any component (exactly: equality fits)."""
    return any(total[k] > budget[k] for k in budget)


def remaining(budget: Mapping[str, Fraction],
              spent: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """What is left of ``budget`` after ``spent``, per component (exact)."""
    return {k: budget[k] - spent[k] for k in budget}


def describe(components: Mapping[str, Fraction]) -> str:
    """``ε=0.5, δ=0.000001`` (exact)."""
    return ", ".join(f"{_SYMBOLS.get(k, k)}={exact_str(v)}" for k, v in components.items())


def _kind_words(kind: str) -> str:
    return {"pure_dp": "pure ε-DP", "approx_dp": "(ε, δ)-DP", "zcdp": "zCDP"}.get(kind, kind)
