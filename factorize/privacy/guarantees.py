"""Privacy guarantees and neighbouring relations (docs/math.md §1.2 and §6).

Three guarantee types are supported, each a frozen, validated dataclass:

* :class:`ApproxDP` -- (ε, δ)-differential privacy, ``ε > 0`` finite, ``0 < δ < 1``;
* :class:`ZCDP` -- ρ-zero-concentrated DP (Bun & Steinke 2016), ``ρ > 0`` finite;
* :class:`PureDP` -- ε-differential privacy, ``ε > 0`` finite.

Invalid parameters raise :class:`PrivacyError` (a :class:`ValueError`).
Guarantees round-trip through plain JSON-compatible dicts (:meth:`to_dict` /
:func:`guarantee_from_dict`) and can be parsed from short strings such as
``"epsilon=1,delta=1e-6"``, ``"rho=0.5"`` or ``"epsilon=1"`` (:func:`parse_guarantee`).

:class:`Neighbouring` names the neighbouring relation of docs/math.md §1.2: a guarantee is only
meaningful together with the relation it is stated for, because sensitivities differ.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from factorize.errors import InputError
from factorize.numerics import positive_number, real_number

__all__ = [
    "PrivacyError",
    "Neighbouring",
    "ApproxDP",
    "ZCDP",
    "PureDP",
    "Guarantee",
    "parse_guarantee",
    "guarantee_from_dict",
]


class PrivacyError(InputError):
    """Invalid privacy parameters or an impossible privacy request."""


class Neighbouring(enum.Enum):
    """Neighbouring relation between histograms ``h, h'`` (docs/math.md §1.2).

    ``ADD_REMOVE``: ``h − h' = ±e_x`` (add or remove one record; the project default).
    ``REPLACE``: ``h − h' = e_x − e_y`` with ``x ≠ y`` (replace one record by another).
    """

    ADD_REMOVE = "add/remove one record"
    REPLACE = "replace one record"

    @property
    def key(self) -> str:
        """Short machine-readable name: ``"add_remove"`` or ``"replace"``."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: Neighbouring | str) -> Neighbouring:
        """Accept a member, its key (``"add_remove"``), its name, or its value text.

        Also tolerated: ``"add/remove"``, ``"add-remove"``, ``"addremove"``, any case.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise PrivacyError(f"neighbouring relation must be a string, got {type(value).__name__}")
        text = value.strip().lower()
        for member in cls:
            if text in (member.value, member.key):
                return member
        squashed = re.sub(r"[\s/_\-]+", "", text)
        if squashed in ("addremove", "addremoveonerecord"):
            return cls.ADD_REMOVE
        if squashed in ("replace", "replaceonerecord", "substitute", "substitution"):
            return cls.REPLACE
        raise PrivacyError(
            f"unknown neighbouring relation {value!r}; expected 'add_remove' or 'replace'"
        )


def _check_delta(value: Any) -> float:
    v = real_number("delta", value, PrivacyError)
    if not 0.0 < v < 1.0:
        raise PrivacyError(f"delta must satisfy 0 < delta < 1, got {v}")
    return v


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-differential privacy: ``P[M(h) ∈ S] ≤ e^ε P[M(h') ∈ S] + δ``."""

    epsilon: float
    delta: float

    kind = "approx_dp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", positive_number("epsilon", self.epsilon, PrivacyError))
        object.__setattr__(self, "delta", _check_delta(self.delta))

    def to_dict(self) -> dict:
        return {"type": self.kind, "epsilon": self.epsilon, "delta": self.delta}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApproxDP:
        _expect_keys(data, cls.kind, {"epsilon", "delta"})
        return cls(data["epsilon"], data["delta"])

    def __str__(self) -> str:
        return f"epsilon={self.epsilon!r},delta={self.delta!r}"


@dataclass(frozen=True)
class ZCDP:
    """ρ-zero-concentrated DP: ``D_α(M(h) ‖ M(h')) ≤ ρα`` for all ``α > 1``."""

    rho: float

    kind = "zcdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", positive_number("rho", self.rho, PrivacyError))

    def to_dict(self) -> dict:
        return {"type": self.kind, "rho": self.rho}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ZCDP:
        _expect_keys(data, cls.kind, {"rho"})
        return cls(data["rho"])

    def __str__(self) -> str:
        return f"rho={self.rho!r}"


@dataclass(frozen=True)
class PureDP:
    """ε-differential privacy (δ = 0)."""

    epsilon: float

    kind = "pure_dp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", positive_number("epsilon", self.epsilon, PrivacyError))

    def to_dict(self) -> dict:
        return {"type": self.kind, "epsilon": self.epsilon}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PureDP:
        _expect_keys(data, cls.kind, {"epsilon"})
        return cls(data["epsilon"])

    def __str__(self) -> str:
        return f"epsilon={self.epsilon!r}"


Guarantee = ApproxDP | ZCDP | PureDP

_KINDS: dict[str, type[ApproxDP] | type[ZCDP] | type[PureDP]] = {ApproxDP.kind: ApproxDP, ZCDP.kind: ZCDP, PureDP.kind: PureDP}


def _expect_keys(data: Mapping[str, Any], kind: str, keys: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise PrivacyError(f"guarantee dict expected, got {type(data).__name__}")
    t = data.get("type", kind)
    if t != kind:
        raise PrivacyError(f"guarantee dict has type {t!r}, expected {kind!r}")
    present = set(data) - {"type"}
    missing = keys - present
    extra = present - keys
    if missing:
        raise PrivacyError(f"guarantee dict of type {kind!r} is missing {sorted(missing)}")
    if extra:
        raise PrivacyError(f"guarantee dict of type {kind!r} has unexpected keys {sorted(extra)}")


def guarantee_from_dict(data: Mapping[str, Any]) -> Guarantee:
    """Inverse of ``to_dict()`` for any guarantee type (dispatches on ``data["type"]``)."""
    if not isinstance(data, Mapping):
        raise PrivacyError(f"guarantee dict expected, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in _KINDS:
        raise PrivacyError(
            f"unknown guarantee type {kind!r}; expected one of {sorted(_KINDS)}"
        )
    return _KINDS[kind].from_dict(data)


_ALIASES = {
    "epsilon": "epsilon",
    "eps": "epsilon",
    "e": "epsilon",
    "ε": "epsilon",
    "delta": "delta",
    "d": "delta",
    "δ": "delta",
    "rho": "rho",
    "ρ": "rho",
}

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_guarantee(text: str) -> Guarantee:
    """Parse ``"epsilon=1,delta=1e-6"`` (ApproxDP), ``"rho=0.5"`` (ZCDP) or ``"epsilon=1"`` (PureDP).

    Keys are case-insensitive; aliases ``eps``/``ε``, ``δ``, ``ρ`` are accepted; pairs are
    separated by commas or semicolons (or whitespace); whitespace around ``=`` and separators
    is ignored. ``delta=0`` is rejected (write ``epsilon=...`` alone for pure DP).
    """
    if not isinstance(text, str):
        raise PrivacyError(f"guarantee text must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise PrivacyError("empty guarantee string; expected e.g. 'epsilon=1,delta=1e-6' or 'rho=0.5'")
    # Normalise 'key = value' to 'key=value', then split on , ; or whitespace.
    normal = re.sub(r"\s*=\s*", "=", stripped)
    parts = [p for p in re.split(r"[,;\s]+", normal) if p]
    values: dict[str, float] = {}
    for part in parts:
        if part.count("=") != 1:
            raise PrivacyError(
                f"cannot parse {part!r} in guarantee {text!r}; expected key=value pairs"
            )
        key, raw = part.split("=")
        canon = _ALIASES.get(key.strip().lower())
        if canon is None:
            raise PrivacyError(
                f"unknown key {key!r} in guarantee {text!r}; expected epsilon, delta or rho"
            )
        if canon in values:
            raise PrivacyError(f"key {canon!r} given twice in guarantee {text!r}")
        if not _NUMBER.match(raw.strip()):
            raise PrivacyError(f"value {raw!r} for {canon} in {text!r} is not a finite number")
        values[canon] = float(raw)
    keys = set(values)
    if keys == {"epsilon", "delta"}:
        return ApproxDP(values["epsilon"], values["delta"])
    if keys == {"rho"}:
        return ZCDP(values["rho"])
    if keys == {"epsilon"}:
        return PureDP(values["epsilon"])
    raise PrivacyError(
        f"guarantee {text!r} has keys {sorted(keys)}; expected {{epsilon, delta}} (approximate DP), "
        "{rho} (zCDP) or {epsilon} (pure DP)"
    )
