"""Plan files: round trip, compatibility policy, and a fuzz test of the loader."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from factorize.io import container
from factorize.kinds.factorization.codec import SCHEMA_VERSION, load_plan, save_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.plan.files import FORMAT, PlanFormatError
from tests.plan_fixtures import small_plan


def test_round_trip_from_planner(tmp_path):
    from factorize.kinds.factorization.build import build_plan

    plan = build_plan("prefix:8", "rho=0.5", norm="gamma_2", postprocess="nonneg")
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    back = load_plan(path)
    assert back.manifest() == plan.manifest()
    for a, b in zip(plan.factorization.R_factors + plan.factorization.A_factors,
                    back.factorization.R_factors + back.factorization.A_factors, strict=True):
        np.testing.assert_array_equal(a, b)
    assert back.noise.sampler == "discrete_gaussian" and back.noise.grid > 0
    assert back.postprocess["method"] == "nonneg"
    assert back.provenance["certificate_source"] == "planner"
    check = verify_plan(back, certificate=True)
    assert check.passed, check.failures
    assert check.certificate["gap"] <= 1e-6


@pytest.mark.parametrize("privacy,family,sampler", [
    ("epsilon=1,delta=1e-6", None, "discrete_gaussian"),
    ("rho=0.25", None, "discrete_gaussian"),
    ("epsilon=0.5", None, "discrete_laplace"),
    ("epsilon=0.5", "l2_knorm", "float"),
])
def test_every_privacy_model_round_trips_and_verifies(tmp_path, privacy, family, sampler):
    plan = small_plan("prefix:8", privacy, noise_family=family)
    save_plan(plan, tmp_path / "p.plan")
    back = load_plan(tmp_path / "p.plan")
    assert back.noise.sampler == sampler
    assert verify_plan(back).passed


def test_kron_plan_and_replace_relation(tmp_path):
    from factorize.factorization import Factorization
    from factorize.kinds.factorization.build import build_plan
    from factorize.planner.certificate import Certificate, GammaFWitness
    from workloads import Domain, parse_workload

    W1 = parse_workload("prefix:4").dense()
    cert = Certificate("gamma_f", Factorization((W1, W1), (np.eye(4), np.eye(4))),
                       GammaFWitness((np.ones(4), np.ones(4))))
    plan = build_plan("kron(prefix:4,prefix:4)", "epsilon=1,delta=1e-5", certificate=cert,
                      relation="replace")
    assert plan.domain == Domain(["x0", "x1"], [4, 4])
    assert plan.noise.base_sensitivity == pytest.approx(np.sqrt(2))
    save_plan(plan, tmp_path / "k.plan")
    assert verify_plan(load_plan(tmp_path / "k.plan")).passed


def test_unknown_version_and_format_refused(tmp_path):
    plan = small_plan()
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    manifest, arrays = container.read(path, FORMAT, SCHEMA_VERSION)
    body = {k: v for k, v in manifest.items() if k not in ("format", "schema_version", "arrays")}
    # SCHEMA_VERSION + 1 is a plan carrying a domain value schema (plan.files.SCHEMA_BUMP)
    container.write(tmp_path / "v2.plan", FORMAT, SCHEMA_VERSION + 2, body, arrays)
    with pytest.raises(PlanFormatError, match="schema_version"):
        load_plan(tmp_path / "v2.plan")
    container.write(tmp_path / "r.plan", "factorize-result", 1, body, arrays)
    with pytest.raises(PlanFormatError, match="format"):
        load_plan(tmp_path / "r.plan")
    with pytest.raises(PlanFormatError, match="no such file"):
        load_plan(tmp_path / "missing.plan")


def test_edited_manifest_refused(tmp_path):
    plan = small_plan()
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    manifest, arrays = container.read(path, FORMAT, SCHEMA_VERSION)
    body = {k: v for k, v in manifest.items() if k not in ("format", "schema_version", "arrays")}
    body["noise"] = dict(body["noise"], scale=body["noise"]["scale"] * 2)  # digest not updated
    container.write(tmp_path / "e.plan", FORMAT, SCHEMA_VERSION, body, arrays)
    with pytest.raises(PlanFormatError, match="manifest fails its SHA-256"):
        load_plan(tmp_path / "e.plan")


def test_plans_hold_typed_values_and_refuse_what_the_types_refuse(tmp_path):
    """A plan holds a Domain, Neighbouring, Guarantee and NoiseSpec; their JSON exists only
    in the file. A re-digested manifest whose values the types refuse is a PlanFormatError."""
    from factorize.plan.files import write_plan_container
    from factorize.privacy import ApproxDP, Neighbouring, NoiseSpec
    from workloads import Domain

    plan = small_plan("prefix:8", "epsilon=1,delta=1e-6")
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    back = load_plan(path)
    assert isinstance(back.domain, Domain) and isinstance(back.noise, NoiseSpec)
    assert back.relation is Neighbouring.ADD_REMOVE and back.guarantee == ApproxDP(1.0, 1e-6)
    assert back.noise == plan.noise and back.manifest() == plan.manifest()
    manifest, arrays = container.read(path, FORMAT, SCHEMA_VERSION)
    body = {k: v for k, v in manifest.items() if k not in ("format", "schema_version", "arrays")}
    forged = {
        "laplace noise with l2 sensitivity": ("noise", dict(body["noise"], family="laplace")),
        "a lattice sampler without a grid": ("noise", dict(body["noise"], grid=None)),
        "δ = 1": ("guarantee", {"type": "approx_dp", "epsilon": 1.0, "delta": 1.0}),
        "an unknown guarantee": ("guarantee", {"type": "renyi", "alpha": 2.0}),
        "a relation spelled loosely": ("neighbouring", "add/remove"),
        "a duplicated attribute": ("domain", {"attributes": ["x0", "x0"], "sizes": [8, 1]}),
    }
    for what, (key, value) in forged.items():
        write_plan_container(tmp_path / "f.plan", FORMAT, SCHEMA_VERSION, dict(body, **{key: value}),
                             arrays)
        with pytest.raises(PlanFormatError):
            load_plan(tmp_path / "f.plan")
            pytest.fail(what)


def test_fuzz_1000_corrupted_files_all_refused(tmp_path):
    plan = small_plan("prefix:4")
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    good = path.read_bytes()
    rng = np.random.default_rng(20240603)  # test-only fixed seed: reproducible corruptions
    bad = tmp_path / "bad.plan"
    kinds = {"flip": 0, "truncate": 0, "append": 0, "insert": 0, "zero": 0, "swap": 0}
    refused = 0
    for i in range(1000):
        data = bytearray(good)
        kind = list(kinds)[i % len(kinds)]
        kinds[kind] += 1
        pos = int(rng.integers(0, len(data)))
        if kind == "flip":
            data[pos] ^= int(rng.integers(1, 256))
        elif kind == "truncate":
            data = data[:pos]
        elif kind == "append":
            data += bytes(rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8))
        elif kind == "insert":
            data[pos:pos] = bytes([int(rng.integers(0, 256))])
        elif kind == "zero":
            n = int(rng.integers(1, 64))
            if all(b == 0 for b in data[pos:pos + n]):
                data[pos] = 1
            else:
                data[pos:pos + n] = bytes(len(data[pos:pos + n]))
        else:
            j = int(rng.integers(0, len(data)))
            if data[pos] == data[j]:
                data[pos] ^= 0x55
            else:
                data[pos], data[j] = data[j], data[pos]
        if bytes(data) == good:
            data[0] ^= 1
        bad.write_bytes(bytes(data))
        with pytest.raises(PlanFormatError):
            load_plan(bad)
        refused += 1
    assert refused == 1000


def test_executor_import_needs_no_solver():
    code = ("import factorize.executor, factorize.kinds.factorization.codec, factorize.plan.checks, sys; "
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'cvxpy','solvers','scs','clarabel'}); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_manifest_is_plain_json_with_policy(tmp_path):
    plan = small_plan()
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    manifest, _ = container.read(path, FORMAT, SCHEMA_VERSION)
    assert "only added" in manifest["compatibility"]
    for key in ("workload", "domain", "neighbouring", "guarantee", "factorization", "certificate",
                "noise", "postprocess", "expected_error", "provenance", "content_sha256"):
        assert key in manifest
    assert set(manifest["noise"]) >= {"family", "scale", "sensitivity", "sampler", "grid", "base_sensitivity"}
    json.dumps(manifest, allow_nan=False)


def test_canonical_header_check_reads_plan_bytes(tmp_path):
    """``check_canonical_header`` without a header reads it from a ``PlanBytes``'s own bytes
    (it passed the PlanBytes to ``container.read_header`` as a path: a TypeError), and still
    refuses bytes the header does not describe."""
    from factorize.plan.files import PlanBytes, check_canonical_header, read_plan_bytes

    path = tmp_path / "p.plan"
    save_plan(small_plan("prefix:8", "rho=0.5"), path)
    pb = read_plan_bytes(path)
    check_canonical_header(pb)  # the writer's canonical header: accepted
    with pytest.raises(PlanFormatError, match="data appended"):
        check_canonical_header(PlanBytes(pb.name, pb.data + b"\0"))
