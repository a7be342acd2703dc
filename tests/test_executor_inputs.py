"""Bad input gets a clear error, no release and no output file; errors never show values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from factorize.cli.plan import main
from factorize.kinds.factorization.codec import save_plan
from tests.hostile_files import write_object_npy
from tests.plan_fixtures import identity_certificate

SECRET = 987654  # a value that must never appear in an error message


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    from factorize.kinds.factorization.build import build_plan
    from workloads import Domain

    d = tmp_path_factory.mktemp("plan")
    plan = build_plan("marginals:2x3:1", "epsilon=1,delta=1e-6", domain=Domain(["a", "b"], [2, 3]),
                      certificate=identity_certificate("marginals:2x3:1"))
    path = d / "m.plan"
    save_plan(plan, path)
    return path


def _run(plan_path, data, out, capsys, *extra):
    rc = main(["run", str(plan_path), "--data", str(data), "--out", str(out), *extra])
    err = capsys.readouterr().err
    return rc, err


def _csv(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("name,text,needle", [
    ("outside", f"a,b\n0,1\n1,{SECRET}\n", "b"),
    ("negative", "a,b\n0,1\n-1,2\n", "a"),
    ("missing", "a\n0\n1\n", "b"),
    ("extra", "a,b,c\n0,1,5\n1,2,6\n", "c"),
    ("noninteger", "a,b\n0,1.5\n1,2\n", "b"),
    ("text", "a,b\n0,x\n1,2\n", "b"),
    ("nan", "a,b\n0,NaN\n1,2\n", "b"),
    ("empty_value", "a,b\n0,\n1,2\n", "b"),
    ("empty", "a,b\n", "no records"),
])
def test_bad_records_refused(tmp_path, plan_path, capsys, name, text, needle):
    data = _csv(tmp_path / f"{name}.csv", text)
    out = tmp_path / "answers.csv"
    rc, err = _run(plan_path, data, out, capsys)
    assert rc == 2, err
    assert needle in err
    assert str(SECRET) not in err and "1.5" not in err
    assert not out.exists() and not list(tmp_path.glob(".answers*"))


def test_bad_parquet_refused(tmp_path, plan_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [0, 1], "b": [0.0, float("nan")]}), tmp_path / "r.parquet")
    rc, err = _run(plan_path, tmp_path / "r.parquet", tmp_path / "o.json", capsys)
    assert rc == 2 and "b" in err and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("name,arr", [
    ("short", np.ones(5, dtype=np.int64)),
    ("negative", np.array([1, 2, -3, 4, 5, 6])),
    ("fractional", np.array([1, 2, 3.5, 4, 5, 6])),
    ("nan", np.array([1, 2, np.nan, 4, 5, 6])),
    ("zeros", np.zeros(6, dtype=np.int64)),
    ("2d", np.ones((2, 3), dtype=np.int64)),
])
def test_bad_histograms_refused(tmp_path, plan_path, capsys, name, arr):
    np.save(tmp_path / f"{name}.npy", arr)
    rc, err = _run(plan_path, tmp_path / f"{name}.npy", tmp_path / "o.csv", capsys)
    assert rc == 2, err
    assert not (tmp_path / "o.csv").exists()


def test_pickled_histogram_refused(tmp_path, plan_path, capsys):
    write_object_npy(tmp_path / "obj.npy", (6,))
    rc, err = _run(plan_path, tmp_path / "obj.npy", tmp_path / "o.csv", capsys)
    assert rc == 2 and ("pickle" in err.lower() or "objects" in err)


@pytest.mark.parametrize("damage", ["truncate", "tamper_array", "tamper_manifest", "garbage"])
def test_damaged_plan_refused_before_data(tmp_path, plan_path, capsys, damage):
    data = plan_path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "tamper_array":
        data = data[:-3] + bytes([data[-3] ^ 0x10]) + data[-2:]
    elif damage == "tamper_manifest":
        i = data.index(b"epsilon")
        data = data[:i] + b"Epsilon" + data[i + 7:]
    else:
        data = b"not a plan at all"
    bad = tmp_path / "bad.plan"
    bad.write_bytes(data)
    np.save(tmp_path / "h.npy", np.arange(6))
    rc, err = _run(bad, tmp_path / "h.npy", tmp_path / "o.csv", capsys)
    assert rc == 2 and "bad.plan" in err
    assert not (tmp_path / "o.csv").exists()


def test_float_sampler_refused_unless_allowed(tmp_path, capsys):
    from factorize.kinds.factorization.build import build_plan

    plan = build_plan("prefix:8", "epsilon=1", noise_family="l2_knorm",
                      certificate=identity_certificate("prefix:8"))
    assert plan.noise.sampler == "float"
    save_plan(plan, tmp_path / "k.plan")
    np.save(tmp_path / "h.npy", np.arange(8))
    rc, err = _run(tmp_path / "k.plan", tmp_path / "h.npy", tmp_path / "o.csv", capsys)
    assert rc == 2 and "allow-float-noise" in err and not (tmp_path / "o.csv").exists()
    rc, err = _run(tmp_path / "k.plan", tmp_path / "h.npy", tmp_path / "o.csv", capsys,
                   "--allow-float-noise", "--seed", "3")
    assert rc == 0 and (tmp_path / "o.csv").exists()


def test_bad_output_suffix_refused_before_data(tmp_path, plan_path, capsys):
    rc, err = _run(plan_path, tmp_path / "missing.npy", tmp_path / "o.txt", capsys)
    assert rc == 2 and "suffix" in err


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_outputs_and_test_mode_marking(tmp_path, plan_path, capsys, suffix):
    _csv(tmp_path / "r.csv", "a,b\n0,1\n1,2\n1,2\n0,0\n")
    out = tmp_path / f"answers{suffix}"
    rc = main(["run", str(plan_path), "--data", str(tmp_path / "r.csv"), "--out", str(out),
               "--seed", "7"])
    cap = capsys.readouterr()
    assert rc == 0 and "NOT PRIVATE" in cap.out and "NOT PRIVATE" in cap.err
    cols = ["query", "table", "a", "b", "label", "estimate", "std_error", "ci_low", "ci_high"]
    if suffix == ".csv":
        text = out.read_text()
        assert "# test_mode: true" in text and "NOT PRIVATE" in text
        header = [ln for ln in text.splitlines() if not ln.startswith("#")][0]
        assert header.split(",") == cols
        rows = [ln for ln in text.splitlines() if not ln.startswith("#")][1:]
        assert len(rows) == 5
    elif suffix == ".json":
        d = json.loads(out.read_text())
        assert d["metadata"]["test_mode"] is True and "NOT PRIVATE" in d["metadata"]["warning"]
        assert list(d["answers"][0]) == cols and len(d["answers"]) == 5
    else:
        import pyarrow.parquet as pq

        t = pq.read_table(out)
        assert t.column_names == cols and t.num_rows == 5
        meta = json.loads(t.schema.metadata[b"factorize"])
        assert meta["test_mode"] is True
    # reproducible in test mode
    out2 = tmp_path / f"again{suffix}"
    assert main(["run", str(plan_path), "--data", str(tmp_path / "r.csv"), "--out", str(out2),
                 "--seed", "7"]) == 0
    if suffix != ".parquet":
        assert out.read_text().replace("answers", "again") == out2.read_text().replace("answers", "again")


def test_production_mode_not_marked_and_not_reproducible(tmp_path, plan_path, capsys):
    _csv(tmp_path / "r.csv", "a,b\n0,1\n1,2\n")
    outs = []
    for i in range(2):
        out = tmp_path / f"o{i}.json"
        assert main(["run", str(plan_path), "--data", str(tmp_path / "r.csv"), "--out", str(out)]) == 0
        d = json.loads(out.read_text())
        assert d["metadata"]["test_mode"] is False and "warning" not in d["metadata"]
        outs.append([a["estimate"] for a in d["answers"]])
    assert outs[0] != outs[1]
    assert "NOT PRIVATE" not in capsys.readouterr().out


def test_failed_write_leaves_no_file(tmp_path, plan_path, monkeypatch):
    import factorize.executor.output as output

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(output, "_csv", boom)
    np.save(tmp_path / "h.npy", np.arange(6))
    assert main(["run", str(plan_path), "--data", str(tmp_path / "h.npy"),
                 "--out", str(tmp_path / "o.csv")]) == 2
    assert list(tmp_path.iterdir()) == [tmp_path / "h.npy"]


def test_out_into_a_missing_folder_is_an_error_and_creates_nothing(tmp_path, plan_path, capsys):
    """``--out`` into a folder that does not exist is refused (exit 2, the
    folder named), before any charge — never a silent ``mkdir -p``."""
    np.save(tmp_path / "h.npy", np.arange(6))
    out = tmp_path / "nope" / "deeper" / "o.csv"
    assert main(["run", str(plan_path), "--data", str(tmp_path / "h.npy"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "nope" in err
    assert not (tmp_path / "nope").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.npy"]
