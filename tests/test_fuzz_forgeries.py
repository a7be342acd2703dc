"""A fuzzer of structurally valid forgeries.

Each forgery starts from a genuine plan of some kind (factorization — dense Gaussian, Laplace,
Kronecker, approximate γ₂, least squares, non-negative post-processing —, projection — jl,
covariance, relaxed projection —, local, and structured — residual marginals, a union of
Kronecker products), changes it (numbers across the float range,
dropped or added fields, type swaps, array entries scaled, zeroed or pushed to the ends of
the range), and is written by the project's own writer, so its digests are valid: only
verification stands between it and the data. The invariants, for every forgery:

1. **no crash** — loading and verifying raise nothing but the plan errors (``PlanError``);
2. **no under-noise** — a factorization plan that verifies carries at least the noise an
   independent oracle requires: the sensitivity of its measured strategy computed in exact
   rational arithmetic (``fractions``), calibrated with ``privacy.calibrate``;
3. **no false claim** — a forgery that verifies states every number of its manifest (outside
   ``provenance`` and the post-processing's tuning parameters, which verification bounds) as
   the genuine plan did, to 1e-9: a changed claim is never accepted;
4. **no charge without a release** — every accepted forgery, and a sample of refused ones,
   is run with a ledger: either the run releases (and the ledger says so) or nothing is charged.

At least ``FORGERIES`` (1,000) per run, a fixed test seed per kind (set ``FACTORIZE_FUZZ_SEED``
to explore others).
"""

from __future__ import annotations

import copy
import json
import math
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from factorize import kinds
from factorize.io import container
from factorize.ledger import Ledger
from factorize.plan.errors import PlanError
from factorize.plan.files import FORMAT, PROJECTION_FORMAT
from factorize.plan.files import write_plan_container as _write

FORGERIES = 1000
SEED = int(os.environ.get("FACTORIZE_FUZZ_SEED", "20261123"))
_INFORMATIONAL = ("provenance", "compatibility")
#: Tuning parameters a plan may set within the validated ranges (not accuracy claims), and a
#: projection plan's public dataset size n: an input, not a claim — every claim is re-derived
#: at the stated n (a forged n is refused wherever a claim depends on it) and the executor
#: refuses data of any other size.
_PARAMETERS = {("postprocess", "tol"), ("postprocess", "max_iter"), ("n",)}
_NUMBERS = [0.0, -1.0, 1e-300, 5e-324, 1e300, 1.7976931348623157e308, 0.5, 0.999999, 1.000001,
            2.0, 1e-9, 3.0, 1e6, -1e-12, 2.0 ** -537, 2.0 ** 537]


# ---------------------------------------------------------------------------------------
# the genuine plans


def _genuine(tmp: Path) -> dict[str, Path]:
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import save_plan
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.plan import save_local_plan
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.codec import save_projection_plan
    from factorize.privacy import TestRandom
    from tests.plan_fixtures import identity_certificate, small_plan

    plans: dict[str, Path] = {}

    def put(name: str, saver: Any, plan: Any) -> None:
        plans[name] = tmp / f"{name}.plan"
        saver(plan, plans[name])

    put("gaussian", save_plan, small_plan("prefix:8", "epsilon=0.5,delta=1e-6"))
    put("laplace", save_plan, small_plan("prefix:8", "epsilon=0.5"))
    put("kron", save_plan, small_plan("kron(prefix:2,prefix:4)", "rho=0.1"))
    put("nonneg", save_plan, small_plan("prefix:8", "rho=0.1", postprocess="nonneg"))
    put("least_squares", save_plan, build_plan("prefix:8", "rho=0.1", mechanism="least-squares",
                                               certificate=identity_certificate("prefix:8")))
    put("approx", save_plan, build_plan("identity:2", "epsilon=0.5,delta=1e-6",
                                        norm="approx_gamma_2", eta=0.1))
    put("jl", save_projection_plan, build_projection_plan("prefix:8", "epsilon=0.5", "jl", n=200,
                                                          relation="replace", rng=TestRandom(1)))
    put("covariance", save_projection_plan,
        build_projection_plan("parity:4:2", "epsilon=0.5,delta=1e-6", "covariance", n=200))
    put("relaxed", save_projection_plan,
        build_projection_plan("marginals:2x2x2:2", "epsilon=0.5,delta=1e-6", "relaxed-projection", n=200))
    put("local", save_local_plan, build_local_plan("prefix:4", "epsilon=1", n=1000, eta=0.1))
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.kinds.structured.plan import save_structured_plan

    put("residual", save_structured_plan,
        build_structured_plan("marginals:2x3x2:2", "epsilon=0.5,delta=1e-6", norm="gamma_2"))
    put("union", save_structured_plan,
        build_structured_plan("vstack(kron(prefix:2,identity:3),kron(identity:2,total:3))", "rho=0.1",
                              strategy="union"))
    return plans


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    return _genuine(tmp_path_factory.mktemp("genuine"))


# ---------------------------------------------------------------------------------------
# mutations


def _leaves(obj: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every leaf and every container of a JSON value."""
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_leaves(v, path + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_leaves(v, path + (i,)))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    parent = _get(obj, path[:-1])
    parent[path[-1]] = value


def _mutate_manifest(m: dict, rng: np.random.Generator) -> str:
    paths = [p for p in _leaves(m) if p]
    path = paths[int(rng.integers(len(paths)))]
    value = _get(m, path)
    op = int(rng.integers(6))
    if op == 0 and isinstance(value, (int, float)) and not isinstance(value, bool):
        new = value * float(rng.choice(_NUMBERS)) if rng.random() < 0.5 else float(rng.choice(_NUMBERS))
        if isinstance(value, int) and rng.random() < 0.5 and math.isfinite(new) and abs(new) < 2 ** 62:
            new = int(new)
        _set(m, path, new)
        return f"number {path}"
    if op == 1 and isinstance(_get(m, path[:-1]), dict):
        del _get(m, path[:-1])[path[-1]]
        return f"drop {path}"
    if op == 2:
        swaps = [str(value), None, True, [value], {"v": value}, 1, 1.0, -7]
        _set(m, path, swaps[int(rng.integers(len(swaps)))])
        return f"type {path}"
    if op == 3 and isinstance(_get(m, path[:-1]), dict):
        donor = paths[int(rng.integers(len(paths)))]
        _set(m, path, copy.deepcopy(_get(m, donor)))
        return f"duplicate {donor}->{path}"
    if op == 4 and isinstance(value, dict):
        value[f"extra{int(rng.integers(100))}"] = float(rng.choice(_NUMBERS))
        return f"extra field {path}"
    if isinstance(value, str):
        _set(m, path, value + "x" if rng.random() < 0.5 else "")
        return f"string {path}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _set(m, path, float(value) * (1 + 1e-6))
        return f"nudge {path}"
    return "none"


def _mutate_arrays(arrays: dict[str, np.ndarray], rng: np.random.Generator) -> str:
    name = sorted(arrays)[int(rng.integers(len(arrays)))]
    a = arrays[name].copy()
    if a.size == 0:
        return "none"
    op = int(rng.integers(5))
    flat = a.reshape(-1)
    i = int(rng.integers(flat.size))
    if op == 0:
        a = a * float(rng.choice([0.5, 0.9, 0.999999, 1.5, 2.0, 1e-3, 1e3, -1.0]))
    elif op == 1:
        flat[i] = float(rng.choice(_NUMBERS)) * (1 if rng.random() < 0.5 else -1)
    elif op == 2:
        flat[i] = 0.0
    elif op == 3:
        a = a * 2.0 ** float(rng.choice([-537.0, -200.0, 200.0, 537.0]))
    else:
        flat[i] = flat[i] * (1 + 1e-7)
    arrays[name] = a
    return f"array {name} op{op}"


def _forge(src: Path, dst: Path, rng: np.random.Generator) -> str:
    """A forgery of ``src`` at ``dst``, written with valid digests; '' when not writable."""
    fmt = json.loads(json.loads(_header_text(src))["__metadata__"]["manifest"])["format"]
    version = json.loads(json.loads(_header_text(src))["__metadata__"]["manifest"])["schema_version"]
    manifest, arrays = container.read(src, fmt, version)
    body = {k: v for k, v in manifest.items()
            if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    what = []
    for _ in range(int(rng.integers(1, 3))):
        if rng.random() < 0.65 or not arrays:
            what.append(_mutate_manifest(body, rng))
        else:
            what.append(_mutate_arrays(arrays, rng))
    with np.errstate(all="ignore"):
        if any(not np.all(np.isfinite(a)) for a in arrays.values()):
            return ""
    try:
        _write(dst, fmt, version, body, arrays)
    except (ValueError, TypeError, OverflowError):
        return ""  # not writable (NaN, inf, non-JSON): not a structurally valid forgery
    return "; ".join(what)


def _header_text(path: Path) -> str:
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        return fh.read(n).decode()


# ---------------------------------------------------------------------------------------
# invariants


def _verify(plan: Any) -> bool:
    from factorize import kinds

    return kinds.verify_plan(plan).passed


def _oracle_structured_scale(plan: Any) -> float:
    """The oracle of :func:`_oracle_required_scale` for a structured plan: its measured
    strategy formed exactly (rationals) block by block over every cell."""
    from factorize.privacy import calibrate

    s = plan.strategy.measured()
    A = []
    for blk in s.blocks:
        names = dict(zip(blk.support, blk.names, strict=True))
        rows = [[Fraction(blk.scale)]]
        for j, n in enumerate(s.sizes):
            F = s.arrays[names[j]] if j in names else np.ones((1, n))
            Fr = [[Fraction(float(v)) for v in r] for r in F]
            rows = [[x * y for x in ra for y in rb] for ra in rows for rb in Fr]
        A.extend(rows)
    return _calibrated(A, plan.noise.family == "laplace", plan.relation.key, plan.guarantee,
                       plan.noise.grid if plan.noise.sampler != "float" else None, s.m,
                       plan.noise.family, calibrate)


def _calibrated(A, l1, relation, g, grid, m, family, calibrate) -> float:
    cols = list(zip(*A, strict=True))

    def size(vec: Any) -> Fraction:
        return sum((abs(c) if l1 else c * c for c in vec), Fraction(0))
    if relation == "add_remove":
        exact = max(size(c) for c in cols)
    else:
        exact = max((size([u - v for u, v in zip(cols[x], cols[y], strict=True)]) for x in range(len(cols))
                     for y in range(len(cols)) if x != y), default=Fraction(0))
    value = float(exact) if l1 else math.sqrt(float(exact))  # the smallest float ≥ the exact value
    while (Fraction(value) if l1 else Fraction(value) ** 2) < exact:
        value = math.nextafter(value, math.inf)
    # the rounding moves only the coordinates a neighbouring change moves: counted exactly
    # (add/remove: a column's support; replace: the union of two columns' supports)
    supports = [{i for i, c in enumerate(col) if c != 0} for col in cols]
    if relation == "add_remove":
        moving = max(len(s) for s in supports)
    else:
        moving = max((len(a | b) for x, a in enumerate(supports) for y, b in enumerate(supports)
                      if x != y), default=1)
    moving = max(1, moving)
    # no rounding at all when A h / γ is an integer for every integer h: integer entries
    # (exact rationals with denominator 1) and γ = 2^-k ≤ 1
    if grid is not None and Fraction(grid) <= 1 and all(c.denominator == 1 for col in cols for c in col):
        moving = 0
    spec = calibrate(g, sensitivity_l2=None if l1 else value, sensitivity_l1=value if l1 else None,
                     grid=grid, dim=m, relation=relation, family=family,
                     spread=moving if grid is not None else None)
    return spec.scale


def _oracle_required_scale(plan: Any) -> float:
    """The noise an independent oracle requires: the measured strategy's sensitivity in exact
    rational arithmetic (add/remove or replace, L1 or L2), calibrated by ``privacy.calibrate``."""
    from functools import reduce

    from factorize.privacy import calibrate
    from factorize.privacy.lattice import measured_factors

    factors = measured_factors(plan.factorization.A_factors)
    rows = [[[Fraction(float(v)) for v in r] for r in F] for F in factors]
    A = reduce(lambda a, b: [[x * y for x in ra for y in rb] for ra in a for rb in b], rows)
    grid = plan.noise.grid if plan.noise.sampler != "float" else None
    return _calibrated(A, plan.noise.family == "laplace", plan.relation.key, plan.guarantee, grid,
                       plan.factorization.strategy_rows, plan.noise.family, calibrate)


def _same_claims(base: dict, forged: dict, path: tuple = ()) -> list[str]:
    """Numbers of the forged manifest that differ from the genuine one (provenance aside)."""
    if (path and path[0] in _INFORMATIONAL) or path in _PARAMETERS:
        return []
    if "witness" in path or "lower_witness" in path:
        return []  # a witness is re-evaluated, not trusted: another one stating the same value is fine
    if path == ("postprocess",) and isinstance(base, dict) and base.get("method") == "nonneg" \
            and forged is None:
        return []  # the optional post-processing step removed: a plan without it, no claim
    if isinstance(base, dict):
        if not isinstance(forged, dict):
            return [str(path)]
        return [d for k in base for d in _same_claims(base[k], forged.get(k), path + (k,))]
    if isinstance(base, list):
        if base == [] and forged is None:
            return []  # an empty listing dropped: the reader's default, the same plan
        if not isinstance(forged, list) or len(forged) != len(base):
            return [str(path)]
        return [d for i, (a, b) in enumerate(zip(base, forged, strict=True)) for d in _same_claims(a, b, path + (i,))]
    if isinstance(base, (int, float)) and not isinstance(base, bool):
        if not isinstance(forged, (int, float)) or isinstance(forged, bool):
            return [str(path)]
        if not abs(base - forged) <= 1e-9 * max(abs(base), abs(forged)) + 1e-12:
            return [str(path)]
    return []


def test_forgeries_never_pass_unsafely(genuine, tmp_path):
    from factorize.executor import run_plan
    from factorize.kinds.factorization.plan import Plan

    names = sorted(genuine)
    manifests = {k: container.read(p, *_fmt(p))[0] for k, p in genuine.items()}
    per_kind = math.ceil(FORGERIES / len(names))
    counts = {k: {"written": 0, "refused": 0, "accepted": 0} for k in names}
    accepted: list[tuple[str, Path, str]] = []
    refused_sample: list[Path] = []
    for kind in names:
        rng = np.random.default_rng([SEED, names.index(kind)])
        written = 0
        attempts = 0
        while written < per_kind and attempts < 20 * per_kind:
            attempts += 1
            dst = tmp_path / f"{kind}.{written}.plan"
            what = _forge(genuine[kind], dst, rng)
            if not what:
                continue
            written += 1
            counts[kind]["written"] += 1
            try:
                plan = kinds.load_plan(dst)
                ok = _verify(plan)
            except PlanError:
                ok = False
            except Exception as exc:  # noqa: BLE001 - invariant 1
                raise AssertionError(f"{kind}: {what}: crashed with {type(exc).__name__}: {exc}") from exc
            if not ok:
                counts[kind]["refused"] += 1
                if kind in ("gaussian", "laplace", "kron", "nonneg") and len(refused_sample) < 12:
                    refused_sample.append(dst)
                else:
                    dst.unlink()
                continue
            counts[kind]["accepted"] += 1
            accepted.append((kind, dst, what))
            # invariant 2: never under-noised
            if isinstance(plan, Plan):
                assert plan.noise.scale >= _oracle_required_scale(plan), (kind, what)
            if kind in ("residual", "union"):
                assert plan.noise.scale >= _oracle_structured_scale(plan), (kind, what)
            # invariant 3: no claim changed
            forged = container.read(dst, *_fmt(dst))[0]
            diff = _same_claims(_claims_only(manifests[kind]), _claims_only(forged))
            assert not diff, (kind, what, diff)
        assert written == per_kind, f"{kind}: only {written} writable forgeries"
    total = sum(c["written"] for c in counts.values())
    assert total >= FORGERIES
    # most forgeries are refused; the accepted ones change nothing the guarantee or a claim rests on
    assert sum(c["refused"] for c in counts.values()) > 0.5 * total, counts

    # invariant 4: no charge without a release (factorization plans through the executor)
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("d", {"type": "approx_dp", "epsilon": 1e6, "delta": 0.5})
    runs = [p for k, p, _ in accepted if k in ("gaussian", "laplace", "kron", "nonneg")][:12]
    for i, p in enumerate(runs + refused_sample):
        try:
            N = kinds.load_plan(p).shape[1]
        except PlanError:
            N = 8
        h = np.arange(N, dtype=np.int64) % 5 + 1
        np.save(tmp_path / "h.npy", h)
        out = tmp_path / f"out{i}.csv"
        before = len(Ledger.open(L).history("d"))
        try:
            run_plan(str(p), str(tmp_path / "h.npy"), str(out), ledger=str(L), dataset="d")
            released = True
        except (PlanError, ValueError):
            released = False
        history = Ledger.open(L).history("d")
        if released:
            assert len(history) == before + 1 and history[-1]["status"] == "released" and out.exists()
        else:
            assert len(history) == before and not out.exists(), p


def _claims_only(m: dict) -> dict:
    return {k: v for k, v in m.items() if k not in ("arrays", "content_sha256", "format",
                                                    "schema_version", *_INFORMATIONAL)}


def _fmt(path: Path) -> tuple[str, int]:
    m = json.loads(json.loads(_header_text(path))["__metadata__"]["manifest"])
    return m["format"], m["schema_version"]


def test_formats_known():
    assert FORMAT == "factorize-plan" and PROJECTION_FORMAT == "factorize-projection-plan"
