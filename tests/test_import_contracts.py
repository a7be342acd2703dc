"""Import contracts, read from the source, every import counted — module level
and inside functions (a lazy import is still a dependency), not ``if TYPE_CHECKING:`` blocks:

* no import circle among the modules of ``factorize``, ``solvers`` and ``workloads``
  (:data:`ALLOWED_CIRCLES` is empty and may only stay so: each entry must still be a circle);
* the trusted side — what ``verify``, ``inspect`` and ``run`` import, from the entry modules of
  :func:`trusted` (the registry, the pipeline, the shared plan rules and every module of every
  plan kind's package but its builders) — reaches no builder or optimiser (:data:`BUILDERS`),
  and imports no private name (``_x``) from another module.

One rule is finer than a module: a plan kind's ``KIND.build`` is the builder side's entry, so
the imports inside the method ``build`` of a kind's ``kind`` module are edges of the node
``<module>:build`` (:data:`BUILD_ENTRY`), never of the module; each such entry may import only
its own package's ``build`` module (:func:`test_each_kinds_build_imports_only_its_builder`).
At run time, ``tests/test_solver_free.py`` verifies, inspects and runs every kind with the
solvers unimportable.
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

#: What verifying, inspecting and running a plan starts from, besides every plan kind's package
#: (:func:`trusted`).
TRUSTED_ENTRIES = ("factorize", "factorize.kinds", "factorize.kinds.protocol", "factorize.plan",
                   "factorize.plan.checks", "factorize.plan.files", "factorize.plan.manifest",
                   "factorize.executor.pipeline")

#: The method of a kind's ``kind`` module whose imports are the builder side's (module docstring).
BUILD_ENTRY = "build"

#: Builders and optimisers (module-name prefixes; and every module of a plan kind's package
#: whose name starts with ``build``, :func:`is_builder`). ``pure_dp.structure`` (the
#: product-workload record shared_kron converts to) is a data type, not an optimiser, and is
#: allowed.
BUILDERS = ("factorize.kinds.factorization.build", "factorize.families",
            "factorize.planner.routes", "factorize.planner.lowrank", "factorize.planner.recovery",
            "factorize.structured.union_build", "factorize.structured.marginal_weights_build",
            "factorize.structured.subspace_bound_build",
            "factorize.pure_dp.api", "factorize.pure_dp.candidates", "factorize.pure_dp.optimizer",
            "factorize.pure_dp.kron", "factorize.pure_dp.one_d", "factorize.pure_dp.p_identity",
            "factorize.pure_dp.flat", "factorize.pure_dp.l1_marginal_weights",
            "factorize.training.banded", "factorize.training.blt", "factorize.training.bisr",
            "factorize.training.multi_epoch",
            "solvers.backends", "solvers.sdp_", "solvers.dual_gamma_f", "solvers.dual_gamma_2",
            "cvxpy")


def _modules() -> dict[str, Path]:
    return source_modules(PACKAGES)


def _is_kind_package_module(m: str) -> bool:
    """A module of a plan kind's package (``factorize.kinds.<name>.<module>``)."""
    parts = m.split(".")
    return len(parts) == 4 and parts[:2] == ["factorize", "kinds"]


def is_builder(m: str) -> bool:
    """A builder or optimiser: a :data:`BUILDERS` prefix, or a kind package's ``build*`` module."""
    return m.startswith(BUILDERS) or (_is_kind_package_module(m) and m.split(".")[3].startswith("build"))


def trusted() -> tuple[str, ...]:
    """:data:`TRUSTED_ENTRIES` and every module of every plan kind's package but its builders."""
    kinds = sorted(m for m in _modules() if _is_kind_package_module(m) and not is_builder(m))
    return TRUSTED_ENTRIES + tuple(kinds)


def _is_kind_module(m: str) -> bool:
    """A plan kind's ``kind`` module (``factorize.kinds.<name>.kind``), which exposes ``KIND``."""
    return _is_kind_package_module(m) and m.endswith(".kind")


def _runtime_imports(tree: ast.AST, build_entry: bool = False):
    """``(import node, inside the build entry)`` for the import nodes outside
    ``if TYPE_CHECKING:`` blocks; with ``build_entry``, whether the node is inside a function
    named :data:`BUILD_ENTRY` (a kind module's ``KIND.build``)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend((n, inside) for n in node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, inside
        entry = build_entry and isinstance(node, ast.FunctionDef) and node.name == BUILD_ENTRY
        stack.extend((n, inside or entry) for n in ast.iter_child_nodes(node))


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
    for module, f in mods.items():
        pkg = module if f.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node, in_build in _runtime_imports(tree, build_entry=_is_kind_module(module)):
            m = f"{module}:{BUILD_ENTRY}" if in_build else module
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "cvxpy":
                        edges[m].add("cvxpy")
                    t = resolve(a.name)
                    if t and t != module:
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
                if t and t != module:
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
    reached = _closure(edges, trusted())
    bad = []
    for m in sorted(reached):
        if is_builder(m):
            chain = [m]
            while reached.get(chain[-1]):
                chain.append(reached[chain[-1]])
            bad.append(" <- ".join(chain))
    assert not bad, "\n".join(bad)


def test_the_trusted_side_imports_no_private_name_across_modules():
    edges, private = _graph()
    reached = _closure(edges, trusted())
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


def test_every_registered_kind_is_on_the_trusted_side():
    """Each kind of the registry (``factorize.kinds.KINDS``) is a ``kind`` module of its own
    package, checked by the contracts above with every module of that package but its builders."""
    from factorize.kinds import KINDS

    roots = set(trusted())
    for name, module in KINDS.items():
        assert module == f"factorize.kinds.{name}.kind", (name, module)
        assert module in roots and module in _modules(), module


def test_each_kinds_build_imports_only_its_builder():
    """The one finer rule (module docstring): a kind's ``build`` entry imports its own
    package's builder and nothing else; no other function of the module is exempt."""
    edges, _ = _graph()
    entries = {m: ts for m, ts in edges.items() if m.endswith(f":{BUILD_ENTRY}")}
    from factorize.kinds import KINDS

    assert set(entries) == {f"{m}:{BUILD_ENTRY}" for m in KINDS.values()}, sorted(entries)
    for entry, targets in entries.items():
        package = entry.rpartition(".")[0]
        assert targets == {f"{package}.build"}, (entry, sorted(targets))


def test_the_build_entry_rule_is_no_wider_than_build():
    """A builder imported by any other function of a kind module is seen (the rule is per
    function, and only for ``build``)."""
    src = "def load():\n    from .build import build\ndef build():\n    from .build import build\n"
    tree = ast.parse(src)
    flags = sorted(inside for _, inside in _runtime_imports(tree, build_entry=True))
    assert flags == [False, True]
