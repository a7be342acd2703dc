"""Import contracts, read from the source, every import counted — module level
and inside functions (a lazy import is still a dependency), not ``if TYPE_CHECKING:`` blocks:

* no import circle among the modules of ``factorize``, ``solvers`` and ``workloads``
  (:data:`ALLOWED_CIRCLES` is empty and may only stay so: each entry must still be a circle);
* the trusted side — what ``verify``, ``inspect`` and ``run`` import, from the entry modules of
  :data:`TRUSTED` — reaches no builder or optimiser (:data:`BUILDERS`), and imports no private
  name (``_x``) from another module.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from tests.source_modules import source_modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("factorize", "solvers", "workloads")

#: Import circles still allowed, with why: each must still be a circle (the list only shrinks).
ALLOWED_CIRCLES: set[frozenset[str]] = set()

#: What verifying, inspecting and running a plan starts from.
TRUSTED = ("factorize.plan.checks", "factorize.plan.structured_checks", "factorize.plan.registry",
           "factorize.plan.plan_file", "factorize.plan.structured_plan", "factorize.executor.pipeline",
           "factorize.executor.kinds", "factorize.local.plan", "factorize.plan.projection_plan")

#: Builders and optimisers (module-name prefixes). ``pure_dp.structure`` (the product-workload
#: record shared_kron converts to) is a data type, not an optimiser, and is allowed.
BUILDERS = ("factorize.plan.build", "factorize.families", "factorize.local.build",
            "factorize.planner.routes", "factorize.planner.lowrank", "factorize.planner.recovery",
            "factorize.structured.union_build", "factorize.structured.marginal_weights_build",
            "factorize.structured.subspace_bound_build",
            "factorize.pure_dp.api", "factorize.pure_dp.candidates", "factorize.pure_dp.optimizer",
            "factorize.pure_dp.kron", "factorize.pure_dp.one_d", "factorize.pure_dp.p_identity",
            "factorize.pure_dp.flat", "factorize.pure_dp.l1_marginal_weights",
            "solvers.backends", "solvers.sdp_", "solvers.dual_gamma_f", "solvers.dual_gamma_2",
            "cvxpy")


def _modules() -> dict[str, Path]:
    return source_modules(PACKAGES)


def _runtime_imports(tree: ast.AST):
    """Import nodes outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


@lru_cache(maxsize=1)
def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str]]]]:
    """(module -> imported modules (ours, plus 'cvxpy'), module -> [(source, private name)])."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    private: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "cvxpy":
                        edges[m].add("cvxpy")
                    t = resolve(a.name)
                    if t and t != m:
                        edges[m].add(t)
                continue
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] == "cvxpy":
                edges[m].add("cvxpy")
            for a in node.names:
                t = resolve(f"{source}.{a.name}") or resolve(source)
                if t and t != m:
                    edges[m].add(t)
                    if a.name.startswith("_") and not a.name.startswith("__") and t == resolve(source):
                        private[m].append((source, a.name))
    return edges, private


def _circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(frozenset(comp))
    return out


def _closure(edges: dict[str, set[str]], start: tuple[str, ...]) -> dict[str, str]:
    """Every module reached from ``start``, with the module that first reached it."""
    parent: dict[str, str] = {s: "" for s in start}
    todo = list(start)
    while todo:
        v = todo.pop()
        for w in sorted(edges.get(v, ())):
            if w not in parent:
                parent[w] = v
                todo.append(w)
    return parent


def test_no_import_circles():
    circles = set(_circles(_graph()[0]))
    assert circles <= ALLOWED_CIRCLES, sorted(sorted(c) for c in circles - ALLOWED_CIRCLES)
    assert circles >= ALLOWED_CIRCLES, "an allowed circle is gone: remove it from ALLOWED_CIRCLES"


def test_the_trusted_side_reaches_no_builder():
    edges, _ = _graph()
    reached = _closure(edges, TRUSTED)
    bad = []
    for m in sorted(reached):
        if m.startswith(BUILDERS):
            chain = [m]
            while reached.get(chain[-1]):
                chain.append(reached[chain[-1]])
            bad.append(" <- ".join(chain))
    assert not bad, "\n".join(bad)


def test_the_trusted_side_imports_no_private_name_across_modules():
    edges, private = _graph()
    reached = _closure(edges, TRUSTED)
    bad = [f"{m} imports {name} from {src}" for m in sorted(reached) for src, name in private.get(m, [])]
    assert not bad, "\n".join(bad)


def test_the_contract_sees_a_circle_and_a_builder():
    """The checks can fail: a two-module circle is found, and so is a builder behind a chain."""
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [frozenset({"a", "b"})]
    reached = _closure({"t": {"x"}, "x": {"factorize.families.search"}}, ("t",))
    assert "factorize.families.search" in reached and reached["factorize.families.search"] == "x"


def test_workloads_and_solvers_import_only_the_bottom_of_factorize():
    """ARCHITECTURE.md: ``workloads/`` and ``solvers/`` import nothing of ``factorize`` but its
    bottom modules (errors, numerics, choices)."""
    edges, _ = _graph()
    bottom = {"factorize", "factorize.errors", "factorize.numerics", "factorize.choices"}
    bad = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith(("workloads", "solvers"))
                 for t in ts if t.startswith("factorize") and t not in bottom)
    assert not bad, "\n".join(bad)
