"""HDMM's side of ``python -m benchmarks --suite hdmm_unions``: a standalone script.

Run it with the Python of HDMM's own environment (HDMM at dpcomp-org/hdmm importable, numpy
and scipy; this script never imports factorize, so the two programs share nothing but the
workload matrices)::

    /path/to/hdmm-venv/bin/python benchmarks/external/hdmm_runner.py \\
        --hdmm-src /path/to/hdmm-src --out DIR [--only NAME ...] [--restarts 25]

For each case it

1. builds the workload with HDMM's own builders (``hdmm.workload``; the census tables from
   HDMM's ``experiments/journal/census_workloads.py`` and ``benchmarks.py``);
2. exports it as a factorize workload spec, ``vstack(scale(w,kron(F_1,...,F_d)),...)``: a
   factor is the spec atom ``identity:n`` / ``total:n`` / ``prefix:n`` / ``allrange:n`` when
   its dense matrix equals that atom's (``allrange`` up to the order of its rows), a
   ``vstack`` of such atoms (each possibly ``scale``d) when HDMM built it as a stack, and
   otherwise ``file:DIR/<rows>x<n>_<sha256[:12]>.npy`` holding the factor's dense matrix
   (written once per distinct factor). :func:`union_spec` is the pure part (numpy only) and
   is what ``tests/test_bench_hdmm_unions.py`` checks against factorize's own parser;
3. runs HDMM:

   * **Laplace** at ε = 1: ``hdmm.mechanism.HDMM(W, None, 1).optimize(restarts=R)`` — HDMM's
     default (R restarts of ``KronPIdentity`` with p = max(1, n // 16) and of ``Marginals``;
     the lowest loss wins). The RMSE is recomputed from the strategy it returns:
     ``sqrt(2) · Δ₁(A) · sqrt(tr(W A⁺ A⁺ᵀ Wᵀ) / k)``, for a Kronecker strategy by this
     script's own per-factor traces (pinv of each AᵢᵀAᵢ, support checked), for a marginals
     strategy by HDMM's ``error.expected_error`` (HDMM's marginal algebra);
   * **Gaussian per unit σ**: the best of HDMM's ``approx=True`` templates (``DefaultKron``,
     ``DefaultUnionKron`` over the workload's blocks, ``Marginals``, as HDMM's
     ``experiments/journal/compute_strategies.py`` runs them): ``sqrt(loss / k)`` with
     ``loss = Δ₂(A)² · tr(W A⁺ A⁺ᵀ Wᵀ)`` (HDMM's templates are normalised to Δ₂ ≤ 1; the
     Kronecker one is recomputed here the same way as for Laplace);
   * the wall time of each optimisation.

It writes ``DIR/cases.json``: a list of ``{name, spec, domain, k, N, blocks,
hdmm_laplace_rmse, hdmm_gaussian_per_sigma, hdmm_laplace_seconds, hdmm_gaussian_seconds, …}``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

#: tolerance for recognising a factor as a spec atom (entries are small integers or weights)
ATOL = 1e-12


# ---------------------------------------------------------------------------------------
# pure conversion: dense factors → factorize spec (numpy only, tested without HDMM)
# ---------------------------------------------------------------------------------------
def _weight_text(w: float) -> str:
    """A spec WEIGHT literal: Python's shortest repr (no sign, no 'inf'/'nan')."""
    if not (math.isfinite(w) and w > 0):
        # a plain ValueError: this script runs in HDMM's environment and never imports factorize
        raise ValueError(f"a block weight must be finite and positive, got {w!r}")
    text = repr(float(w))
    return text[:-2] if text.endswith(".0") else text


def _allrange(n: int) -> np.ndarray:
    rows = [np.r_[np.zeros(i), np.ones(j - i), np.zeros(n - j)] for i in range(n) for j in range(i + 1, n + 1)]
    return np.array(rows)


def _same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to the order of the rows."""
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(a[np.lexsort(a.T[::-1])], b[np.lexsort(b.T[::-1])]))


def atom_spec(M: np.ndarray) -> str | None:
    """The spec atom whose matrix is M exactly (``allrange`` up to row order), or None."""
    M = np.asarray(M, dtype=float)
    if M.ndim != 2:
        return None
    m, n = M.shape
    if not np.all(np.abs(M - np.round(M)) <= ATOL):
        return None
    R = np.round(M)
    if m == n and np.array_equal(R, np.eye(n)):
        return f"identity:{n}"
    if m == 1 and np.array_equal(R, np.ones((1, n))):
        return f"total:{n}"
    if m == n and np.array_equal(R, np.tril(np.ones((n, n)))):
        return f"prefix:{n}"
    if m == n * (n + 1) // 2 and n <= 1024 and _same_rows(R, _allrange(n)):
        return f"allrange:{n}"
    return None


def scaled_atom_spec(M: np.ndarray) -> str | None:
    """``atom`` or ``scale(c,atom)`` for M = c · atom with c > 0, else None."""
    M = np.asarray(M, dtype=float)
    nz = M[np.abs(M) > ATOL]
    if nz.size == 0:
        return None
    c = float(nz[0])
    if c <= 0:
        return None
    if abs(c - 1.0) <= ATOL:
        return atom_spec(M)
    inner = atom_spec(M / c)
    return None if inner is None else f"scale({_weight_text(c)},{inner})"


class FactorStore:
    """Writes each distinct non-atom factor once as ``DIR/<rows>x<n>_<sha[:12]>.npy``."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.written: dict[str, Path] = {}

    def file_spec(self, M: np.ndarray) -> str:
        M = np.ascontiguousarray(np.asarray(M, dtype=np.float64))
        digest = hashlib.sha256(repr(M.shape).encode() + M.tobytes()).hexdigest()[:12]
        path = self.folder / f"{M.shape[0]}x{M.shape[1]}_{digest}.npy"
        if digest not in self.written:
            self.folder.mkdir(parents=True, exist_ok=True)
            np.save(path, M, allow_pickle=False)
            self.written[digest] = path
        return f"file:{path}"


def factor_spec(pieces: list[np.ndarray], store: FactorStore) -> str:
    """One Kronecker factor given as the pieces HDMM stacked (one piece: a plain matrix):
    an atom, a ``vstack`` of (scaled) atoms, or a ``file:`` of the whole stacked matrix."""
    if len(pieces) == 1:
        spec = atom_spec(pieces[0])
        return spec if spec is not None else store.file_spec(pieces[0])
    parts = [scaled_atom_spec(P) for P in pieces]
    if all(p is not None for p in parts):
        return "vstack(" + ",".join(p for p in parts if p is not None) + ")"
    return store.file_spec(np.vstack(pieces))


def union_spec(blocks: list[tuple[float, list[list[np.ndarray]]]], store: FactorStore) -> str:
    """``vstack(scale(w,kron(F_1,...,F_d)),...)`` for blocks ``(w, [pieces of F_1, ...])``;
    ``scale`` is left out where w = 1, ``vstack`` where there is one block, ``kron`` where
    there is one factor."""
    out = []
    for w, factors in blocks:
        fs = [factor_spec(p, store) for p in factors]
        body = fs[0] if len(fs) == 1 else "kron(" + ",".join(fs) + ")"
        out.append(body if abs(w - 1.0) <= ATOL else f"scale({_weight_text(w)},{body})")
    return out[0] if len(out) == 1 else "vstack(" + ",".join(out) + ")"


def domain_string(names: list[str], sizes: list[int]) -> str:
    return ",".join(f"{a}={n}" for a, n in zip(names, sizes, strict=True))


# ---------------------------------------------------------------------------------------
# HDMM objects → blocks (duck-typed on HDMM's classes; imported lazily)
# ---------------------------------------------------------------------------------------
def _dense(Q: Any) -> np.ndarray:
    return np.asarray(Q.dense_matrix(), dtype=float)


def factor_pieces(Q: Any) -> list[np.ndarray]:
    """A factor as the pieces HDMM stacked it from (VStack → its parts, weights applied)."""
    from hdmm import matrix

    if isinstance(Q, matrix.VStack):
        return [_dense(P) for P in Q.matrices]
    return [_dense(Q)]


def hdmm_blocks(W: Any, weight: float = 1.0) -> list[tuple[float, list[Any]]]:
    """A union of Kronecker products as (weight, [factor objects]) blocks."""
    from hdmm import matrix

    if isinstance(W, matrix.Weighted):
        return hdmm_blocks(W.base, weight * float(W.weight))
    if isinstance(W, matrix.Kronecker):
        return [(weight, list(W.matrices))]
    if isinstance(W, matrix.VStack) and all(isinstance(X, (matrix.Kronecker, matrix.Weighted, matrix.VStack))
                                            for X in W.matrices):
        out: list[tuple[float, list[Any]]] = []
        for X in W.matrices:
            out += hdmm_blocks(X, weight)
        return out
    return [(weight, [W])]  # a 1-D workload: one factor


def as_union(W: Any) -> Any:
    """The workload as an HDMM VStack of (weighted) Kronecker blocks, as its templates take it."""
    from hdmm import matrix

    blocks = hdmm_blocks(W)
    return matrix.VStack([w * matrix.Kronecker(fs) if w != 1.0 else matrix.Kronecker(fs) for w, fs in blocks])


# ---------------------------------------------------------------------------------------
# independent error of a Kronecker strategy on a union of Kronecker products
# ---------------------------------------------------------------------------------------
def kron_strategy_trace(blocks: list[tuple[float, list[np.ndarray]]], factors: list[np.ndarray]) -> tuple[float, float]:
    """tr(W (AᵀA)⁺ Wᵀ) for A = ⊗ factors and W the stack of blocks w_b · ⊗_i W_bi (dense W_bi),
    as Σ_b w_b² Π_i tr(W_biᵀW_bi (A_iᵀA_i)⁺), and the largest relative residual of the support
    check W_bi (A_iᵀA_i)⁺ A_iᵀA_i = W_bi (the formula is the error only where that is ~0)."""
    grams = [A.T @ A for A in factors]
    pinvs = [np.linalg.pinv(G) for G in grams]
    total, worst = 0.0, 0.0
    for w, Ws in blocks:
        prod = w * w
        for M, P, G in zip(Ws, pinvs, grams, strict=True):
            prod *= float(np.sum((M.T @ M) * P))
            worst = max(worst, float(np.linalg.norm(M @ P @ G - M) / max(np.linalg.norm(M), 1e-300)))
        total += prod
    return total, worst


def _dense_blocks(blocks: list[tuple[float, list[Any]]]) -> list[tuple[float, list[np.ndarray]]]:
    return [(w, [np.vstack(factor_pieces(Q)) for Q in fs]) for w, fs in blocks]


def kron_l1(factors: list[np.ndarray]) -> float:
    """Δ₁ of ⊗ factors: the product of the factors' largest column L1 norms."""
    return float(np.prod([np.abs(A).sum(axis=0).max() for A in factors]))


def kron_l2(factors: list[np.ndarray]) -> float:
    """Δ₂ of ⊗ factors: the product of the factors' largest column L2 norms."""
    return float(np.prod([np.sqrt((A * A).sum(axis=0).max()) for A in factors]))


# ---------------------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------------------
CENSUS = ["sex", "hispanic", "race", "relationship", "age"]


def _journal_module(folder: Path, name: str) -> ModuleType:
    """HDMM's ``experiments/journal/<name>.py``, loaded from its file under the name
    ``hdmm_journal_<name>``: HDMM's ``benchmarks.py`` has the name of this repository's
    ``benchmarks`` package, so it is not imported by its own name."""
    spec = importlib.util.spec_from_file_location(f"hdmm_journal_{name}", folder / f"{name}.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{folder / (name + '.py')}: not a Python module")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases(src: Path) -> dict[str, Callable[[], tuple[Any, list[str], str]]]:
    """name → builder returning (HDMM workload, attribute names, where HDMM builds it)."""
    journal = src / "experiments" / "journal"
    sys.path.insert(0, str(journal))  # the journal's modules import each other by name
    import census_workloads as cw  # HDMM's SF1 Persons tables
    from hdmm import workload as hw

    benchmarks = _journal_module(journal, "benchmarks")  # census-1/2, cps, adult, loans

    def sf1(keys: list[str]) -> Callable[[], tuple[Any, list[str], str]]:
        return lambda: (cw.build_workload(keys), CENSUS,
                        f"census_workloads.build_workload({keys})")

    def cdfs() -> tuple[Any, list[str], str]:
        # the CDF of x by y, and the CDF of y by g
        W = hw.VStack([hw.Kronecker([hw.Prefix(100), hw.Total(2), hw.Identity(100)]),
                       hw.Kronecker([hw.Total(100), hw.Identity(2), hw.Prefix(100)])])
        return W, ["x", "g", "y"], "VStack(Kron(Prefix(100),Total(2),Identity(100)), Kron(Total(100),Identity(2),Prefix(100)))"

    def wmarg() -> tuple[Any, list[str], str]:
        dom = (10, 10, 10, 10, 10)
        wts = {(0, 1): 1.0, (1, 2): 2.0, (2, 3): 3.0, (3, 4): 4.0, (0,): 5.0, (4,): 0.5}
        return (hw.Marginals.fromtuples(dom, wts), [f"a{i}" for i in range(5)],
                f"Marginals.fromtuples({dom}, {wts})")

    return {
        "SF1 persons": (lambda: (cw.SF1_Persons(), CENSUS, "census_workloads.SF1_Persons()")),
        "census-1 (journal)": (lambda: (benchmarks.census()[0], ["sex", "hispanic", "race", "age"],
                                        "benchmarks.census()[0]")),
        "census-2 (journal)": (lambda: (benchmarks.census()[1], ["sex", "hispanic", "race", "age", "state"],
                                        "benchmarks.census()[1]")),
        "SF1 sex-by-age (P12, P12A-I, PCT12, PCT12A-O)": sf1(["P12", "P12A_I", "PCT12", "PCT12A_O"]),
        "SF1 race/Hispanic (P3, P4, P5, P8, P9)": sf1(["P3", "P4", "P5", "P8", "P9"]),
        "SF1 adults (P10, P11)": sf1(["P10", "P11"]),
        "SF1 P12A-I": sf1(["P12A_I"]),
        "union of two CDFs (100, 2, 100)": cdfs,
        "2-way prefix pairs 64^5": (lambda: (benchmarks.DimKKrons([hw.Prefix(64)] * 5, 2), [f"a{i}" for i in range(5)],
                                             "benchmarks.DimKKrons([Prefix(64)]*5, 2)")),
        "2-D ranges 64x64": (lambda: (hw.Range2D(64), ["x", "y"], "workload.Range2D(64)")),
        "2-D prefix 128x128": (lambda: (hw.Prefix2D(128), ["x", "y"], "workload.Prefix2D(128)")),
        "cps-2 (journal)": (lambda: (benchmarks.cps()[1], ["a0", "a1", "a2", "a3", "a4"], "benchmarks.cps()[1]")),
        "adult-2 (journal): 2-way identity pairs": (lambda: (benchmarks.adult()[1], [f"a{i}" for i in range(5)],
                                                             "benchmarks.adult()[1]")),
        "weighted marginals 10^5": wmarg,
    }


def numpy2_compat() -> bool:
    """HDMM's ``EkteloMatrix.sensitivity`` is ``np.max(np.abs(self).sum(axis=0))``, which relies
    on ``np.abs`` dispatching to ``__abs__``; scipy's LinearOperator sets
    ``__array_ufunc__ = None``, so with numpy 2 that call raises TypeError. Where it does,
    replace it by the same formula with ``self.__abs__()`` called directly (same value: the
    largest column L1 norm). Returns whether the patch was applied."""
    from hdmm import matrix

    try:
        matrix.Identity(2).sensitivity()
        return False
    except TypeError:
        matrix.EkteloMatrix.sensitivity = lambda self: np.max(self.__abs__().sum(axis=0))  # type: ignore[method-assign]
        assert matrix.Kronecker([matrix.Identity(2), matrix.Ones(1, 3)]).sensitivity() == 1.0
        return True


def _domain(blocks: list[tuple[float, list[Any]]]) -> list[int]:
    return [int(Q.shape[1]) for Q in blocks[0][1]]


def hdmm_laplace(W: Any, restarts: int) -> dict:
    """HDMM's default Laplace optimisation and the RMSE of its strategy at ε = 1."""
    from hdmm import error, mechanism, workload

    U = as_union(W)
    blocks = hdmm_blocks(W)
    t0 = time.perf_counter()
    mech = mechanism.HDMM(U, None, 1.0)
    mech.optimize(restarts=restarts)
    seconds = time.perf_counter() - t0
    A = mech.strategy
    k = U.shape[0]
    if isinstance(A, workload.Marginals):
        sq = float(error.expected_error(U, A, eps=math.sqrt(2)))  # var = 1: Δ₁² · trace
        return {"rmse": math.sqrt(2.0 * sq / k), "template": "Marginals", "seconds": seconds,
                "check": "hdmm.error.expected_error (marginal algebra)"}
    factors = [np.asarray(Q.dense_matrix(), dtype=float) for Q in A.matrices]
    tr, resid = kron_strategy_trace(_dense_blocks(blocks), factors)
    d1 = kron_l1(factors)
    return {"rmse": math.sqrt(2.0) * d1 * math.sqrt(tr / k), "template": "KronPIdentity", "seconds": seconds,
            "sensitivity_l1": d1, "support_residual": resid,
            "factor_rows": [int(F.shape[0]) for F in factors],
            "check": "independent per-factor traces (this script)"}


def hdmm_gaussian(W: Any) -> dict:
    """The best of HDMM's approx=True templates: per-query RMSE per unit σ (Δ₂-normalised)."""
    from hdmm import templates

    U = as_union(W)
    blocks = hdmm_blocks(W)
    ns = _domain(blocks)
    k = U.shape[0]
    found: dict[str, dict] = {}
    for name, make in (("DefaultKron", lambda: templates.DefaultKron(ns, True)),
                       ("DefaultUnionKron", lambda: templates.DefaultUnionKron(ns, len(U.matrices), True)),
                       ("Marginals", lambda: templates.Marginals(ns, True))):
        t0 = time.perf_counter()
        try:
            temp = make()
            loss = float(temp.optimize(U))
        except Exception as exc:  # a template that does not apply to this workload
            found[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        row: dict[str, Any] = {"per_sigma": math.sqrt(loss / k) if math.isfinite(loss) and loss >= 0 else None,
                               "seconds": time.perf_counter() - t0}
        if name == "DefaultKron" and row["per_sigma"] is not None:
            A = temp.strategy()
            factors = [np.asarray(Q.dense_matrix(), dtype=float) for Q in A.matrices]
            tr, resid = kron_strategy_trace(_dense_blocks(blocks), factors)
            row["recomputed"] = kron_l2(factors) * math.sqrt(tr / k)
            row["support_residual"] = resid
        found[name] = row
    ok = {n: r for n, r in found.items() if r.get("per_sigma") is not None}
    best = min(ok, key=lambda n: ok[n]["per_sigma"])
    return {"per_sigma": ok[best]["per_sigma"], "template": best,
            "seconds": sum(r.get("seconds", 0.0) for r in found.values()), "templates": found}


def run_case(name: str, build: Callable[[], tuple[Any, list[str], str]], out: Path, restarts: int) -> dict:
    W, names, source = build()
    blocks = hdmm_blocks(W)
    sizes = _domain(blocks)
    store = FactorStore(out)
    pieces = [(w, [factor_pieces(Q) for Q in fs]) for w, fs in blocks]
    spec = union_spec(pieces, store)
    dense = FactorStore(out / "dense")  # every factor as HDMM built it, for checks by other code
    block_factors = [{"weight": w, "factors": [dense.file_spec(np.vstack(p))[len("file:"):] for p in ps]}
                     for w, ps in pieces]
    k = int(as_union(W).shape[0])
    N = int(np.prod(sizes, dtype=np.int64))
    lap = hdmm_laplace(W, restarts)
    print(f"  Laplace {lap['rmse']:.4f} ({lap['template']}, {lap['seconds']:.1f}s)", flush=True)
    gau = hdmm_gaussian(W)
    print(f"  Gaussian {gau['per_sigma']:.4f} ({gau['template']}, {gau['seconds']:.1f}s)", flush=True)
    return {"name": name, "spec": spec, "domain": domain_string(names, sizes), "k": k, "N": N,
            "blocks": len(blocks), "hdmm_source": source, "block_factors": block_factors,
            "hdmm_laplace_rmse": lap["rmse"], "hdmm_gaussian_per_sigma": gau["per_sigma"],
            "hdmm_laplace_seconds": lap["seconds"], "hdmm_gaussian_seconds": gau["seconds"],
            "hdmm_laplace": lap, "hdmm_gaussian": gau}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hdmm-src", required=True, type=Path, help="HDMM's source tree (experiments/journal)")
    p.add_argument("--out", required=True, type=Path, help="folder for cases.json and the .npy factors")
    p.add_argument("--only", nargs="*", default=None, help="cases whose name contains one of these")
    p.add_argument("--restarts", type=int, default=25, help="HDMM.optimize(restarts=...) (default 25)")
    p.add_argument("--seed", type=int, default=0, help="numpy's global seed (HDMM's templates draw from it)")
    p.add_argument("--list", action="store_true", help="print the case names and exit")
    args = p.parse_args(argv)
    cases = _cases(args.hdmm_src)
    if args.list:
        print("\n".join(cases))
        return 0
    patched = numpy2_compat()
    np.random.seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, build in cases.items():
        if args.only and not any(o in name for o in args.only):
            continue
        print(name, flush=True)
        rows.append(run_case(name, build, args.out, args.restarts))
        (args.out / "cases.json").write_text(json.dumps(rows, indent=1))
    import scipy

    meta = {"numpy": np.__version__, "scipy": scipy.__version__, "python": sys.version.split()[0],
            "restarts": args.restarts, "seed": args.seed,
            "numpy2_sensitivity_patch": patched}
    (args.out / "hdmm_meta.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
