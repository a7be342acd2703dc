"""A structured strategy family is its own modules plus one line in each of the two registries:
``families.registry.FAMILIES`` (the builder side) and ``structured.families.CODECS`` (what the
verifier, executor and reports read). The two must name the same families, in the same order
(the search's tie rule prefers the earlier family), and every name the CLI and the builder
accept comes from them — no third list to keep in step."""

from __future__ import annotations

from factorize.families.registry import FAMILIES
from factorize.families.structured_family import StructuredFamilyBase
from factorize.structured.families import CODECS, FAMILY_NAMES


def test_the_two_registries_name_the_same_structured_families() -> None:
    built = [f.name for f in FAMILIES if isinstance(f, StructuredFamilyBase)]
    assert sorted(built) == sorted(CODECS) == sorted(FAMILY_NAMES)
    assert all(CODECS[n].name == n for n in CODECS)


def test_the_cli_offers_exactly_the_registered_families() -> None:
    from factorize.cli.app import build_parser

    parser = build_parser()
    plan = next(a for a in parser._subparsers._group_actions[0].choices["plan"]._actions
                if "--strategy" in a.option_strings)
    from factorize.choices import TRAINING_STRATEGIES

    assert set(plan.choices) == {"auto", "dense", *TRAINING_STRATEGIES, *FAMILY_NAMES}
