"""Saved results round-trip, tampering is detected, and the CLI keeps its contract."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from factorize.cli import main
from factorize.io.container import ContainerError
from factorize.io.result_file import load_result, save_result
from factorize.planner.certificate import verify
from factorize.planner.routes import solve


@pytest.mark.parametrize("spec,norm,eta", [("prefix:8", "gamma_f", None),
                                           ("kron(prefix:4,identity:3)", "gamma_2", None),
                                           ("prefix:6", "approx_gamma_2", 0.2)])
def test_round_trip(tmp_path, spec, norm, eta):
    r = solve(spec, norm, eta=eta)
    path = tmp_path / "r.fct"
    save_result(r, path)
    loaded = load_result(path)
    v = verify(loaded.certificate, r.workload)
    assert v.passed
    assert v.upper == r.upper and v.lower == r.lower
    assert loaded.manifest["workload"]["fingerprint"] == r.workload.fingerprint()
    for a, b in zip(loaded.certificate.factorization.R_factors, r.factorization.R_factors, strict=True):
        assert np.array_equal(a, b)


def test_tampered_file_is_refused(tmp_path):
    r = solve("prefix:8", "gamma_f")
    path = tmp_path / "r.fct"
    save_result(r, path)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01  # flip one bit of the last array's data
    (tmp_path / "t.fct").write_bytes(bytes(data))
    with pytest.raises(ContainerError, match="SHA-256"):
        load_result(tmp_path / "t.fct")
    (tmp_path / "short.fct").write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(ContainerError):
        load_result(tmp_path / "short.fct")
    with pytest.raises(ContainerError, match="no such file"):
        load_result(tmp_path / "missing.fct")


def test_unknown_schema_version_is_refused(tmp_path):
    from factorize.io import container

    path = tmp_path / "v.fct"
    container.write(path, "factorize-result", 99, {}, {"x": np.ones(2)})
    with pytest.raises(ContainerError, match="schema_version 99"):
        load_result(path)


def test_cli_json_contract(tmp_path, capsys):
    out = tmp_path / "p.fct"
    assert main(["solve", "--workload", "prefix:16", "--norm", "gamma_2", "--json", "--out", str(out)]) == 0
    s = json.loads(capsys.readouterr().out)
    for key in ("value", "lower", "upper", "gap", "seconds", "norm", "workload"):
        assert key in s
    assert s["norm"] == "gamma_2" and s["workload"] == "prefix:16"
    assert s["lower"] <= s["upper"] and s["gap"] <= 1e-6
    assert main(["check", str(out), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["passed"] and c["upper"] == s["upper"]


def test_cli_errors_exit_cleanly(capsys):
    assert main(["solve", "--workload", "prefix:"]) == 2
    assert "expected" in capsys.readouterr().err
    assert main(["solve", "--workload", "prefix:4", "--norm", "approx_gamma_2"]) == 2
    assert "eta" in capsys.readouterr().err
    assert main(["solve", "--workload", "prefix:16", "--gap-tol", "1e-15"]) == 3
    assert "gap" in capsys.readouterr().err


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "factorize", "solve", "--workload", "identity:4"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "value" in proc.stdout and "lower" in proc.stdout


def test_domain_given_inline_for_many_attributes():
    """A long ``name=size,…`` list is parsed as such (it was first tried as a path, and a
    name longer than the file system allows raised 'File name too long')."""
    from factorize.cli.common import parse_domain

    text = ",".join(f"x{j}=2" for j in range(100))
    dom = parse_domain(text, None)
    assert len(dom.attributes) == 100 and dom.sizes[99] == 2
