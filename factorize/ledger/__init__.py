"""The privacy-budget ledger (issue 8): an embedded SQLite database recording, per dataset,
every charge against its privacy budget; ``factorize run --ledger L.db --dataset NAME``
charges the plan's guarantee (committed before any noise is drawn) and records the release
once the output is in place; ``factorize budget`` creates budgets and shows / verifies a
ledger. Composition, exact arithmetic, transactions, the hash chain and its anchor file, and
what they cannot detect: :mod:`factorize.ledger.ledger`. ``faults``: the crash-test
checkpoints of the release path."""

from .ledger import BudgetExceeded, Charge, Ledger, LedgerError, LedgerTampered

__all__ = ["BudgetExceeded", "Charge", "Ledger", "LedgerError", "LedgerTampered"]
