"""Random unions of Kronecker products for the strategy-search generalization tests.

One draw is a :class:`UnionCase`: 1–6 Kronecker products (``vstack`` of ``scale(w, kron(…))``)
over 2–5 attributes with N ≤ ``max_cells``; each factor is an identity, a total, a prefix, all
ranges, ranges of one width, a random 0/1 grouping (a partition of the values, or nested
groups: a chain of prefixes of a random order), a small random explicit matrix, the stack
``vstack(identity:n,total:n)`` or the centring matrix I − 𝟙𝟙ᵀ/n. Explicit
factors are written as ``.npy`` files under the folder given (``file:`` atoms). The draw
depends only on the ``random.Random`` given: a seed replays a case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import prod
from pathlib import Path

import numpy as np

SIZES = (2, 3, 4, 5, 6, 8)
KINDS = ("identity", "total", "prefix", "allrange", "width", "grouping", "nested", "matrix",
         "idtotal", "centred")
#: Factors whose Gram lies in span{I, 𝟙𝟙ᵀ} (the subset algebra's workloads).
INVARIANT_KINDS = ("identity", "total", "idtotal", "centred")


@dataclass(frozen=True)
class UnionCase:
    spec: str
    sizes: tuple[int, ...]
    blocks: int
    invariant: bool  # every factor's Gram in span{I, 𝟙𝟙ᵀ} (WᵀW in the subset algebra)

    @property
    def domain(self) -> str:
        return ",".join(f"a{j}={n}" for j, n in enumerate(self.sizes))


def _matrix(rng: random.Random, n: int, kind: str, folder: Path, tag: str) -> str:
    g = np.random.default_rng(rng.randrange(2 ** 32))
    if kind == "grouping":
        labels = g.integers(0, max(2, n // 2), size=n)
        M = np.array([[1.0 if x == v else 0.0 for x in labels] for v in sorted(set(labels.tolist()))])
    elif kind == "nested":
        order = g.permutation(n)
        cuts = sorted(set(int(c) for c in g.integers(1, n + 1, size=rng.randint(1, 3))))
        M = np.zeros((len(cuts), n))
        for r, c in enumerate(cuts):
            M[r, order[:c]] = 1.0
    else:
        M = np.round(g.normal(size=(rng.randint(1, 3), n)), 3)
        M[0, 0] += 1.0  # never a zero matrix
    path = folder / f"{tag}.npy"
    np.save(path, M)
    return f"file:{path}"


def factor(rng: random.Random, n: int, folder: Path, tag: str, invariant: bool) -> tuple[str, bool]:
    kinds = INVARIANT_KINDS if invariant else KINDS
    kind = rng.choice(kinds)
    if kind in ("identity", "total", "prefix", "allrange"):
        return f"{kind}:{n}", kind in ("identity", "total")
    if kind == "idtotal":
        return f"vstack(identity:{n},total:{n})", True
    if kind == "centred":  # I − 𝟙𝟙ᵀ/n: its Gram is the contrast projector C
        path = folder / f"{tag}.npy"
        np.save(path, np.eye(n) - np.full((n, n), 1.0 / n))
        return f"file:{path}", True
    if kind == "width":
        return f"width:{n}:{rng.randint(1, n)}", False
    return _matrix(rng, n, kind, folder, tag), False


def draw(rng: random.Random, folder: Path, *, max_cells: int = 256,
         invariant: bool | None = None) -> UnionCase:
    """One random union (module docstring); ``invariant`` forces identity/total factors."""
    while True:
        d = rng.randint(2, 5)
        sizes = tuple(rng.choice(SIZES) for _ in range(d))
        if prod(sizes) <= max_cells:
            break
    inv = rng.random() < 0.3 if invariant is None else invariant
    nblocks = rng.randint(1, 6)
    parts, all_inv = [], True
    for b in range(nblocks):
        fs = []
        for j, n in enumerate(sizes):
            f, ok = factor(rng, n, folder, f"f{b}_{j}_{rng.randrange(10 ** 9)}", inv)
            fs.append(f)
            all_inv = all_inv and ok
        if all(f.startswith("total:") for f in fs):  # the total alone: keep one attribute open
            j = rng.randrange(d)
            fs[j] = f"identity:{sizes[j]}"
        block = f"kron({','.join(fs)})"
        if rng.random() < 0.5:
            block = f"scale({rng.choice((0.5, 2, 3, 0.25, 1.5))},{block})"
        parts.append(block)
    spec = parts[0] if nblocks == 1 else f"vstack({','.join(parts)})"
    return UnionCase(spec, sizes, nblocks, all_inv)
