"""Parsing compact workload spec strings (a small recursive-descent parser, no eval).

Grammar (whitespace around tokens is ignored; names are case-insensitive)::

    spec   := call | atom
    call   := ("kron" | "vstack") "(" spec ("," spec)* ")"
    atom   := "identity" ":" dims        I_n, or ⊗ of I_{n_j} for n_0 x n_1 x ...
            | "total" ":" dims           1 x n ones (⊗ over dims)
            | "prefix" ":" dims          prefix sums (⊗ over dims: prefix:8x8 = kron(prefix:8,prefix:8))
            | "allrange" ":" dims        all ranges (⊗ over dims)
            | "width" ":" INT ":" INT    ranges of width w over n cells (width:n:w)
            | "hadamard" ":" INT         Sylvester Hadamard, INT a power of 2
            | "marginals" ":" dims ":" WAY        all WAY-way marginals
            | "marginals_upto" ":" dims ":" WAY   all marginals of <= WAY attributes
            | "parity" ":" INT ":" WAY   parities of order WAY on {±1}^d
            | "random" ":" INT "x" INT ":" "seed" "=" INT   random ±1, k x n
            | "file" ":" PATH            .npy / .csv / .mtx
    dims   := INT ("x" INT)*

A ``file:`` path extends to the end of the spec at top level; inside ``kron(...)``
or ``vstack(...)`` it ends at the next ``,`` or ``)``.
"""

from __future__ import annotations

from collections.abc import Callable

from .builders import all_range, hadamard, identity, prefix, random_pm1, total, width_range
from .errors import WorkloadError, WorkloadSpecError
from .files import from_file
from .marginals import marginals, marginals_upto, parity
from .operators import KronWorkload, VStackWorkload, Workload

__all__ = ["parse_workload", "ACCEPTED_FORMS"]

ACCEPTED_FORMS: tuple[str, ...] = (
    "identity:N[xN...]",
    "total:N[xN...]",
    "prefix:N[xN...]",
    "allrange:N[xN...]",
    "width:N:W",
    "hadamard:N (N a power of 2)",
    "marginals:N1xN2x...:WAY",
    "marginals_upto:N1xN2x...:WAY",
    "parity:D:WAY",
    "random:KxN:seed=S",
    "file:PATH (.npy, .csv or .mtx)",
    "kron(SPEC,SPEC,...)",
    "vstack(SPEC,SPEC,...)",
)

_MAX_DEPTH = 64
_DIM_BUILDERS: dict[str, Callable[[int], Workload]] = {
    "identity": identity,
    "total": total,
    "prefix": prefix,
    "allrange": all_range,
}
_ATOMS = (*_DIM_BUILDERS, "width", "hadamard", "marginals", "marginals_upto", "parity", "random", "file")
_CALLS = ("kron", "vstack")


def _message(spec: str, problem: str, position: int | None) -> str:
    lines = [f"invalid workload spec {spec!r}: {problem}"]
    if position is not None:
        shown = "".join(" " if c.isspace() else c for c in spec)
        lines.append(f"  at position {position}:")
        lines.append(f"    {shown}")
        lines.append(f"    {' ' * position}^")
    lines.append("  accepted forms: " + ", ".join(ACCEPTED_FORMS))
    return "\n".join(lines)


class _Parser:
    """Recursive-descent parser over one spec string; builds workloads as it goes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    # -- low level ----------------------------------------------------------
    def fail(self, problem: str, position: int | None = -1) -> WorkloadSpecError:
        pos = self.pos if position == -1 else position
        return WorkloadSpecError(_message(self.text, problem, pos), spec=self.text, position=pos)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str, context: str) -> None:
        if self.peek() != char:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of spec"
            raise self.fail(f"expected {char!r} {context}, found {found}")
        self.pos += 1

    def name(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isascii() and
                                             (self.text[self.pos].isalnum() or self.text[self.pos] == "_")):
            self.pos += 1
        if start == self.pos:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of spec"
            raise self.fail(f"expected a workload name, found {found}")
        return self.text[start:self.pos].lower()

    def integer(self, what: str, minimum: int = 1) -> int:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "0123456789":
            self.pos += 1
        kind = "a positive integer" if minimum >= 1 else "a non-negative integer"
        if start == self.pos:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of spec"
            raise self.fail(f"expected {kind} for {what}, found {found}")
        value = int(self.text[start:self.pos])
        if value < minimum:
            raise self.fail(f"expected {kind} for {what}, got {value}", start)
        return value

    def dims(self, what: str) -> list[int]:
        out = [self.integer(what)]
        while self.peek() in ("x", "X"):
            self.pos += 1
            out.append(self.integer(what))
        return out

    # -- grammar ------------------------------------------------------------
    def parse(self) -> Workload:
        if not self.text.strip():
            raise self.fail("the spec is empty; expected a workload", None)
        workload = self.spec(depth=0, top=True)
        if self.peek():
            raise self.fail("unexpected text after the end of the workload spec")
        return workload

    def spec(self, depth: int, top: bool) -> Workload:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nesting deeper than {_MAX_DEPTH} levels")
        self.skip_ws()
        start = self.pos
        name = self.name()
        if name in _CALLS:
            return self.call(name, start, depth)
        if name in _ATOMS:
            self.expect(":", f"after {name!r}")
            return self.atom(name, start, top)
        raise self.fail(
            f"unknown workload {name!r}; expected one of {', '.join(_ATOMS + _CALLS)}", start
        )

    def call(self, name: str, start: int, depth: int) -> Workload:
        self.expect("(", f"after {name!r}")
        args: list[Workload] = []
        while True:
            if self.peek() in (")", ",", ""):
                raise self.fail(f"expected a workload spec as argument {len(args) + 1} of {name}(...)")
            args.append(self.spec(depth + 1, top=False))
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == ")":
                self.pos += 1
                break
            else:
                found = repr(c) if c else "end of spec"
                raise self.fail(f"expected ',' or ')' in {name}(...), found {found}")
        normalized = f"{name}({','.join(a.spec or '' for a in args)})"
        cls = KronWorkload if name == "kron" else VStackWorkload
        return self.build(lambda: cls(args), normalized, start)

    def atom(self, name: str, start: int, top: bool) -> Workload:
        if name in _DIM_BUILDERS:
            dims = self.dims(f"the size in {name}:")
            normalized = f"{name}:{'x'.join(map(str, dims))}"
            builder = _DIM_BUILDERS[name]
            if len(dims) == 1:
                return self.build(lambda: builder(dims[0]), normalized, start)
            return self.build(lambda: KronWorkload([builder(n) for n in dims]), normalized, start)
        if name == "width":
            n = self.integer("the domain size n in width:n:w")
            self.expect(":", "between n and w in width:n:w")
            w = self.integer("the range width w in width:n:w")
            return self.build(lambda: width_range(n, w), f"width:{n}:{w}", start)
        if name == "hadamard":
            self.skip_ws()
            n_start = self.pos
            n = self.integer("the size in hadamard:N")
            return self.build(lambda: hadamard(n), f"hadamard:{n}", n_start)
        if name in ("marginals", "marginals_upto"):
            dims = self.dims(f"the attribute sizes in {name}:N1xN2x...:WAY")
            self.expect(":", f"before the marginal way in {name}:N1xN2x...:WAY")
            self.skip_ws()
            way_start = self.pos
            way = self.integer(f"the marginal way in {name}:N1xN2x...:WAY", minimum=0)
            if way > len(dims):
                raise self.fail(
                    f"marginal way {way} exceeds the number of attributes ({len(dims)} sizes given)", way_start
                )
            builder = marginals if name == "marginals" else marginals_upto
            normalized = f"{name}:{'x'.join(map(str, dims))}:{way}"
            return self.build(lambda: builder(dims, way), normalized, start)
        if name == "parity":
            d = self.integer("the dimension d in parity:D:WAY")
            self.expect(":", "before the way in parity:D:WAY")
            self.skip_ws()
            way_start = self.pos
            way = self.integer("the way in parity:D:WAY", minimum=0)
            if way > d:
                raise self.fail(f"parity way {way} exceeds the dimension d={d}", way_start)
            return self.build(lambda: parity(d, way), f"parity:{d}:{way}", start)
        if name == "random":
            dims_start = self.pos
            dims = self.dims("the shape in random:KxN:seed=S")
            if len(dims) != 2:
                raise self.fail(f"expected a shape KxN (two sizes) in random:KxN:seed=S, got {len(dims)}", dims_start)
            if self.peek() != ":":
                raise self.fail("random workloads need an explicit seed: expected ':seed=S' as in random:KxN:seed=S")
            self.pos += 1
            self.skip_ws()
            key_start = self.pos
            if self.text[self.pos:self.pos + 4].lower() != "seed":
                raise self.fail("expected 'seed=S' (an explicit seed is required) in random:KxN:seed=S", key_start)
            self.pos += 4
            self.expect("=", "after 'seed' in random:KxN:seed=S")
            seed = self.integer("the seed in random:KxN:seed=S", minimum=0)
            k, n = dims
            return self.build(lambda: random_pm1(k, n, seed), f"random:{k}x{n}:seed={seed}", start)
        # file
        self.skip_ws()
        path_start = self.pos
        if top:
            end = len(self.text)
        else:
            end = path_start
            while end < len(self.text) and self.text[end] not in ",)":
                end += 1
        path = self.text[path_start:end].strip()
        if not path:
            raise self.fail("expected a file path after 'file:'", path_start)
        self.pos = end
        return self.build(lambda: from_file(path), f"file:{path}", start)

    def build(self, make: Callable[[], Workload], normalized: str, start: int) -> Workload:
        try:
            workload = make()
        except WorkloadSpecError:
            raise
        except WorkloadError as exc:
            raise self.fail(f"cannot build {normalized!r}: {exc}", start) from None
        workload.spec = normalized
        return workload


def parse_workload(spec: str) -> Workload:
    """Build the workload described by ``spec`` (see the module docstring for the grammar).

    Examples: ``"prefix:64"``, ``"marginals:2x2x2x2x2x2x2x2:2"``,
    ``"kron(prefix:4,kron(identity:2,total:3))"``, ``"random:64x32:seed=7"``,
    ``"file:path/to/W.npy"``. The result's ``.spec`` is the normalized spec
    (no whitespace, lower-case names, canonical integers); nested parts get theirs.

    Raises :class:`WorkloadSpecError` quoting the spec, listing the accepted forms
    and pointing at the failing position.
    """
    if not isinstance(spec, str):
        raise WorkloadSpecError(
            f"a workload spec must be a string, got {type(spec).__name__}; "
            f"accepted forms: {', '.join(ACCEPTED_FORMS)}",
            spec=repr(spec),
            position=None,
        )
    return _Parser(spec).parse()
