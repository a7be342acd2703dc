"""The log replayed: what each entry means, and the state (datasets, their budgets, spending
and charges) that the entries imply. No database access — the storage side hands entries in
(:mod:`factorize.ledger.chain` checked their hashes) and compares its tables with the result.

Entries, by ``kind`` (their ``body`` fields):

* ``genesis`` — always entry 1: ``format`` (:data:`~factorize.ledger.chain.FORMAT`),
  ``ledger_id``, ``created``;
* ``dataset`` — ``name``, ``budget`` (a guarantee dict in normal form), ``relation`` (the
  neighbouring relation its releases must use, ``add_remove`` / ``replace``, or null: the
  first charge's), ``created``; a name is defined once and never changed;
* ``charge`` — ``id`` (1, 2, … in order), ``dataset``, ``guarantee``, ``cost`` (exact decimal
  strings), ``plan_sha256``, ``relation``, ``charged_at``;
* ``release`` — ``charge_id``, ``output_sha256`` (or null), ``released_at``: that charge's
  answers are in place (status only: the budget was spent by the charge).

Replaying re-derives every cost from its guarantee and the budget's type
(:func:`~factorize.ledger.composition.charge_cost`), re-adds the costs and re-checks the
budget, and checks that every charge of a dataset uses its one neighbouring relation (the
composition theorems are stated per relation). So a log whose hashes are valid but whose
content breaks a rule — written by anything but this code — is refused too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from . import composition
from .chain import FORMAT, ZERO_HASH
from .errors import LedgerError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


# ----------------------------------------------------------------------------- normal forms

def normal_guarantee(g: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A guarantee (or budget) dict in normal form; :class:`LedgerError` if it is no dict,
    ``PrivacyError`` (a ``ValueError``) on bad values."""
    from factorize.privacy.guarantees import guarantee_from_dict

    if not isinstance(g, Mapping):
        raise LedgerError(f"{what} must be a guarantee dict, got {type(g).__name__}")
    return guarantee_from_dict(g).to_dict()  # PrivacyError (a ValueError) on bad values


def normal_relation(relation: Any) -> str:
    """A neighbouring relation's stored key (``add_remove`` / ``replace``)."""
    from factorize.privacy.guarantees import Neighbouring

    return Neighbouring.parse(relation).key


def check_sha(value: Any, what: str) -> str:
    """``value`` if it is a SHA-256 in lowercase hex, else :class:`LedgerError`."""
    if not isinstance(value, str) or not _SHA256.match(value):
        raise LedgerError(f"{what} must be 64 lowercase hex digits (a SHA-256), got {value!r}")
    return value


# ----------------------------------------------------------------------------- the state

@dataclass
class Dataset:
    """A dataset as the log defines it, with what its charges have spent."""

    name: str
    budget: dict[str, Any]
    relation: str | None
    created: str
    seq: int
    spent: dict[str, Fraction] = field(default_factory=dict)
    charges: list[int] = field(default_factory=list)

    def effective_relation(self, charges: Mapping[int, dict[str, Any]]) -> str | None:
        """The neighbouring relation its releases must use: its own, or else its first
        charge's (None before any charge)."""
        if self.relation is not None:
            return self.relation
        return charges[self.charges[0]]["relation"] if self.charges else None


@dataclass
class State:
    """The log replayed."""

    ledger_id: str = ""
    created: str = ""
    hashes: list[str] = field(default_factory=list)     # hashes[i-1] = hash of entry i
    datasets: dict[str, Dataset] = field(default_factory=dict)
    charges: dict[int, dict[str, Any]] = field(default_factory=dict)
    anchor: str = "current"

    @property
    def count(self) -> int:
        return len(self.hashes)

    @property
    def head(self) -> str:
        return self.hashes[-1] if self.hashes else ZERO_HASH


def apply(state: State, seq: int, kind: str, obj: dict[str, Any]) -> None:  # noqa: C901 (counted allow-list)
    """Replay entry ``seq`` onto ``state`` (the caller appends its hash). :class:`LedgerError`
    (or ``ValueError`` / ``KeyError`` / ``TypeError``) when it breaks a rule."""
    if seq == 1:
        if kind != "genesis" or obj.get("format") != FORMAT:
            raise LedgerError(f"first entry is not a {FORMAT} genesis entry")
        state.ledger_id, state.created = str(obj["ledger_id"]), str(obj["created"])
        return
    if kind == "dataset":
        name = obj["name"]
        if name in state.datasets or not isinstance(name, str):
            raise LedgerError(f"dataset {name!r} defined twice")
        b = normal_guarantee(obj["budget"], "budget")
        if b != obj["budget"]:
            raise LedgerError("budget not in normal form")
        rel = obj["relation"]
        if rel is not None and normal_relation(rel) != rel:
            raise LedgerError("neighbouring relation not in normal form")
        state.datasets[name] = Dataset(name, b, rel, str(obj["created"]), seq,
                                       spent=composition.nothing_spent(b["type"]))
    elif kind == "charge":
        cid = obj["id"]
        if cid != len(state.charges) + 1:
            raise LedgerError(f"charge id {cid} out of sequence")
        ds = state.datasets.get(obj["dataset"])
        if ds is None:
            raise LedgerError(f"charge to an undefined dataset {obj['dataset']!r}")
        g = normal_guarantee(obj["guarantee"], "guarantee")
        if g != obj["guarantee"]:
            raise LedgerError("guarantee not in normal form")
        cost = composition.charge_cost(ds.budget["type"], g)
        if obj["cost"] != composition.exact_dict(cost):
            raise LedgerError(f"recorded cost {obj['cost']} is not the guarantee's cost "
                              f"{composition.exact_dict(cost)}")
        rel = obj["relation"]
        want = ds.effective_relation(state.charges)
        if normal_relation(rel) != rel or (want is not None and rel != want):
            raise LedgerError(f"neighbouring relation {rel!r} inconsistent with the dataset's")
        check_sha(obj["plan_sha256"], "plan_sha256")
        ds.spent = composition.add(ds.spent, cost)
        if composition.exceeds(ds.spent, composition.budget_components(ds.budget)):
            raise LedgerError(f"dataset {ds.name!r}'s charges exceed its budget")
        ds.charges.append(cid)
        state.charges[cid] = {
            "id": cid, "dataset": ds.name, "guarantee": g, "cost": cost,
            "plan_sha256": obj["plan_sha256"], "relation": rel, "status": "charged",
            "output_sha256": None, "charged_at": str(obj["charged_at"]), "released_at": None,
            "event_seq": seq, "release_seq": None}
    elif kind == "release":
        c = state.charges.get(obj["charge_id"])
        if c is None or c["status"] != "charged":
            raise LedgerError(f"release of charge {obj['charge_id']!r}, which is not an "
                              "unreleased charge")
        if obj["output_sha256"] is not None:
            check_sha(obj["output_sha256"], "output_sha256")
        c.update(status="released", output_sha256=obj["output_sha256"],
                 released_at=str(obj["released_at"]), release_seq=seq)
    else:
        raise LedgerError(f"unknown entry kind {kind!r}")
