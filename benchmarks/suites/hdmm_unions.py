"""``python -m benchmarks --suite hdmm_unions``: factorize against HDMM run in the same script, on the
unions of Kronecker products HDMM's own builders make. Writes
reports/bench_hdmm_unions.md and .json.

    python -m benchmarks --suite hdmm_unions [--hdmm-python PY] [--hdmm-src DIR] [--only NAME …]
                                        [--restarts 25] [--records N] [--cases FILE]

**HDMM's side** is ``benchmarks/external/hdmm_runner.py``, run as a script by the Python of
HDMM's own environment (``--hdmm-python`` or ``FACTORIZE_HDMM_PYTHON``; HDMM's source tree, for
its journal census builders, ``--hdmm-src`` or ``FACTORIZE_HDMM_SRC``), with one BLAS thread.
It builds each workload with HDMM's builders, exports it as a factorize spec (``file:`` factors
in a temporary folder), and measures HDMM: Laplace RMSE at ε = 1 from
``HDMM.optimize(restarts=25)`` (its default), Gaussian per unit σ from the best of its
``approx=True`` templates, and the time of each (the runner's docstring states the formulas).
``--cases FILE`` reuses a ``cases.json`` the runner wrote before (its factor files must still
exist) instead of running HDMM again; the report says so.

**factorize's side** is the real command line in fresh processes (``hdmm_suite.plan_row``:
``python -m factorize plan | verify | run``), so the figures are those of whatever the planner
does today:

* Laplace: ``plan --privacy epsilon=1`` — the plan's per-query RMSE (its own statement,
  re-derived by ``verify``), the Laplace factorization lower bound √2·γ_F(W) and gap;
* Gaussian per unit σ: ``plan --privacy rho=0.5`` — the plan's value of the γ_F objective
  Δ₂(A)·√(Σ_i‖r_i‖²/k) (per-query RMSE for noise of standard deviation 1 per unit of L2
  sensitivity: the quantity HDMM's ``approx=True`` loss gives as √(loss/k)) and the
  certificate's lower bound;
* the chosen family, plan and verify time; on the census unions also ``run`` on 10⁶ synthetic
  records (``engines.synthetic``, public test data).

**Independent recomputation** (:func:`recompute`): from the plan file's stored strategy A and
HDMM's own dense factor matrices (never factorize's workload parser), the least-squares error
√2·Δ₁(A)·√(tr(W A⁺A⁺ᵀWᵀ)/k) (Laplace, ε = 1) or Δ₂(A)·√(tr(…)/k) (per unit σ): per factor
when A is one Kronecker product (tr = Σ_b w_b² Π_i tr(W_biᵀW_bi (A_iᵀA_i)⁺), support
checked), densely when N ≤ 4,096 (or N ≤ 32,768 for a strategy of at most 4,096 rows), otherwise not (the report says which). With the plan's own
R not necessarily the least-squares one, the recomputed value is ≤ the plan's.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO_ROOT, value_or_dash

NAME = "hdmm_unions"
SUMMARY = ("HDMM run side by side on its own builders' unions of Kronecker products (census SF1, "
           "journal census-1/2, CDF unions, prefix pairs, 2-D ranges, marginals): Laplace ε = 1, "
           "Gaussian per unit σ, bounds, plan and run times")
TITLE = "factorize against HDMM on unions of Kronecker products"

RUNNER = REPO_ROOT / "benchmarks" / "external" / "hdmm_runner.py"
#: dense recomputation up to this many cells
DENSE_MAX_N = 4096
#: ... and for a strategy of at most DENSE_FEW_ROWS rows up to this many cells (A⁺ from the
#: thin SVD of A, m²N; the symmetric family's census-1 plan: m = 3,112, N = 29,440)
DENSE_FEW_ROWS_MAX_N = 1 << 15
DENSE_FEW_ROWS = 4096
#: the census attribute names the runner gives; cases over them run on synthetic records
CENSUS_ATTRS = {"sex", "hispanic", "race", "relationship", "age", "state"}


def add_arguments(parser) -> None:
    parser.add_argument("--hdmm-python", default=os.environ.get("FACTORIZE_HDMM_PYTHON"),
                        help="the Python of HDMM's environment (default $FACTORIZE_HDMM_PYTHON)")
    parser.add_argument("--hdmm-src", default=os.environ.get("FACTORIZE_HDMM_SRC"),
                        help="HDMM's source tree, dpcomp-org/hdmm (default $FACTORIZE_HDMM_SRC)")
    parser.add_argument("--restarts", type=int, default=25, help="HDMM.optimize(restarts=…) (default 25)")
    parser.add_argument("--records", type=int, default=1_000_000,
                        help="synthetic records the census unions run on (0: no runs)")
    parser.add_argument("--only", nargs="*", default=None, help="cases whose name contains one of these")
    parser.add_argument("--cases", default=None,
                        help="reuse this cases.json of an earlier runner call instead of running HDMM")


# ---------------------------------------------------------------------------------------
# HDMM's side
# ---------------------------------------------------------------------------------------
def run_hdmm(args, folder: Path) -> tuple[list[dict], dict]:
    """Run the HDMM runner in HDMM's environment; its cases and metadata. A missing or broken
    environment is an :class:`~factorize.errors.EnvironmentProblem` naming the option."""
    from benchmarks.harness import run_process
    from factorize.errors import EnvironmentProblem

    if args.cases:
        path = Path(args.cases)
        if not path.is_file():
            raise EnvironmentProblem(f"--cases {path}: no such file")
        cases = json.loads(path.read_text())
        meta_path = path.with_name("hdmm_meta.json")
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        meta["reused_cases"] = str(path)
        return cases, meta
    py, src = args.hdmm_python, args.hdmm_src
    if not py or not Path(py).is_file():
        raise EnvironmentProblem(
            f"HDMM's Python not found ({py!r}): pass --hdmm-python PATH or set FACTORIZE_HDMM_PYTHON "
            "to the interpreter of an environment where `import hdmm` works (dpcomp-org/hdmm)")
    if not src or not (Path(src) / "experiments" / "journal" / "benchmarks.py").is_file():
        raise EnvironmentProblem(
            f"HDMM's source tree not found ({src!r}): pass --hdmm-src DIR or set FACTORIZE_HDMM_SRC to a "
            "checkout of dpcomp-org/hdmm (it needs experiments/journal/ for the census builders)")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [py, str(RUNNER), "--hdmm-src", src, "--out", str(folder), "--restarts", str(args.restarts)]
    if args.only:
        cmd += ["--only", *args.only]
    p = run_process(cmd, env=env)
    if p.returncode != 0:
        raise EnvironmentProblem(f"the HDMM runner failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    print(p.stdout, flush=True)
    meta = json.loads((folder / "hdmm_meta.json").read_text())
    meta.update(wall_s=p.wall_s, cpu_s=p.cpu_s, peak_rss_mib=p.peak_rss_mib)
    return json.loads((folder / "cases.json").read_text()), meta


# ---------------------------------------------------------------------------------------
# independent recomputation from a plan's strategy and HDMM's factor matrices
# ---------------------------------------------------------------------------------------
def dense_trace(W: Any, A: Any) -> tuple[float, float]:
    """tr(W A⁺A⁺ᵀWᵀ) = ‖W A⁺‖_F² and the relative residual ‖W A⁺A − W‖/‖W‖. For a strategy
    with fewer rows than columns through its m×m Gram, ``A⁺ = Aᵀ(AAᵀ)⁺``: with ``B = W Aᵀ`` and
    ``C = (AAᵀ)⁺``, ``‖W A⁺‖² = tr(C BᵀB C)`` and ``‖W A⁺A − W‖² = ‖W‖² − tr(B C Bᵀ)`` (A⁺A is
    the orthogonal projection on A's row space) — O(kmN) instead of an SVD of A."""
    import numpy as np

    m, N = A.shape
    if m >= N:
        X = W @ np.linalg.pinv(A)
        return float(np.sum(X * X)), float(np.linalg.norm(X @ A - W) / np.linalg.norm(W))
    B = W @ A.T
    C = np.linalg.pinv(A @ A.T, hermitian=True)
    BC = B @ C
    tr = float(np.sum(BC * BC))
    w2 = float(np.sum(W * W))
    resid2 = max(w2 - float(np.sum(BC * B)), 0.0)
    return tr, math.sqrt(resid2 / w2)


def plan_strategy(plan: Any) -> tuple[list[Any] | None, Any]:
    """(Kronecker factors of A, or None; a callable giving dense A, or None) from a plan file:
    a structured strategy of one block, or a Kronecker factorization, gives its factors."""
    import numpy as np

    if hasattr(plan, "strategy"):  # structured
        st = plan.strategy
        if len(st.blocks) == 1 and st.blocks[0].mix is None:  # s · ⊗_j F_j (1ᵀ off the support)
            blk = st.blocks[0]
            named = {j: np.asarray(st.arrays[n], dtype=float) for j, n in zip(blk.support, blk.names, strict=True)}
            fs = [named.get(j, np.ones((1, n))) for j, n in enumerate(st.sizes)]
            return [blk.scale * fs[0], *fs[1:]], None
        small = st.N <= DENSE_MAX_N or (st.N <= DENSE_FEW_ROWS_MAX_N and st.m <= DENSE_FEW_ROWS)
        return None, (st.dense if small else None)
    fact = plan.factorization
    if fact.is_kron:
        return [np.asarray(A, dtype=float) for A in fact.A_factors], None
    return None, (fact.A_dense if fact.shape[1] <= DENSE_MAX_N else None)


def recompute(plan: Any, case: dict, noise: str) -> dict:
    """The plan's error recomputed from its strategy and HDMM's factors (module docstring)."""
    import numpy as np

    from benchmarks.external.hdmm_runner import kron_l1, kron_l2, kron_strategy_trace

    blocks = [(float(b["weight"]), [np.load(f, allow_pickle=False) for f in b["factors"]])
              for b in case["block_factors"]]
    k = sum(int(np.prod([M.shape[0] for M in Ws])) for _, Ws in blocks)
    kron, dense = plan_strategy(plan)
    if kron is not None and len(kron) == len(blocks[0][1]):
        tr, resid = kron_strategy_trace(blocks, kron)
        d1, d2 = kron_l1(kron), kron_l2(kron)
        how = "per factor (one Kronecker strategy)"
    elif dense is not None:
        def kron_all(ms: list[Any]) -> Any:
            out = np.ones((1, 1))
            for M in ms:
                out = np.kron(out, M)
            return out

        W = np.vstack([w * kron_all(Ws) for w, Ws in blocks])
        A = np.asarray(dense(), dtype=float)
        tr, resid = dense_trace(W, A)
        d1, d2 = kron_l1([A]), kron_l2([A])
        how = f"dense (N = {A.shape[1]})"
    else:
        return {"method": None, "why": "strategy is not one Kronecker product and too large to "
                f"form densely (N > {DENSE_MAX_N:,}, or N > {DENSE_FEW_ROWS_MAX_N:,} or more than "
                f"{DENSE_FEW_ROWS:,} rows): not recomputed"}
    value = (math.sqrt(2.0) * d1 if noise == "laplace" else d2) * math.sqrt(tr / k)
    return {"method": how, "value": value, "support_residual": resid, "k": k}


# ---------------------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------------------
def _is_census(case: dict) -> bool:
    names = {part.split("=")[0] for part in case["domain"].split(",")}
    return names <= CENSUS_ATTRS


def _records(case: dict, folder: Path, n: int, cache: dict) -> Path:
    """n synthetic public records over the case's domain, columns named as its attributes."""
    import pyarrow.parquet as pq

    from factorize.engines.synthetic import synthetic_records

    if case["domain"] not in cache:
        names = [p.split("=")[0] for p in case["domain"].split(",")]
        sizes = [int(p.split("=")[1]) for p in case["domain"].split(",")]
        path = folder / f"records_{len(cache)}.parquet"
        synthetic_records(n, sizes, 2018, path)
        pq.write_table(pq.read_table(path).rename_columns(names), path)
        cache[case["domain"]] = path
    return cache[case["domain"]]


def run(args, harness):
    from benchmarks.harness import Report
    from benchmarks.suites.hdmm_suite import plan_row

    load = harness.load_start
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp)
        cases, meta = run_hdmm(args, w / "hdmm")
        data_cache: dict[str, Path] = {}
        for case in cases:
            if args.only and not any(o in case["name"] for o in args.only):
                continue
            data = (_records(case, w, args.records, data_cache)
                    if args.records > 0 and _is_census(case) else None)
            row: dict[str, Any] = {"case": {k: v for k, v in case.items() if k != "block_factors"}}
            for key, privacy in (("laplace", "epsilon=1"), ("gaussian", "rho=0.5")):
                try:
                    row[key] = plan_row(case["name"], case["spec"], w, privacy=privacy, domain=case["domain"],
                                        data=data, check=lambda plan, c=case, n=key: recompute(plan, c, n))
                except Exception as exc:  # a refused or failed plan is a result of the benchmark
                    row[key] = {"failed": f"{type(exc).__name__}: {exc}"[:400]}
                x = row[key]
                print(case["name"], key, x.get("rmse"), x.get("plan_s"), x.get("failed", ""), flush=True)
            if _is_census(case):  # the worst query's σ (γ₂), certified: no HDMM counterpart
                try:
                    row["gamma_2"] = plan_row(case["name"], case["spec"], w, privacy="rho=0.5",
                                              domain=case["domain"], norm="gamma_2")
                except Exception as exc:
                    row["gamma_2"] = {"failed": f"{type(exc).__name__}: {exc}"[:400]}
            rows.append(row)
    report = {"load_before": list(load or []), "records": args.records, "hdmm": meta, "rows": rows,
              "date": harness.started[:10]}
    text = render(report)
    print(text)
    return Report(TITLE, text, report)


# ---------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------
def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None else f"{a / b:.3f}"


def _verdict(a: float | None, b: float | None) -> str:
    """≤ HDMM when factorize's figure is at most HDMM's (to 4 significant digits: HDMM's own
    figures come from a local optimiser, and an equal optimum must not read as a loss)."""
    if a is None or b is None:
        return "—"
    return "yes" if a <= b * (1 + 5e-5) else "**no**"


def _templates(g: dict) -> str:
    """Each approx=True template's per-σ figure (the best in bold; 'raised' where it failed)."""
    short = {"DefaultKron": "Kron", "DefaultUnionKron": "UnionKron", "Marginals": "Marginals"}
    out = []
    for name, x in g.get("templates", {}).items():
        v = "raised" if x.get("per_sigma") is None else f"{x['per_sigma']:.4g}"
        out.append(f"**{short.get(name, name)} {v}**" if name == g.get("template") else f"{short.get(name, name)} {v}")
    return ", ".join(out) or str(g.get("template"))


def _gaussian_value(g: dict) -> float | None:
    return g.get("value") if "failed" not in g else None


def render(report: dict) -> str:  # noqa: C901 (counted allow-list)
    """The suite's text after the common header (machine, versions, load: the harness)."""
    hd = report["hdmm"]
    lines = [
        "Regenerate: `python -m benchmarks --suite hdmm_unions --hdmm-python PY --hdmm-src DIR` (HDMM "
        "from github.com/dpcomp-org/hdmm, commit 5aa9df93, in its own virtual environment). "
        "HDMM and factorize run in the same script, on the same machine, one BLAS thread each.",
        "",
        "Definitions. *Laplace RMSE* at ε = 1: per-query root mean squared error √2·Δ₁(A)·"
        "√(tr(W A⁺A⁺ᵀWᵀ)/k) (Δ₁ = largest column L1 norm of the strategy A, k queries); for "
        "factorize the plan's own statement (exact discrete Laplace, `--privacy epsilon=1`, "
        "re-derived by `verify`), for HDMM the error of the strategy `HDMM.optimize(restarts="
        f"{hd.get('restarts', 25)})` returns (its default: KronPIdentity and Marginals templates), "
        "recomputed by the runner. *Gaussian per unit σ*: Δ₂(A)·√(tr(W A⁺A⁺ᵀWᵀ)/k), the "
        "per-query RMSE when the noise has standard deviation 1 per unit of L2 sensitivity "
        "(Δ₂ = largest column L2 norm); for factorize the γ_F value of the `--privacy rho=0.5` "
        "plan (at ρ = 0.5, σ = Δ₂, so it is also that plan's RMSE up to rounding), for HDMM "
        "√(loss/k) of the best of its `approx=True` templates (DefaultKron, DefaultUnionKron, "
        "Marginals; their strategies have Δ₂ ≤ 1; each template's own figure is listed in the second table, "
        "so that a figure quoted from one template can be compared). *ratio* = factorize / HDMM; *≤ HDMM* is "
        "yes when the ratio is at most 1 (to 5·10⁻⁵). *bound*: factorize's certified lower "
        "bound on any factorization mechanism (Laplace: √2·γ_F(W); Gaussian: the γ_F "
        "certificate's lower bound); *gap* = figure / bound.",
        "",
        "| workload | N | blocks | k | Laplace RMSE factorize | HDMM | ratio | ≤ HDMM | bound | gap "
        "| Gaussian per σ factorize | HDMM | ratio | ≤ HDMM | bound | gap |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in report["rows"]:
        c, lap, gau = r["case"], r["laplace"], r["gaussian"]
        lr = lap.get("rmse") if "failed" not in lap else None
        gv = _gaussian_value(gau)
        lb = lap.get("laplace_bound") if lr is not None else None
        gb = gau.get("lower") if gv is not None else None
        lines.append(
            f"| {c['name']} | {c['N']:,} | {c['blocks']} | {c['k']:,} | "
            f"{value_or_dash(lr, '.4g') if lr is not None else 'failed'} | {c['hdmm_laplace_rmse']:.4g} | "
            f"{_ratio(lr, c['hdmm_laplace_rmse'])} | {_verdict(lr, c['hdmm_laplace_rmse'])} | "
            f"{value_or_dash(lb, '.4g')} | {_ratio(lr, lb)} | "
            f"{value_or_dash(gv, '.4g') if gv is not None else 'failed'} | {c['hdmm_gaussian_per_sigma']:.4g} | "
            f"{_ratio(gv, c['hdmm_gaussian_per_sigma'])} | {_verdict(gv, c['hdmm_gaussian_per_sigma'])} | "
            f"{value_or_dash(gb, '.4g')} | {_ratio(gv, gb)} |")
    lines += ["", "Strategies and times (seconds, wall clock; factorize: the CLI in a fresh process, "
              "imports included; HDMM: the optimisation alone, in the runner's process):", "",
              "| workload | factorize Laplace: family | plan s | verify s | HDMM Laplace: template | s "
              "| factorize Gaussian: family | plan s | HDMM Gaussian: each template (best in bold) | s "
              "| run s on records "
              "(Laplace / Gaussian) |",
              "|---|---|---:|---:|---|---:|---|---:|---|---:|---:|"]
    for r in report["rows"]:
        c, lap, gau = r["case"], r["laplace"], r["gaussian"]

        def fam(x: dict) -> str:
            if "failed" in x:
                return "failed"
            return str(x.get("chosen") or x.get("kind"))

        run_s = ("—" if "run_s" not in lap else
                 f"{lap['run_s']:.1f} / {value_or_dash(gau.get('run_s'), '.1f')}")
        lines.append(
            f"| {c['name']} | {fam(lap)} | {value_or_dash(lap.get('plan_s'), '.1f')} | "
            f"{value_or_dash(lap.get('verify_s'), '.1f')} | {c['hdmm_laplace']['template']} | "
            f"{c['hdmm_laplace_seconds']:.1f} | {fam(gau)} | {value_or_dash(gau.get('plan_s'), '.1f')} | "
            f"{_templates(c['hdmm_gaussian'])} | {c['hdmm_gaussian_seconds']:.1f} | {run_s} |")
    lines += ["", "Independent recomputation of factorize's figures from each plan file's strategy and "
              "HDMM's own dense factor matrices (least-squares reconstruction; ≤ the plan's figure when "
              "the plan's R is not the least-squares one; *support* = relative residual of W A⁺A = W):", "",
              "| workload | noise | plan's figure | recomputed | rel. difference | support | how |",
              "|---|---|---:|---:|---:|---:|---|"]
    for r in report["rows"]:
        for key, label in (("laplace", "Laplace"), ("gaussian", "Gaussian")):
            x = r[key]
            if "failed" in x:
                continue
            fig = x["rmse"] if key == "laplace" else x.get("value")
            chk = x.get("check") or {}
            if chk.get("method") is None:
                lines.append(f"| {r['case']['name']} | {label} | {fig:.6g} | — | — | — | "
                             f"{chk.get('why', 'not recomputed')} |")
                continue
            lines.append(f"| {r['case']['name']} | {label} | {fig:.6g} | {chk['value']:.6g} | "
                         f"{(chk['value'] - fig) / fig:+.2e} | {chk['support_residual']:.1e} | {chk['method']} |")
    g2 = [r for r in report["rows"] if "gamma_2" in r]
    if g2:
        lines += ["", "The worst query (γ₂, `plan --norm gamma_2 --privacy rho=0.5`) on the census unions: the "
                  "largest per-query standard deviation per unit σ, its certified lower bound (re-derived by "
                  "`verify`) and the gap; HDMM optimises no worst-query objective.", "",
                  "| workload | family | worst-query σ | certified bound | gap | plan s | verify s |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in g2:
            x = r["gamma_2"]
            if "failed" in x:
                lines.append(f"| {r['case']['name']} | failed | — | — | — | — | — |")
                continue
            gap = "—" if not x.get("lower") else f"{x['value'] / x['lower'] - 1:.1e}"
            lines.append(f"| {r['case']['name']} | {x.get('chosen') or x.get('kind')} | {x['value']:.6g} | "
                         f"{x['lower']:.6g} | {gap} | {x['plan_s']:.1f} | {x['verify_s']:.1f} |")
    failed = [(r["case"]["name"], k, r[k]["failed"]) for r in report["rows"]
              for k in ("laplace", "gaussian", "gamma_2") if k in r and "failed" in r[k]]
    if failed:
        lines += ["", "Plans that failed or were refused:", ""] + [f"- {n} ({k}): {msg}" for n, k, msg in failed]
    broken = [(r["case"]["name"], t, x["error"]) for r in report["rows"]
              for t, x in r["case"]["hdmm_gaussian"].get("templates", {}).items() if "error" in x]
    if broken:
        lines += ["", "HDMM `approx=True` templates that raised (the best of the others is HDMM's Gaussian "
                  "figure; the AttributeError is HDMM's `McKennaConvex` reading `self._loss` before setting "
                  "it when its first Cholesky fails, i.e. when a factor's Gram matrix is singular):", ""]
        lines += [f"- {n}: {t}: `{e}`" for n, t, e in broken]
    lines += ["", "Workloads as HDMM builds them (the spec each was exported to is in the JSON):", ""]
    for r in report["rows"]:
        lines.append(f"- {r['case']['name']}: `{r['case']['hdmm_source']}`, domain `{r['case']['domain']}`")
    note = [f"HDMM ran under numpy {hd.get('numpy')}, scipy {hd.get('scipy')}, Python {hd.get('python')}, "
            f"numpy's global seed {hd.get('seed')} (HDMM's templates draw their random starts from it)"]
    if hd.get("numpy2_sensitivity_patch"):
        note.append("HDMM's `EkteloMatrix.sensitivity` (`np.max(np.abs(self).sum(axis=0))`) raises under "
                    "numpy 2 because scipy's LinearOperator sets `__array_ufunc__ = None`; the runner "
                    "replaces it by the same formula calling `self.__abs__()` directly (same value)")
    if hd.get("reused_cases"):
        note.append(f"HDMM's figures were reused from `{hd['reused_cases']}` (not re-run in this call)")
    elif hd.get("wall_s") is not None:
        note.append(f"the HDMM runner took {hd['wall_s']:.0f} s wall, {hd['cpu_s']:.0f} s CPU, "
                    f"{hd['peak_rss_mib']:.0f} MiB peak")
    if report["records"]:
        note.append(f"census cases ran on {report['records']:,} synthetic public records "
                    "(`engines.synthetic`, seed 2018; Parquet, DuckDB, exact noise)")
    lines += ["", "Notes: " + "; ".join(note) + "."]
    return "\n".join(lines) + "\n"
