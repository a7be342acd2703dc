"""The privacy-budget ledger: an embedded SQLite database recording, per dataset,
every charge against its privacy budget; ``factorize run --ledger L.db --dataset NAME``
charges the plan's guarantee (committed before any noise is drawn) and records the release
once the output is in place; ``factorize budget`` creates budgets and shows / verifies a
ledger.

Modules, one job each:

* ``ledger``      :class:`Ledger` and :class:`Charge`: the operations, in order (the
  transaction protocol, what the ledger cannot detect), and :func:`~.ledger.ledger_files`;
* ``composition`` the privacy-budget arithmetic, pure (costs, exact sums, the comparison with
  the budget) and the composition theorems it relies on;
* ``replay``      what each log entry means and the state the log implies;
* ``chain``       canonical entries and the SHA-256 hash chain;
* ``storage``     SQLite: schema, connections, transactions, rows, tables vs. the log;
* ``anchor``      the anchor file ``L.db.head`` and the anchor rule;
* ``lock``        the ``flock`` on ``L.db.lock``;
* ``errors``      :class:`LedgerError`, :class:`BudgetExceeded`, :class:`LedgerTampered`;
* ``faults``      the crash-test checkpoints of the release path.

``Ledger`` and ``Charge`` are loaded on first use, so importing this package (or
``composition``) loads no database module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BudgetExceeded, LedgerError, LedgerTampered

if TYPE_CHECKING:
    from .ledger import Charge, Ledger

__all__ = ["BudgetExceeded", "Charge", "Ledger", "LedgerError", "LedgerTampered"]

_LAZY = ("Charge", "Ledger")


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import ledger

    value = getattr(ledger, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
