"""Fault-injection points for the crash tests of the release path.

``checkpoint(step)`` does nothing unless the environment variable ``FACTORIZE_FAULT_PAUSE``
names ``step``: then it creates the file named by ``FACTORIZE_FAULT_MARKER`` and sleeps, so a
test can ``kill -9`` the process at exactly that step. Steps of ``factorize run``:
``before_charge``, ``after_charge``, ``during_write`` (output half written, not yet in place),
``after_write`` (output in place, release not yet recorded in the ledger).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STEPS = ("before_charge", "after_charge", "during_write", "after_write")


def checkpoint(step: str) -> None:
    if os.environ.get("FACTORIZE_FAULT_PAUSE") != step:
        return
    marker = os.environ.get("FACTORIZE_FAULT_MARKER")
    if marker:
        Path(marker).write_text(step)
    time.sleep(float(os.environ.get("FACTORIZE_FAULT_SLEEP", "60")))
