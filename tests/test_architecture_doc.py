"""ARCHITECTURE.md names only files and modules that exist, so it cannot go stale on names
silently:

* every path it names — ``factorize/…``, ``solvers/…``, ``workloads/…``, ``tests/…``, and the
  short forms relative to ``factorize/`` (``planner/routes.py``, ``plan/build*.py``) — exists
  (a ``*`` must match at least one file);
* every dotted module it names in backticks (``executor.pipeline.run``, ``factorize.kinds``,
  ``factorize.x.y``) is a module of the tree, and the name after the module, if any, is
  defined in it;
* in the layout tree, every bare file name (``routes.py``) exists inside the folder whose
  entry names it; elsewhere, a bare file name in backticks exists in one of the packages.

It reads names only; whether each sentence about them is true is the document's review.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.source_modules import source_modules

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "ARCHITECTURE.md"
#: Top-level packages a dotted name may start with.
PACKAGES = ("factorize", "solvers", "workloads", "benchmarks")

PATH = re.compile(r"^\.?[\w*-]+(?:/[\w.*-]*)+$")
IN_TEXT_PATH = re.compile(r"(?<![\w./*-])((?:factorize|solvers|workloads|tests|benchmarks)/[\w./*-]*[\w*/])")
BACKTICK = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?$")
QUALIFIED = re.compile(r"(?<![\w.])(factorize(?:\.[A-Za-z_]\w*)+)")
BARE_FILE = re.compile(r"(?<![\w./*-])([\w*]+\.py)\b")
#: Last parts that make a dotted token a file name.
FILE_SUFFIXES = ("py", "md", "json", "toml", "npy", "csv", "mtx", "db", "plan", "lplan")


def _exists(path: str) -> bool:
    """A path relative to the repository or to ``factorize/``; a ``*`` must match."""
    path = path.rstrip("/")
    for base in (ROOT, ROOT / "factorize"):
        if "*" in path:
            if any(base.glob(path)):
                return True
        elif (base / path).exists():
            return True
    return False


def _modules() -> dict[str, Path]:
    return source_modules(PACKAGES)


def _defines(path: Path, name: str) -> bool:
    """``name`` is bound at the module's top level (or served by a lazy ``__getattr__``, which
    names it as a string)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    has_getattr = any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
    return has_getattr and f'"{name}"' in path.read_text(encoding="utf-8")


def _dotted_problem(name: str) -> str | None:
    """None when ``name`` is a module of the tree (absolute, or relative to ``factorize``, or a
    module named by its last part when that is unique) followed by at most a name it defines;
    else what is wrong. Names whose first part is no module of ours (``np.load``) are not ours
    to check: None."""
    mods = _modules()
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:  # a file name, not a module
        return None
    # (candidate, the shortest module prefix that counts)
    candidates = [(parts, 1 if parts[0] in PACKAGES else len(parts) + 1), (["factorize", *parts], 2)]
    unique = [m for m in mods if m.rsplit(".", 1)[-1] == parts[0]]
    if len(unique) == 1:
        head = unique[0].split(".")
        candidates.append(([*head, *parts[1:]], len(head)))
    for cand, shortest in candidates:
        for cut in range(len(cand), shortest - 1, -1):
            module = ".".join(cand[:cut])
            if module in mods:
                rest = cand[cut:]
                if not rest or _defines(mods[module], rest[0]):
                    return None
                return f"{name}: {module} defines no {rest[0]!r}"
    if parts[0] in PACKAGES or (ROOT / "factorize" / parts[0]).exists() \
            or (ROOT / "factorize" / f"{parts[0]}.py").exists():
        return f"{name}: no such module"
    return None


def _tree_problems(block: list[str]) -> list[str]:
    """Bare file names in the layout tree, each looked up under its entry's folder."""
    bad = []
    top = sub = ""
    for line in block:
        if not line.strip():
            continue
        if not line.startswith(" "):  # a top-level folder: ``workloads/   pure math …``
            top, sub = line.split()[0].rstrip("/"), ""
        elif not line.startswith("   "):  # an entry: ``  planner/   …`` or ``  base.py, …   …``
            first = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            sub = first.rstrip("/") if first.endswith("/") else ""
        folder = ROOT / top / sub
        for name in BARE_FILE.findall(line):
            if not any(folder.rglob(name)):
                bad.append(f"{name} (under {folder.relative_to(ROOT)}/): {line.strip()[:80]}")
    return bad


def problems(text: str) -> list[str]:
    """Every name in ``text`` (an ARCHITECTURE.md) that does not exist."""
    bad = []
    blocks = text.split("```")
    prose = "".join(blocks[0::2])
    for token in BACKTICK.findall(prose):
        token = token.strip()
        if "<" in token or " " in token:
            continue
        if PATH.match(token):
            if not _exists(token):
                bad.append(f"path {token}")
            continue
        if BARE_FILE.fullmatch(token):  # ``recovery.py``: a file of one of the packages
            if not any(f for pkg in PACKAGES for f in (ROOT / pkg).rglob(token)):
                bad.append(f"file {token}")
            continue
        m = DOTTED.match(token)
        if m and (p := _dotted_problem(m.group(1))):
            bad.append(p)
    for path in set(IN_TEXT_PATH.findall(text)):
        if "<" not in path and not _exists(path):
            bad.append(f"path {path}")
    for name in set(QUALIFIED.findall(text)):
        if (p := _dotted_problem(name)) is not None:
            bad.append(p)
    for block in blocks[1::2]:
        bad += _tree_problems(block.splitlines())
    return sorted(set(bad))


def test_every_name_in_architecture_md_exists():
    bad = problems(DOC.read_text(encoding="utf-8"))
    assert not bad, "ARCHITECTURE.md names what does not exist:\n" + "\n".join(bad)


def test_the_check_sees_a_bogus_name():
    """The check can fail: a missing path, module, attribute and tree file are each found."""
    text = ("`factorize/nope.py`, `plan/nothing_here.py`, `executor.nowhere`, "
            "`factorize.kinds.no_such_name`, tests/test_absent_file.py, factorize.planner.absent, "
            "`absent_module.py`\n"
            "```\nfactorize/\n  planner/   routes.py, missing_module.py\n```\n")
    found = "\n".join(problems(text))
    for name in ("factorize/nope.py", "plan/nothing_here.py", "executor.nowhere", "no_such_name",
                 "tests/test_absent_file.py", "factorize.planner.absent", "missing_module.py",
                 "absent_module.py"):
        assert name in found, (name, found)
    assert not any(line.startswith("routes.py") for line in found.splitlines()), found
