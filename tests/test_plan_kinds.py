"""Plan kinds as one typed interface (``factorize.kinds``):

* ``factorize.load_plan`` is ``factorize.plan.load_plan`` is the registry's (any kind);
* every registered kind is its package's ``KIND``, named as its key;
* every writer states ``plan_kind`` and the registry dispatches on it alone; files written
  before (tests/data/legacy, written by commit 0e81575: no ``plan_kind``) still load by the
  one legacy rule, verify, and are written back stating it; a ``plan_kind`` that contradicts
  the file's format, or names no kind, is refused;
* the extension claim: a new kind — a package written here into ``tmp_path``, registered with
  one line — round-trips through the registry's save, load and verify, and builds from its
  options; it touches no file of ``factorize``.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

import factorize
from factorize import kinds
from factorize.io import container
from factorize.plan.files import PlanFormatError, plan_header, read_plan_container, write_plan_container

LEGACY = Path(__file__).parent / "data" / "legacy"
#: file (written by 0e81575) → (kind, format, schema version)
LEGACY_FILES = {
    "factorization_prefix8.plan": ("factorization", "factorize-plan", 2),
    "structured_marginals.plan": ("structured", "factorize-plan", 3),
    "projection_jl.plan": ("projection", "factorize-projection-plan", 2),
    "local_marginals.lplan": ("local", "factorize-local-plan", 1),
}


def test_one_load_plan():
    import factorize.plan

    assert factorize.load_plan is factorize.plan.load_plan is kinds.load_plan
    assert factorize.save_plan is factorize.plan.save_plan is kinds.save_plan
    assert factorize.verify_plan is factorize.plan.verify_plan is kinds.verify_plan


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_each_registered_kind_is_its_packages_KIND(name):
    import importlib

    kind = kinds.kind(name)
    assert kind.name == name
    assert kind is importlib.import_module(f"factorize.kinds.{name}.kind").KIND
    for method in ("load", "save", "verify", "guarantee", "relation", "sampler", "summary",
                   "measure", "release", "build"):
        assert callable(getattr(kind, method)), (name, method)


@pytest.mark.parametrize("file", sorted(LEGACY_FILES))
def test_files_written_before_load_verify_and_are_written_back_with_plan_kind(file, tmp_path):
    name, fmt, version = LEGACY_FILES[file]
    head = plan_header(LEGACY / file)
    assert "plan_kind" not in head or name == "structured"  # as 0e81575 wrote them
    assert (head["format"], head["schema_version"]) == (fmt, version)
    plan = kinds.load_plan(LEGACY / file)
    assert type(plan).plan_kind == name and kinds.kind_of_plan(plan).name == name
    check = kinds.verify_plan(plan)
    assert check.passed, check.failures
    out = tmp_path / file
    kinds.save_plan(plan, out)
    new = plan_header(out)
    assert new["plan_kind"] == name and (new["format"], new["schema_version"]) == (fmt, version)
    assert {k: v for k, v in new.items() if k not in ("plan_kind", "content_sha256", "arrays")} == \
        {k: v for k, v in head.items() if k not in ("plan_kind", "content_sha256", "arrays")}
    again = kinds.load_plan(out)
    assert kinds.verify_plan(again).passed
    a = container.read(str(LEGACY / file), fmt, version)[1]
    b = container.read(str(out), fmt, version)[1]
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _rewrite(src: Path, dst: Path, edit) -> None:
    """``src`` with its manifest edited, written whole (fresh digests): a well-formed file."""
    head = plan_header(src)
    fmt, version = head["format"], head["schema_version"]
    manifest, arrays = read_plan_container(src, fmt, version)
    manifest = {k: v for k, v in manifest.items()
                if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    edit(manifest)
    write_plan_container(dst, fmt, version, manifest, arrays)


@pytest.mark.parametrize("file", sorted(LEGACY_FILES))
def test_dispatch_is_by_plan_kind_alone(file, tmp_path):
    name, fmt, _ = LEGACY_FILES[file]
    plan = kinds.load_plan(LEGACY / file)
    fresh = tmp_path / "fresh"
    kinds.save_plan(plan, fresh)
    assert kinds.kind_name(plan_header(fresh)) == name
    # the legacy rule: no plan_kind → the kind of the format (the structured kind never had one)
    stripped = tmp_path / "stripped"
    _rewrite(fresh, stripped, lambda m: m.pop("plan_kind"))
    if name == "structured":
        with pytest.raises(PlanFormatError, match="not a structured plan|schema version"):
            kinds.load_plan(stripped)
    else:
        assert kinds.kind_name(plan_header(stripped)) == name == kinds.LEGACY_FORMATS[fmt]
        assert kinds.verify_plan(kinds.load_plan(stripped)).passed
    # a plan_kind naming another kind goes to that kind's reader, which refuses the file
    for other in sorted(set(kinds.KINDS) - {name}):
        forged = tmp_path / f"as_{other}"
        _rewrite(fresh, forged, lambda m, o=other: m.update(plan_kind=o))
        assert kinds.kind_of_file(forged).name == other
        with pytest.raises(PlanFormatError):
            kinds.load_plan(forged)
    unknown = tmp_path / "unknown"
    _rewrite(fresh, unknown, lambda m: m.update(plan_kind="streaming"))
    with pytest.raises(PlanFormatError, match="unknown plan kind 'streaming'"):
        kinds.load_plan(unknown)


def test_a_format_the_legacy_rule_does_not_know_is_refused(tmp_path):
    path = tmp_path / "x.plan"
    write_plan_container(path, "factorize-other-plan", 1, {}, {"a": np.zeros(1)})
    with pytest.raises(PlanFormatError, match="no plan_kind and an unknown format"):
        kinds.load_plan(path)


# -- the extension claim ---------------------------------------------------------------------

#: A whole plan kind: one integer-weighted count w·h released with exact discrete Laplace
#: noise of scale t ≥ Δ/ε (Δ = max|w|: ε-DP under add/remove) — its plan class, file codec,
#: verifier (re-derives t's lower bound), options, measurement and release. It imports only
#: the shared plan layer and the privacy samplers.
TOY = {
    "__init__.py": '"""A toy plan kind (tests/test_plan_kinds.py)."""\n',
    "kind.py": '''
        """The toy kind: one integer-weighted count released with discrete Laplace noise, t = Δ/ε."""
        from __future__ import annotations

        import math
        import time
        from dataclasses import dataclass
        from typing import Any, ClassVar

        import numpy as np

        from factorize.kinds.protocol import Measurement, PlanKind
        from factorize.plan.check_record import PlanCheck
        from factorize.plan.files import (PlanFormatError, check_plan_kind, guarded_load,
                                          read_plan_container, write_plan_container)

        FORMAT = "factorize-toy-plan"


        @dataclass(frozen=True)
        class ToyPlan:
            plan_kind: ClassVar[str] = "toy"
            weights: np.ndarray
            epsilon: float
            scale: float

            def manifest(self) -> dict[str, Any]:
                return {"plan_kind": self.plan_kind, "epsilon": self.epsilon, "scale": self.scale}


        @dataclass(frozen=True, kw_only=True)
        class ToyOptions:
            weights: tuple[float, ...]
            epsilon: float


        def _load(path: Any) -> ToyPlan:
            m, arrays = read_plan_container(path, FORMAT, 1)
            check_plan_kind(path, m, "toy")
            if set(arrays) != {"w"}:
                raise PlanFormatError(f"{path}: a toy plan holds one array w")
            return ToyPlan(arrays["w"], float(m["epsilon"]), float(m["scale"]))


        class ToyKind:
            name = "toy"
            central = True

            def load(self, source: Any) -> ToyPlan:
                return guarded_load(_load, source, "toy plan")

            def save(self, plan: ToyPlan, path: Any) -> None:
                write_plan_container(path, FORMAT, 1, plan.manifest(), {"w": plan.weights})

            def verify(self, plan: ToyPlan, *, certificate: bool = True,
                       allow_weak_guarantee: bool = False, workload: Any = None) -> PlanCheck:
                t0 = time.perf_counter()
                out = PlanCheck(passed=False, checks=[])
                sensitivity = float(np.max(np.abs(plan.weights)))
                need = sensitivity / plan.epsilon
                out.record("noise", math.isfinite(plan.scale) and plan.scale >= need,
                           f"scale {plan.scale:.6g} ≥ Δ/ε = {need:.6g}")
                return out.finish(t0, False)

            def guarantee(self, plan: ToyPlan) -> Any:
                from factorize.privacy import PureDP

                return PureDP(plan.epsilon)

            def relation(self, plan: ToyPlan) -> str:
                return "add_remove"

            def sampler(self, plan: ToyPlan) -> str:
                return "discrete_laplace"

            def summary(self, plan: ToyPlan) -> list[str]:
                return [f"toy         one count, Laplace scale {plan.scale:.6g}"]

            def measure(self, plan: ToyPlan, check: PlanCheck, data_path: str, *, engine: str,
                        allow_extra_columns: bool) -> Measurement:
                h = np.load(data_path)
                return Measurement(np.array([float(plan.weights @ h)]), int(h.sum()))

            def release(self, plan: ToyPlan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                        allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any:
                from factorize.executor.linear_release import Release
                from factorize.privacy import discrete_laplace

                # exact discrete Laplace P(x) ∝ exp(−|x|/t) on the integer count, t = Δ/ε
                y = measurement.values + discrete_laplace(plan.scale, 1, rng)
                q = math.exp(-1.0 / plan.scale)
                se = np.full(1, math.sqrt(2.0 * q) / (1.0 - q))  # its standard deviation
                return Release(estimate=y, std_error=se, ci_low=y - 20 * se, ci_high=y + 20 * se,
                               metadata=dict(metadata))

            def build(self, options: ToyOptions) -> ToyPlan:
                w = np.asarray(options.weights, dtype=np.float64)
                return ToyPlan(w, options.epsilon, float(np.max(np.abs(w))) / options.epsilon)


        KIND: PlanKind[ToyPlan, ToyOptions] = ToyKind()
    ''',
}


def test_a_new_kind_is_one_package_and_one_registry_line(tmp_path, monkeypatch):
    package = tmp_path / "toykind"
    package.mkdir()
    for file, text in TOY.items():
        (package / file).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kinds, "_loaded", {})
    monkeypatch.setitem(kinds.KINDS, "toy", "toykind.kind")  # the one registry line

    toy = kinds.kind("toy")
    options = type(toy).build.__annotations__["options"]
    assert options == "ToyOptions"
    from toykind.kind import ToyOptions

    plan = toy.build(ToyOptions(weights=(1.0, 1.0, 2.0), epsilon=0.5))
    path = tmp_path / "t.plan"
    factorize.save_plan(plan, path)  # the public names dispatch to it
    assert plan_header(path)["plan_kind"] == "toy"
    back = factorize.load_plan(path)
    assert type(back).__name__ == "ToyPlan" and np.array_equal(back.weights, plan.weights)
    assert back.scale == pytest.approx(4.0, rel=0, abs=0)  # Δ/ε = 2/0.5, exactly
    check = factorize.verify_plan(back)
    assert check.passed, check.failures
    assert kinds.kind_of_file(path) is toy and kinds.kind_of_plan(back) is toy
    data = tmp_path / "h.npy"
    np.save(data, np.array([3, 1, 2]))
    m = toy.measure(back, check, str(data), engine="duckdb", allow_extra_columns=False)
    assert m.values.tolist() == [3 * 1.0 + 1 * 1.0 + 2 * 2.0] and m.n_records == 6
    from factorize.privacy import TestRandom

    rel = toy.release(back, check, m, TestRandom(1), allow_float_noise=False, metadata={},
                      deadline=0.0)
    assert rel.estimate.dtype.kind in "if" and float(rel.estimate[0] - 8.0).is_integer()
    assert rel.std_error[0] == pytest.approx(math.sqrt(2 * math.exp(-0.25)) / (1 - math.exp(-0.25)))
    # its verifier is real: an under-noised toy plan is refused
    import dataclasses

    weak = dataclasses.replace(back, scale=3.9)
    assert not factorize.verify_plan(weak).passed
    # and the kind is nothing without its line
    monkeypatch.delitem(kinds.KINDS, "toy")
    with pytest.raises(PlanFormatError, match="unknown plan kind 'toy'"):
        factorize.load_plan(path)


def test_a_registry_line_must_name_a_module_defining_that_kind(tmp_path, monkeypatch):
    (tmp_path / "wrongkind.py").write_text("KIND = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kinds, "_loaded", {})
    monkeypatch.setitem(kinds.KINDS, "wrong", "wrongkind")
    with pytest.raises(PlanFormatError, match="does not define the plan kind 'wrong'"):
        kinds.kind("wrong")


def test_the_manifest_names_the_kind_in_json(tmp_path):
    """``plan_kind`` is in the JSON header every reader parses first (bounded)."""
    path = tmp_path / "f.plan"
    kinds.save_plan(kinds.load_plan(LEGACY / "factorization_prefix8.plan"), path)
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert json.loads(raw[8:8 + n])["__metadata__"]  # safetensors metadata holds the manifest
    assert kinds.kind_name(plan_header(path)) == "factorization"
