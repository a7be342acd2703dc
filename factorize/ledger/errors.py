"""The ledger's exceptions, all :class:`factorize.errors.InputError`: exit code 2 at the command
line, but 4 for :class:`BudgetExceeded` and 5 for :class:`LedgerTampered`, which prints as
"ledger inconsistent (tampered?)" — so a script can tell a full budget from a broken ledger.

    LedgerError         the ledger cannot be used as asked: missing, unknown dataset, a
                        guarantee type its budget cannot take, another neighbouring
                        relation, locked by another process for too long
    ├── BudgetExceeded  the charge does not fit the budget (nothing was charged)
    └── LedgerTampered  database, hash chain or anchor inconsistent: modified, rolled
                        back, deleted
"""

from __future__ import annotations

from factorize.errors import EXIT_BUDGET, EXIT_TAMPERED, InputError


class LedgerError(InputError):
    """The ledger cannot be used as asked (missing, unknown dataset, refused guarantee type)."""


class BudgetExceeded(LedgerError):
    """The charge would take the dataset past its privacy budget (nothing was charged)."""

    exit_code = EXIT_BUDGET


class LedgerTampered(LedgerError):
    """The ledger's database, chain or anchor is inconsistent: modified, rolled back, deleted."""

    exit_code = EXIT_TAMPERED
    cli_label = "ledger inconsistent (tampered?)"
