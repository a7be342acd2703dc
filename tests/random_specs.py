"""Random workload specs of the kinds users write, for the randomized end-to-end test.

One draw is a :class:`Case`: a workload spec over 1–4 attributes (N ≤ ``max_cells``), a
guarantee and a neighbouring relation. The specs cover what a user types first:

- a Kronecker product of per-attribute factors — ``identity``, ``total``, ``prefix``,
  ``allrange``, ``width:n:w`` (ranges of one width), ``vstack(identity:n,total:n)``;
- a union (``vstack``) of 2–5 such products, some blocks weighted with ``scale(c, …)``;
- a marginal family (``marginals:…:k`` or ``marginals_upto:…:k``), sometimes weighted.

Every guarantee the CLI takes (pure ε, (ε, δ), ρ) with both neighbouring relations. The
draws depend only on the ``random.Random`` given, so a seed replays a case exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import prod

GUARANTEES = ("epsilon=1", "epsilon=0.5", "epsilon=1,delta=1e-6", "rho=0.5", "rho=0.1")
NEIGHBOURING = ("add_remove", "replace")
SIZES = (2, 2, 3, 4, 5, 7, 8, 16, 32)


@dataclass(frozen=True)
class Case:
    """One random end-to-end case: ``factorize plan --workload spec --privacy privacy
    --neighbouring neighbouring``."""

    spec: str
    privacy: str
    neighbouring: str

    def __str__(self) -> str:
        return (f"--workload '{self.spec}' --privacy {self.privacy} "
                f"--neighbouring {self.neighbouring}")


def factor(rng: random.Random, n: int) -> str:
    """One attribute's factor over ``n`` values."""
    kinds = ["identity", "total", "prefix", "allrange"] + (["width"] if n >= 4 else [])
    kind = rng.choice(kinds)
    if kind == "width":
        return f"width:{n}:{rng.randint(2, max(2, n // 2))}"
    if kind == "identity" and rng.random() < 0.2:
        return f"vstack(identity:{n},total:{n})"
    return f"{kind}:{n}"


def kron(rng: random.Random, sizes: list[int]) -> str:
    """A Kronecker product of one random factor per attribute (the factor alone for one)."""
    parts = [factor(rng, n) for n in sizes]
    return parts[0] if len(parts) == 1 else f"kron({','.join(parts)})"


def workload(rng: random.Random, max_cells: int = 1024) -> str:
    """A random spec over 1–4 attributes and at most ``max_cells`` cells."""
    while True:
        sizes = [rng.choice(SIZES) for _ in range(rng.randint(1, 4))]
        if prod(sizes) <= max_cells:
            break
    r = rng.random()
    if len(sizes) >= 2 and r < 0.25:
        way = rng.randint(1, min(3, len(sizes)))
        family = "marginals_upto" if rng.random() < 0.3 else "marginals"
        spec = f"{family}:{'x'.join(map(str, sizes))}:{way}"
        return f"scale({rng.choice([0.5, 2, 3])},{spec})" if rng.random() < 0.1 else spec
    if r < 0.55:
        return kron(rng, sizes)
    blocks = [kron(rng, sizes) for _ in range(rng.randint(2, 5))]
    blocks = [f"scale({rng.choice([0.5, 2, 3])},{b})" if rng.random() < 0.2 else b for b in blocks]
    return f"vstack({','.join(blocks)})"


def draw(rng: random.Random, max_cells: int = 1024) -> Case:
    """One case: a workload, a guarantee and a neighbouring relation."""
    return Case(workload(rng, max_cells), rng.choice(GUARANTEES), rng.choice(NEIGHBOURING))
