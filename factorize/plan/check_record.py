"""The record a verification writes, shared by every plan kind's checks: one :class:`PlanCheck`
per verification, :func:`guard` around each check (a forged plan may break any assumption:
its failure is a refusal, never a crash) and :func:`same_number` for stated claims against
recomputed values. Imports nothing of the plan layer but its errors."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from factorize.errors import InternalError
from factorize.numerics import is_number

from .errors import PlanRefused

if TYPE_CHECKING:
    from workloads import Workload


class CheckEntry(TypedDict):
    """One check's outcome (:meth:`PlanCheck.record`)."""

    name: str
    ok: bool
    detail: str


class VerifiedCertificate(TypedDict):
    """A factorization certificate as the verifier re-derived it (``certificate.verify``)."""

    upper: float
    lower: float
    gap: float
    residual: float
    passed: bool


@dataclass
class PlanCheck:
    passed: bool
    checks: list[CheckEntry]
    required_scale: float | None = None
    recomputed_sensitivity: float | None = None
    workload: Workload | None = None  # the workload rebuilt from the plan, once checked
    seconds: float = 0.0
    certificate: VerifiedCertificate | None = None
    failures: list[str] = field(default_factory=list)
    #: recomputed values the executor uses (bias β, n-bound μ and ‖b‖₁, expected error, …);
    #: a release reads them through :meth:`established`, never with a default
    derived: dict[str, Any] = field(default_factory=dict)

    def established(self, key: str) -> Any:
        """The value the verification derived under ``key`` (the bias β, the residual, the
        expected error, the n bound and its μ, ‖b‖₁, the guarantee charged, …).

        A release depends on each: a verification that passed without setting one is a bug
        in the verifier, and no default is safe (β = 0 would drop the bias from every
        interval without a word), so its absence raises :class:`InternalError`."""
        if key not in self.derived:
            raise InternalError(f"the verification did not establish {key!r}: refusing to release "
                                "on a default")
        return self.derived[key]

    def established_number(self, key: str) -> float:
        """:meth:`established` for a number (β, μ, ‖b‖₁, the residual)."""
        return float(self.established(key))

    def record(self, name: str, ok: bool, detail: str) -> bool:
        """Append one check's outcome; returns ``ok``."""
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        return bool(ok)

    def ok(self, name: str) -> bool:
        """True when every recorded check called ``name`` passed (and there is one)."""
        found = [c["ok"] for c in self.checks if c["name"] == name]
        return bool(found) and all(found)

    def finish(self, t0: float, raise_on_failure: bool) -> PlanCheck:
        """Collect the failures and the time; raise :class:`PlanRefused` when asked and any failed."""
        self.failures = [f"{c['name']}: {c['detail']}" for c in self.checks if not c["ok"]]
        self.passed = not self.failures
        self.seconds = time.perf_counter() - t0
        if raise_on_failure and not self.passed:
            raise PlanRefused("plan refused: " + "; ".join(self.failures))
        return self

    def lines(self) -> list[str]:
        return [f"{'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in self.checks]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": self.checks, "required_scale": self.required_scale,
                "recomputed_sensitivity": self.recomputed_sensitivity, "seconds": self.seconds,
                "certificate": self.certificate, "failures": self.failures}


def guard(out: PlanCheck, name: str, fn: Any) -> Any:
    """Run ``fn()``; any exception becomes a failed check ``name`` (a forged plan may break
    any assumption, and verification must refuse it, not crash). Returns fn's value or None."""
    try:
        return fn()
    except MemoryError:
        out.record(name, False, "out of memory while checking")
    except RecursionError:
        out.record(name, False, "the plan is nested too deeply")
    except Exception as exc:  # noqa: BLE001 - every failure of a check is a refusal
        out.record(name, False, f"cannot check: {exc}")
    return None


def same_number(stated: Any, recomputed: float | None, rel: float = 1e-9, absolute: float = 0.0) -> bool:
    """The stated claim equals the recomputed value up to ``rel`` (both finite numbers); a
    recomputed None (nothing to claim) matches only a stated None."""
    if recomputed is None:
        return stated is None
    if not is_number(stated) or not is_number(recomputed):
        return False  # a claim that leaves the float range is never confirmed
    return abs(float(stated) - float(recomputed)) <= rel * max(abs(float(stated)), abs(float(recomputed))) + absolute
