"""``python -m benchmarks --suite geometric``: error vs dataset size n of the
geometric mechanisms against the factorization mechanism on the same workload, synthetic and
Adult data, empirical next to each mechanism's stated bound; plus the end-to-end time of the
JL mechanism on 10⁴ queries.

    python -m benchmarks --suite geometric [--reps 10] [--out reports/geometric.md]

writes ``reports/geometric.md``, ``reports/geometric.json`` and ``geometric_*.png`` next to
them (the report keeps its name: the plan code and README cite ``reports/geometric.md``).
Releases use the executor's own functions (``release_dense`` / ``release_projection``) with
test-mode noise (``TestRandom``): reproducible, NOT private — an evaluation, not a release.
The same noise seed is used for every mechanism at a given (n, repetition).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.harness import ADULT_DIR

if TYPE_CHECKING:
    import numpy as np

NAME = "geometric"
REPORT = "geometric"
SUMMARY = ("the geometric mechanisms (least squares, ellipsoid, JL, covariance, relaxed projection) "
           "against the factorization mechanism: error vs n, synthetic and Adult; JL end to end")

ADULT = ADULT_DIR / "adult.csv"


def adult_binary(d: int) -> np.ndarray:
    """d binary attributes of Adult (0/1 codes), in a fixed documented order."""
    import csv

    import numpy as np

    with open(ADULT) as fh:
        rows = list(csv.DictReader(fh))
    col = lambda name: np.array([int(r[name]) for r in rows])  # noqa: E731
    feats = [
        col("sex"), col("income>50K"), (col("race") == 0).astype(int),
        (col("native-country") == 0).astype(int), (col("age") >= 37).astype(int),
        (col("education-num") >= 10).astype(int), (col("hours-per-week") >= 40).astype(int),
        (col("capital-gain") > 0).astype(int), (col("marital-status") == 0).astype(int),
        (col("workclass") == 0).astype(int),
    ]
    return np.column_stack(feats[:d]).astype(np.int64)


def adult_age_bins(bins: int) -> np.ndarray:
    import csv

    import numpy as np

    with open(ADULT) as fh:
        age = np.array([int(r["age"]) for r in csv.DictReader(fh)])
    return np.minimum(bins - 1, age * bins // 85)


def cells_of(X: np.ndarray) -> np.ndarray:
    import numpy as np
    d = X.shape[1]
    return X @ (2 ** np.arange(d - 1, -1, -1))


def subsample(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return pool[rng.choice(pool.shape[0], n, replace=n > pool.shape[0])]


def _summarise(res: dict, se: dict, bnd: dict, names: list, factorization_bound: float) -> None:
    """One n's row: the measured RMSE of every mechanism over the repetitions (√ of the mean
    squared error) and its stated bound (the factorization's exact one; the mean of the
    projections' per-release bounds)."""
    import numpy as np

    res[names[0]]["rmse"].append(math.sqrt(np.mean(se[names[0]])))
    res[names[0]]["bound"].append(factorization_bound)
    for m in names[1:]:
        res[m]["rmse"].append(math.sqrt(np.mean(se[m])))
        res[m]["bound"].append(float(np.mean(bnd[m])))


def synthetic_pool(d: int, types: int, seed: int) -> np.ndarray:
    """A sparse population: ``types`` random record types over {0,1}^d, Zipf-weighted."""
    import numpy as np
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, (types, d))
    w = 1.0 / np.arange(1, types + 1)
    return base[rng.choice(types, 100_000, p=w / w.sum())]


# ------------------------------------------------------------------------------------------

def experiment_marginals(reps: int, ns: list[int]) -> dict:
    """All 2-way marginals over 8 binary attributes, (ε=1, δ=1e-6), add/remove neighbours."""
    import numpy as np

    from factorize.executor.release import release_dense
    from factorize.kinds.factorization.build import build_plan
    from factorize.privacy import TestRandom
    from workloads import parse_workload

    W = parse_workload("marginals:2x2x2x2x2x2x2x2:2")
    Wd = W.dense()
    g = "epsilon=1,delta=1e-6"
    plans = {"factorization": build_plan(W, g), "ellipsoid": build_plan(W, g, mechanism="ellipsoid"),
             "least-squares": build_plan(W, g, mechanism="least-squares")}
    out = {"workload": W.spec, "guarantee": g, "relation": "add_remove", "ns": ns, "data": {}}
    pools = {"synthetic (12 record types)": synthetic_pool(8, 12, 1), "Adult (8 binary attributes)": adult_binary(8)}
    for dname, pool in pools.items():
        rng = np.random.default_rng(7)
        res = {m: {"rmse": [], "bound": []} for m in plans}
        for n in ns:
            se = {m: [] for m in plans}
            bnd = []
            for rep in range(reps):
                h = np.bincount(cells_of(subsample(pool, n, rng)), minlength=256).astype(float)
                y = Wd @ h
                for m, plan in plans.items():
                    rel = release_dense(plan, h, TestRandom(1000 * n + rep), workload=W)
                    est = rel.postprocessed if m == "least-squares" else rel.estimate
                    se[m].append(float(np.mean((est - y) ** 2)))
                    if m == "least-squares":
                        bnd.append(rel.metadata["postprocess"]["rmse_bound"])
            for m, plan in plans.items():
                res[m]["rmse"].append(math.sqrt(np.mean(se[m])))
                res[m]["bound"].append(float(np.mean(bnd)) if m == "least-squares"
                                       else plan.expected_error["rmse"])
        out["data"][dname] = res
    out["any_mechanism_lower"] = plans["factorization"].bounds.get("any_mechanism")
    return out


def experiment_jl(reps: int, ns: list[int]) -> dict:
    """All range queries over 40 cells, pure ε = 1, replace neighbours (public n):
    the JL mechanism against the Laplace factorization mechanism (optimal γ_F strategy)."""
    import numpy as np

    from factorize.executor.release import release_dense
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.release import release_projection
    from factorize.privacy import TestRandom
    from workloads import parse_workload

    W = parse_workload("allrange:40")
    Wd = W.dense()
    fact = build_plan(W, "epsilon=1", relation="replace")
    out = {"workload": W.spec, "guarantee": "epsilon=1", "relation": "replace", "ns": ns, "data": {}}
    rng0 = np.random.default_rng(3)
    pools = {"synthetic (4 cells)": rng0.choice(rng0.choice(40, 4, replace=False), 100_000),
             "Adult (age, 40 bins)": adult_age_bins(40)}
    jl_plans = {n: build_projection_plan(W, "epsilon=1", "jl", n=n, rng=TestRandom(n)) for n in ns}
    for dname, pool in pools.items():
        rng = np.random.default_rng(11)
        res = {"factorization (Laplace)": {"rmse": [], "bound": []}, "jl": {"rmse": [], "bound": [], "ell": []}}
        for n in ns:
            sf, sj = [], []
            for rep in range(reps):
                h = np.bincount(subsample(pool, n, rng), minlength=40).astype(float)
                y = Wd @ h
                rf = release_dense(fact, h, TestRandom(2000 * n + rep), workload=W)
                sf.append(float(np.mean((rf.estimate - y) ** 2)))
                plan = jl_plans[n]
                rj = release_projection(plan, plan.arrays["T"] @ y, n, TestRandom(2000 * n + rep),
                                        workload=W, allow_float_noise=True)
                sj.append(float(np.mean((rj.estimate - y) ** 2)))
            res["factorization (Laplace)"]["rmse"].append(math.sqrt(np.mean(sf)))
            res["factorization (Laplace)"]["bound"].append(fact.expected_error["rmse"])
            res["jl"]["rmse"].append(math.sqrt(np.mean(sj)))
            res["jl"]["bound"].append(jl_plans[n].bounds["upper_rmse"])
            res["jl"]["ell"].append(jl_plans[n].decoder["ell"])
        out["data"][dname] = res
    return out


def experiment_moments(reps: int, ns: list[int], d: int = 10) -> dict:
    """2-way parities (±1 second moments) of d binary attributes, (ε=1, δ=1e-6), replace:
    the factorization mechanism (optimal γ_F) against covariance and relaxed-projection."""
    import numpy as np

    from factorize.executor.release import release_dense
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.release import release_projection
    from factorize.privacy import TestRandom
    from workloads import Domain, parse_workload

    W = parse_workload(f"parity:{d}:2")
    dom = Domain([f"a{i}" for i in range(d)], [2] * d)
    g = "epsilon=1,delta=1e-6"
    fact = build_plan(W, g, relation="replace", domain=dom)
    out = {"workload": W.spec, "guarantee": g, "relation": "replace", "ns": ns, "data": {}}
    pools = {"synthetic (12 record types)": synthetic_pool(d, 12, 2), f"Adult ({d} binary attributes)": adult_binary(d)}
    iu = np.triu_indices(d, 1)
    for dname, pool in pools.items():
        rng = np.random.default_rng(13)
        names = ["factorization", "covariance", "relaxed-projection"]
        res = {m: {"rmse": [], "bound": []} for m in names}
        for n in ns:
            plans = {m: build_projection_plan(W, g, m, n=n, domain=dom) for m in names[1:]}
            se = {m: [] for m in names}
            bnd = {m: [] for m in names[1:]}
            for rep in range(reps):
                X = subsample(pool, n, rng)
                S = 1 - 2 * X
                v = (S.T @ S)[iu].astype(float)
                h = np.bincount(cells_of(X), minlength=2 ** d).astype(float)
                rf = release_dense(fact, h, TestRandom(3000 * n + rep), workload=W)
                se["factorization"].append(float(np.mean((rf.estimate - v) ** 2)))
                for m, plan in plans.items():
                    rel = release_projection(plan, v, n, TestRandom(3000 * n + rep), workload=W)
                    se[m].append(float(np.mean((rel.estimate - v) ** 2)))
                    bnd[m].append(rel.metadata["rmse_bound"])
            _summarise(res, se, bnd, names, fact.expected_error["rmse"])
        out["data"][dname] = res
    return out


def experiment_marginals_replace(reps: int, ns: list[int]) -> dict:
    """The same 2-way marginals under replace neighbours (public n): the factorization and
    least-squares plans against the moment plans (covariance, relaxed projection), which
    release the moments of (1, s) and decode the marginal cells from the projected matrix."""
    import numpy as np

    from factorize.executor.release import release_dense
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.plan import moment_layout
    from factorize.kinds.projection.release import release_projection
    from factorize.privacy import TestRandom
    from workloads import parse_workload

    W = parse_workload("marginals:2x2x2x2x2x2x2x2:2")
    Wd = W.dense()
    lay = moment_layout(W)
    g = "epsilon=1,delta=1e-6"
    fact = build_plan(W, g, relation="replace")
    names = ["factorization", "least-squares", "covariance", "relaxed-projection"]
    out = {"workload": W.spec, "guarantee": g, "relation": "replace", "ns": ns, "data": {}}
    pools = {"synthetic (12 record types)": synthetic_pool(8, 12, 1), "Adult (8 binary attributes)": adult_binary(8)}
    for dname, pool in pools.items():
        rng = np.random.default_rng(17)
        res = {m: {"rmse": [], "bound": []} for m in names}
        for n in ns:
            ls = build_plan(W, g, relation="replace", mechanism="least-squares", public_n=n)
            mom = {m: build_projection_plan(W, g, m, n=n) for m in names[2:]}
            se = {m: [] for m in names}
            bnd = {m: [] for m in names[1:]}
            for rep in range(reps):
                X = subsample(pool, n, rng)
                h = np.bincount(cells_of(X), minlength=256).astype(float)
                y = Wd @ h
                codes, counts = np.unique(X, axis=0, return_counts=True)
                v = lay.moments(codes, counts)
                seed = 4000 * n + rep
                se["factorization"].append(float(np.mean((release_dense(fact, h, TestRandom(seed), workload=W).estimate - y) ** 2)))
                rl = release_dense(ls, h, TestRandom(seed), workload=W)
                se["least-squares"].append(float(np.mean((rl.postprocessed - y) ** 2)))
                bnd["least-squares"].append(rl.metadata["postprocess"]["rmse_bound"])
                for m, plan in mom.items():
                    rel = release_projection(plan, v, n, TestRandom(seed), workload=W)
                    se[m].append(float(np.mean((rel.estimate - y) ** 2)))
                    bnd[m].append(rel.metadata["rmse_bound"])
            _summarise(res, se, bnd, names, fact.expected_error["rmse"])
        out["data"][dname] = res
    return out


def jl_end_to_end(n: int = 10_000) -> dict:
    """Plan + verify + release + decode of the JL mechanism on allrange:140 (9870 queries)."""
    import numpy as np

    from benchmarks.harness import measure
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.release import release_projection
    from factorize.kinds.projection.verify import verify_projection_plan
    from factorize.privacy import TestRandom
    from workloads import parse_workload

    def make_plan():
        W = parse_workload("allrange:140")
        return W, build_projection_plan(W, "epsilon=1", "jl", n=n, rng=TestRandom(0))

    def release():
        rng = np.random.default_rng(0)
        h = rng.multinomial(n, rng.dirichlet(np.full(140, 0.3))).astype(float)
        y = W.matvec(h)
        return y, release_projection(plan, plan.arrays["T"] @ y, n, TestRandom(1), workload=check.workload,
                                     allow_float_noise=True)

    tp = measure(make_plan)
    W, plan = tp.result
    tv = measure(lambda: verify_projection_plan(plan, workload=W, raise_on_failure=True))
    check = tv.result
    tr = measure(release)
    y, rel = tr.result
    return {"workload": W.spec, "k": W.shape[0], "N": W.shape[1], "n": n, "ell": plan.decoder["ell"],
            "plan_s": tp.best, "verify_s": tv.best, "release_s": tr.best, "total_s": tp.best + tv.best + tr.best,
            "rmse": float(np.sqrt(np.mean((rel.estimate - y) ** 2))), "bound": plan.bounds["upper_rmse"],
            "decode_iterations": rel.metadata["decode"]["iterations"]}


# ------------------------------------------------------------------------------------------

def plot(exp: dict, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(exp["data"]), figsize=(6.2 * len(exp["data"]), 4.4), squeeze=False)
    for ax, (dname, res) in zip(axes[0], exp["data"].items(), strict=True):
        for i, (m, r) in enumerate(res.items()):
            c = f"C{i}"
            ax.plot(exp["ns"], r["rmse"], "o-", color=c, label=f"{m} (measured)")
            ax.plot(exp["ns"], r["bound"], "--", color=c, alpha=0.7, label=f"{m} (bound)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("dataset size n (records)")
        ax.set_ylabel("RMSE per query (counts)")
        ax.set_title(dname, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(exp: dict) -> list[str]:
    lines = []
    for dname, res in exp["data"].items():
        names = list(res)
        lines.append(f"**{dname}** — RMSE per query, measured (bound)\n")
        lines.append("| n | " + " | ".join(names) + " |")
        lines.append("|---|" + "---|" * len(names))
        for i, n in enumerate(exp["ns"]):
            cells = [f"{res[m]['rmse'][i]:.4g} ({res[m]['bound'][i]:.4g})" for m in names]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def add_arguments(parser) -> None:
    parser.add_argument("--reps", type=int, default=10, help="repetitions per point (fresh subsample and noise)")


def _experiments(reps: int) -> tuple:
    e2e = jl_end_to_end()
    marg = experiment_marginals(reps, [30, 100, 300, 1000, 3000, 10000, 30000])
    marg_rep = experiment_marginals_replace(reps, [30, 100, 300, 1000, 3000, 10000])
    jl = experiment_jl(reps, [100, 300, 1000, 3000, 10000])
    mom = experiment_moments(reps, [30, 100, 300, 1000, 3000])
    return e2e, marg, marg_rep, jl, mom


def run(args, harness):
    from benchmarks.harness import Report

    out = Path(args.out).parent
    out.mkdir(parents=True, exist_ok=True)
    t = harness.measure(lambda: _experiments(args.reps))
    e2e, marg, marg_rep, jl, mom = t.result
    total = t.best
    plot(marg, "2-way marginals, 8 binary attributes, (ε=1, δ=1e-6)", out / "geometric_marginals.png")
    plot(marg_rep, "2-way marginals, 8 binary attributes, (ε=1, δ=1e-6), replace (public n)",
         out / "geometric_marginals_replace.png")
    plot(jl, "all ranges over 40 cells, pure ε=1, replace (public n)", out / "geometric_jl.png")
    plot(mom, "2-way parities of 10 binary attributes, (ε=1, δ=1e-6), replace (public n)",
         out / "geometric_moments.png")
    data = {"reps": args.reps, "seconds": total, "timing": t.as_dict(), "jl_end_to_end": e2e,
            "marginals": marg, "marginals_replace": marg_rep, "jl": jl, "moments": mom}
    i1000 = marg["ns"].index(1000)
    lines = [
        f"The experiments took {total:.0f} s. Every point is the RMSE per query over all queries and "
        f"{args.reps} repetitions (fresh subsample of n records, fresh noise); releases go through "
        "the executor's functions with test-mode noise (reproducible, not private). Dashed lines / "
        "numbers in parentheses are each mechanism's stated bound: the factorization plans' "
        "expected RMSE (exact for their noise), the least-squares bound min(RMSE, √(c·n/k)) + √(2·gap/k) "
        "(n̂ in place of n under add/remove), the JL plan's explicit bound "
        "(`geometry.jl_error_bound`, or the diameter bound), the moment decoders' "
        "`moment_rmse_bound`.", "",
        "## Figure: least squares vs factorization at n = 1,000 (2-way marginals, 8 binary attributes, ε=1, δ=1e-6)", "",
    ]
    for dname, res in marg["data"].items():
        lf, ll = res["factorization"]["rmse"][i1000], res["least-squares"]["rmse"][i1000]
        lines.append(f"- {dname}: least-squares RMSE {ll:.4g} vs factorization {lf:.4g} — "
                     f"{'BELOW' if ll < lf else 'NOT below'} ({ll / lf:.3f}×)")
    lines += ["", f"Any-mechanism lower bound for this workload and guarantee: "
              f"{json.dumps(marg['any_mechanism_lower'], ensure_ascii=False)}", "",
              "![marginals](geometric_marginals.png)", ""]
    lines += table(marg)
    lines += ["## The same marginals under replace neighbours: through the moment bodies", "",
              "Public n. The covariance and relaxed-projection plans release the ±1 moments of "
              "(1, s) ∈ {±1}⁹ and decode every marginal cell from the projected matrix "
              "(`MomentLayout`); least squares projects onto n·conv{w_j} with the public n. The moment "
              "route wins for small n but loses to the factorization at large n: the Frobenius "
              "projection is non-expansive for the matrix, not for the cells, which weight the first "
              "moments d − 1 times (a weighted projection would fix it; not done). Its bound is "
              "therefore f·σ with f = √((d+1)/16), not the unprojected σ·√(3/16).", "",
              "![marginals, replace](geometric_marginals_replace.png)", ""]
    lines += table(marg_rep)
    lines += ["## JL mechanism (pure DP) vs the Laplace factorization mechanism", "",
              f"ℓ chosen by the bound at each n: {jl['data'][next(iter(jl['data']))]['jl']['ell']}.", "",
              "![jl](geometric_jl.png)", ""]
    lines += table(jl)
    lines += ["### JL end to end on 10⁴ queries", "",
              f"allrange:140 (k = {e2e['k']}, N = {e2e['N']}), n = {e2e['n']}, ε = 1, ℓ = {e2e['ell']}: "
              f"plan {e2e['plan_s']:.2f} s, verify {e2e['verify_s']:.2f} s, release + decode "
              f"{e2e['release_s']:.2f} s — total {e2e['total_s']:.2f} s (target ≤ 60 s); "
              f"RMSE {e2e['rmse']:.4g} (bound {e2e['bound']:.4g}), {e2e['decode_iterations']} "
              "Frank–Wolfe iterations.", ""]
    lines += ["## Second moments: covariance (spectraplex) and relaxed projection (elliptope)", "",
              "![moments](geometric_moments.png)", ""]
    lines += table(mom)
    print("\n".join(lines))
    return Report("Geometric mechanisms: error vs dataset size", "\n".join(lines), data)
