"""The ledger's exceptions. All three are :class:`factorize.errors.InputError` (exit code 2 at
the command line); :class:`LedgerTampered` prints as "ledger inconsistent (tampered?)".

    LedgerError         the ledger cannot be used as asked: missing, unknown dataset, a
                        guarantee type its budget cannot take, another neighbouring
                        relation, locked by another process for too long
    ├── BudgetExceeded  the charge does not fit the budget (nothing was charged)
    └── LedgerTampered  database, hash chain or anchor inconsistent: modified, rolled
                        back, deleted
"""

from __future__ import annotations

from factorize.errors import InputError


class LedgerError(InputError):
    """The ledger cannot be used as asked (missing, unknown dataset, refused guarantee type)."""


class BudgetExceeded(LedgerError):
    """The charge would take the dataset past its privacy budget (nothing was charged)."""


class LedgerTampered(LedgerError):
    """The ledger's database, chain or anchor is inconsistent: modified, rolled back, deleted."""

    cli_label = "ledger inconsistent (tampered?)"
