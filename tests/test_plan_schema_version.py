"""Plans whose domain carries a value schema are written one schema version up
(``plan.files.SCHEMA_BUMP``): a reader from before schemas refuses them instead of reading raw
values as codes; this reader requires the schema exactly when the version says so."""

from __future__ import annotations

import pytest

from factorize.io import container
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import SCHEMA_VERSION, load_plan, save_plan
from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.plan import SCHEMA_VERSION as STRUCTURED_VERSION
from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
from factorize.plan.errors import PlanError
from factorize.plan.files import FORMAT, write_plan_container
from workloads.schema import DomainSchema

SCHEMA = DomainSchema.from_dict({
    "format": "factorize-domain-schema", "version": 1,
    "attributes": [{"name": "age", "kind": "integer", "min": 17, "max": 24},
                   {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]}]})


def _body(path):
    m, arrays = container.read(path, FORMAT, 10)
    return ({k: v for k, v in m.items()
             if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")},
            arrays, m["schema_version"])


def test_schema_plans_are_written_one_version_up_and_old_readers_refuse_them(tmp_path):
    dom = SCHEMA.domain()
    dense = build_plan("kron(prefix:8,identity:2)", "rho=0.5", domain=dom)
    save_plan(dense, tmp_path / "d.plan")
    assert _body(tmp_path / "d.plan")[2] == SCHEMA_VERSION + 1
    assert load_plan(tmp_path / "d.plan").domain.schema == SCHEMA
    with pytest.raises(container.ContainerError, match="schema_version"):
        container.read(tmp_path / "d.plan", FORMAT, SCHEMA_VERSION)  # what an older reader does
    structured = build_structured_plan("marginals:8x2:1", "rho=0.5", domain=dom)
    save_structured_plan(structured, tmp_path / "s.plan")
    assert _body(tmp_path / "s.plan")[2] == STRUCTURED_VERSION + 1
    assert load_structured_plan(tmp_path / "s.plan").domain.schema == SCHEMA
    # without a schema nothing changes
    save_plan(build_plan("prefix:8", "rho=0.5"), tmp_path / "p.plan")
    assert _body(tmp_path / "p.plan")[2] == SCHEMA_VERSION


def test_version_and_schema_must_agree(tmp_path):
    dom = SCHEMA.domain()
    save_plan(build_plan("kron(prefix:8,identity:2)", "rho=0.5", domain=dom), tmp_path / "d.plan")
    body, arrays, _ = _body(tmp_path / "d.plan")
    # the schema carried at the old version: refused
    write_plan_container(tmp_path / "low.plan", FORMAT, SCHEMA_VERSION, dict(body), arrays)
    with pytest.raises(PlanError, match="disagrees.*schema version is 3 "):
        load_plan(tmp_path / "low.plan")
    # the new version without its schema: refused
    body2 = dict(body)
    body2["domain"] = {k: v for k, v in body["domain"].items() if k != "schema"}
    write_plan_container(tmp_path / "bare.plan", FORMAT, SCHEMA_VERSION + 1, body2, arrays)
    with pytest.raises(PlanError, match="disagrees.*schema version is 2 "):
        load_plan(tmp_path / "bare.plan")


@pytest.mark.parametrize("strategy", ["dense", "residual"])
def test_plans_with_table_targets_are_written_two_versions_up(tmp_path, strategy):
    """A plan for per-table weights measures D·W and releases D⁻¹ times its answers: a reader
    from before targets would release D·W's answers as W's, so the plan is written
    ``TARGETS_BUMP`` versions up (three with a value schema too), which that reader refuses;
    this reader requires the targets record exactly when the version says so."""
    from factorize.cli.plan import main as cli
    from factorize.kinds import load_plan as load_any
    from factorize.plan.files import TARGETS_BUMP

    base = SCHEMA_VERSION if strategy == "dense" else STRUCTURED_VERSION
    out = tmp_path / "t.plan"
    assert cli(["plan", "--workload", "vstack(marginals:4x3:1,marginals:4x3:2)", "--privacy", "rho=0.5",
                "--strategy", strategy, "--table-weights", "*=1;x0=4", "--out", str(out)]) == 0
    body, arrays, version = _body(out)
    assert version == base + TARGETS_BUMP and "table_targets" in body["workload"]
    assert load_any(out).workload["table_targets"] == body["workload"]["table_targets"]
    with pytest.raises(container.ContainerError, match="schema_version"):
        container.read(out, FORMAT, base + 1)  # a reader from before targets
    write_plan_container(tmp_path / "low.plan", FORMAT, base, dict(body), arrays)
    with pytest.raises(PlanError, match="disagrees"):
        load_any(tmp_path / "low.plan")
