"""Parsing compact workload spec strings (a small recursive-descent parser, no eval).

Grammar (whitespace around tokens is ignored; names are case-insensitive)::

    spec   := call | atom
    call   := ("kron" | "vstack") "(" spec ("," spec)* ")"
            | "scale" "(" WEIGHT "," spec ")"     WEIGHT · spec
            | "table" "(" NAME "," spec ")"       the part spec, its table named NAME
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
            | "file" ":" "sha256=" HEX   a matrix carried by the plan, by content
            | NAMED "[" attrs "]"          the same atoms with sizes read from a domain:
            | "width" "[" ATTR "]" ":" INT     prefix[age], identity[sex,race] (⊗),
            | ("marginals" | "marginals_upto") "[" attrs "]" ":" WAY
    NAMED  := "identity" | "total" | "prefix" | "allrange"
    attrs  := ATTR ("," ATTR)*     attribute names of the domain (``--domain``); a name with
                                   ",", "[", "]" or quotes is written in double quotes ("" for ")
    dims   := INT ("x" INT)*
    WEIGHT := decimal literal: DIGITS ["." DIGITS] [("e"|"E") ["+"|"-"] DIGITS]  (or ".5")
    NAME   := text in double quotes ("" for "), or bare text up to the next "," (trimmed;
              no ( ) [ ] "); at most 200 characters, no control characters

Attribute-named forms (sizes typed once, in the domain file): ``marginals[sex,race,
relationship,income>50K]:2`` is ``marginals:2x5x6x2:2`` over those attributes of the domain;
``kron(prefix[age],identity[sex])`` is the CDF over age crossed with sex. They need the domain
(:func:`resolve_workload_spec`, which ``factorize plan --domain FILE`` applies): the normalized
spec is the size-typed one (what a plan stores and the verifier rebuilds), and the domain is
projected onto the named attributes in the order the spec names them (a ``kron`` concatenates
its parts' attributes, each at most once; the parts of a ``vstack`` name the same attributes in
the same order). A spec names every attribute or none.

Marginal families: ``marginals:n_0x...xn_{d-1}:WAY`` is one :class:`MarginalWorkload` whose
block for each subset ``S`` (``|S| = WAY``, lexicographic) is ``⊗_{j∈S} I_{n_j} ⊗_{j∉S}
1ᵀ_{n_j}``; ``marginals_upto`` takes ``|S| = 0, 1, ..., WAY`` in that order. Same matrix and
fingerprint as the ``VStackWorkload`` of ``KronWorkload`` blocks built before; the blocks
are built only on demand.
``scale(w,SPEC)`` is ``w·SPEC`` with ``w`` finite in ``[1e-12, 1e12]``: ``scale(1,SPEC)`` is
``SPEC`` (normalized to it), a marginal family scales its weights ``w_S`` (nested scales
multiply; the products must stay in range), a ``vstack`` scales each part, and any other
``SPEC`` becomes ``kron`` of the 1×1 matrix ``[[w]]`` and ``SPEC``. ``vstack`` of marginal
families over the same sizes is again one marginal family (blocks and weights in order;
same matrix and fingerprint as the plain stack). The normalized weight is Python's shortest
``repr`` of the float, without a trailing ``.0`` (``scale(2.50,…)`` → ``scale(2.5,…)``).

Table names: every part of a ``vstack`` is a table of the release (``factorize run``
labels each answer with its table, ``--tables`` writes one file per table); by default the
table is named by the attributes it crosses and its form (``age,sex``, ``cdf(age) by sex``:
``executor.labels``). ``table(NAME,SPEC)`` names the part ``SPEC`` instead:
``vstack(marginals[age,sex,income]:2,table("income by sex",kron(total[age],identity[sex],
identity[income])))``. It may stand as a part of a ``vstack`` (also under ``scale``:
``scale(2,table(N,S))`` is normalized to ``table(N,scale(2,S))``) or as the whole spec (one
table: a ``vstack`` of that one part); not inside ``kron`` (a factor is no table), not around a
stack (a ``vstack`` or a ``marginals`` family is several tables: name its parts; one marginal
is ``kron(identity[a],identity[b],total[c])``), and a name is given at most once per spec.
The normalized spec quotes the name (``table("income by sex",…)``). Names label the answers
and are no part of the matrix: the fingerprint of a spec with names is that of the same spec
without them, and a spec without ``table(…)`` normalizes as it always did (so no existing
plan's spec or digests change); a plan stores the normalized spec, and with it the names,
under its content digest.

A ``file:`` path extends to the end of the spec at top level; inside ``kron(...)``,
``vstack(...)`` or ``scale(...)`` it ends at the next ``,`` or ``)``.

Custom matrices are content-addressed: ``file:PATH`` is read (only where the caller allows
files: the planner, never the executor) and its normalized spec is
``file:sha256=<fingerprint>``; a plan stores the matrix itself, and the verifier resolves
``file:sha256=…`` from the plan's own arrays (``embedded``), so running a plan never opens
a path named in it.

Resources: the whole spec may store at most ``MAX_SPEC_ENTRIES`` matrix entries (charged per
distinct leaf before it is built — a repeated leaf is built once and shared) and be at most
``MAX_SPEC_CHARS`` characters long. A marginal family stores no entries but about
``way + 16`` machine words per block (its subset tuple, row offset and weight), charged as
that many entries (plus ``2·Σ n`` for its lazily built leaves) once its block count — at most
``MAX_MARGINAL_BLOCKS`` = 2^24, computed without enumerating — is known; stacking or scaling
families charges 8 per block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .builders import allrange, hadamard, identity, prefix, random, total, width
from .compose import check_scale, scale_workload, vstack_workloads
from .errors import WorkloadError, WorkloadSpecError
from .files import from_file
from .marginal_builders import marginals, marginals_upto, parity, subset_count
from .marginal_workload import MAX_MARGINAL_BLOCKS, MarginalWorkload
from .operators import KronWorkload, VStackWorkload, Workload
from .structured import has_names

__all__ = ["parse_workload", "resolve_workload_spec", "ACCEPTED_FORMS", "embedded_files",
           "MAX_SPEC_ENTRIES", "MAX_SPEC_CHARS", "FILE_DIGEST_PREFIX"]

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
    "scale(W,SPEC) (W a positive decimal, e.g. scale(2.5,marginals:2x3x4:1))",
    'table(NAME,SPEC) (a part named as a table, e.g. table("income by sex",kron(identity:2,identity:2)))',
    "attribute names instead of sizes, with --domain: prefix[age], identity[sex,race], width[age]:5, "
    "marginals[sex,race,income]:2, marginals_upto[...]:WAY, kron(prefix[age],identity[sex])",
)
#: Atoms that take attribute names in brackets instead of sizes.
_NAMED_ATOMS = ("identity", "total", "prefix", "allrange", "width", "marginals", "marginals_upto")

_MAX_DEPTH = 64
#: Most matrix entries (dense entries, or stored sparse entries) one spec may build in all.
MAX_SPEC_ENTRIES = 1 << 27
#: Longest spec accepted.
MAX_SPEC_CHARS = 1 << 20
#: Normalized spec prefix of a content-addressed custom matrix.
FILE_DIGEST_PREFIX = "file:sha256="
_DIM_BUILDERS: dict[str, Callable[[int], Workload]] = {
    "identity": identity,
    "total": total,
    "prefix": prefix,
    "allrange": allrange,
}
_ATOMS = (*_DIM_BUILDERS, "width", "hadamard", "marginals", "marginals_upto", "parity", "random", "file")
_CALLS = ("kron", "vstack", "scale", "table")
#: Longest table name (``table(NAME,SPEC)``).
MAX_TABLE_NAME_CHARS = 200
_WEIGHT_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_WEIGHT_CHARS = 64
#: Machine words charged per block of a marginal family beyond its subset's indices.
_WORDS_PER_BLOCK = 16
#: Words charged per block when a family is stacked or scaled (new offsets and weights).
_WORDS_PER_COPIED_BLOCK = 8


def _format_weight(w: float) -> str:
    """Normalized spelling of a weight: the shortest ``repr``, without a trailing ``.0``."""
    text = repr(float(w))
    return text[:-2] if text.endswith(".0") else text


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

    def __init__(self, text: str, embedded: dict[str, Workload] | None, read_files: bool,
                 domain: Any = None) -> None:
        self.text = text
        self.pos = 0
        self.embedded = dict(embedded or {})
        self.read_files = read_files
        self.built: dict[str, Workload] = {}
        self.entries = 0
        self.domain = domain
        #: the attributes the last parsed spec names (None: sizes), see the module docstring
        self.layout: tuple[str, ...] | None = None
        #: the table name the last parsed spec gives its part (``table(NAME,SPEC)``), or None
        self.part_name: str | None = None
        self.table_names: set[str] = set()

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
        name = self.part_name
        if name is not None:  # the whole spec is one named table: a stack of that one part
            return self.build(lambda: VStackWorkload([workload], names=[name]),
                              _named_spec(name, workload.spec), 0, 1)
        return workload

    def spec(self, depth: int, top: bool) -> Workload:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nesting deeper than {_MAX_DEPTH} levels")
        self.skip_ws()
        start = self.pos
        self.part_name = None
        name = self.name()
        if name in _CALLS:
            return self.call(name, start, depth)
        if name in _NAMED_ATOMS and self.peek() == "[":
            return self.named_atom(name, start)
        if name in _ATOMS:
            self.expect(":", f"after {name!r}")
            self.layout = None
            return self.atom(name, start, top)
        raise self.fail(
            f"unknown workload {name!r}; expected one of {', '.join(_ATOMS + _CALLS)}", start
        )

    def weight(self) -> float:
        self.skip_ws()
        start = self.pos
        match = _WEIGHT_RE.match(self.text, self.pos)
        if match is None:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of spec"
            raise self.fail("expected a finite positive decimal weight W in scale(W,SPEC) (such as "
                            f"2.5 or 1e-3), found {found}")
        literal = match.group(0)
        if len(literal) > _MAX_WEIGHT_CHARS:
            raise self.fail(f"the weight in scale(W,SPEC) is longer than {_MAX_WEIGHT_CHARS} characters",
                            start)
        self.pos = match.end()
        value = float(literal)
        if value == 0.0:
            raise self.fail(f"the weight in scale(W,SPEC) must be > 0, got {literal}", start)
        try:
            return check_scale(value, "the weight in scale(W,SPEC)")
        except WorkloadError as exc:
            raise self.fail(str(exc), start) from None

    def scale_call(self, start: int, depth: int) -> Workload:
        self.expect("(", "after 'scale'")
        w = self.weight()
        self.expect(",", "after the weight in scale(W,SPEC)")
        if self.peek() in (")", ",", ""):
            raise self.fail("expected a workload spec as argument 2 of scale(W,SPEC)")
        arg = self.spec(depth + 1, top=False)
        self.expect(")", "to close scale(W,SPEC)")
        if w == 1.0:
            return arg  # 1·SPEC is SPEC, under SPEC's own normalized spec
        named = self.part_name  # scale(w,table(N,S)) is the part scale(w,S) named N
        normalized = f"scale({_format_weight(w)},{arg.spec or ''})"
        cost = 1 + _WORDS_PER_COPIED_BLOCK * _family_blocks(arg)
        out = self.build(lambda: _scaled(w, arg), normalized, start, cost)
        self.part_name = named
        return out

    def table_name(self) -> str:
        """``NAME`` of ``table(NAME,SPEC)``: double-quoted (``""`` for ``"``) or bare up to the
        next ``,`` (trimmed)."""
        self.skip_ws()
        at = self.pos
        if self.peek() == '"':
            end = self.pos + 1
            buf = []
            while True:
                if end >= len(self.text):
                    raise self.fail("unterminated quoted name in table(NAME,SPEC)", at)
                if self.text[end] == '"':
                    if self.text[end + 1:end + 2] != '"':
                        break
                    end += 1
                buf.append(self.text[end])
                end += 1
            name, self.pos = "".join(buf), end + 1
        else:
            end = at
            while end < len(self.text) and self.text[end] not in ',()[]"':
                end += 1
            name, self.pos = self.text[at:end].strip(), end
        if not name.strip():
            raise self.fail("expected a table name in table(NAME,SPEC)", at)
        if len(name) > MAX_TABLE_NAME_CHARS:
            raise self.fail(f"a table name is at most {MAX_TABLE_NAME_CHARS} characters", at)
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise self.fail("a table name may not hold control characters (tabs, line breaks)", at)
        if name in self.table_names:
            raise self.fail(f"the table name {name!r} is given twice; each table has its own", at)
        self.table_names.add(name)
        return name

    def table_call(self, start: int, depth: int) -> Workload:
        """``table(NAME,SPEC)``: ``SPEC``, its part named ``NAME`` (module docstring)."""
        self.expect("(", "after 'table'")
        name = self.table_name()
        self.expect(",", "after the name in table(NAME,SPEC)")
        if self.peek() in (")", ",", ""):
            raise self.fail("expected a workload spec as argument 2 of table(NAME,SPEC)")
        arg = self.spec(depth + 1, top=False)
        if self.part_name is not None:
            raise self.fail("table(NAME,table(...)): a table has one name", start)
        if isinstance(arg, VStackWorkload):
            parts = arg.num_blocks if isinstance(arg, MarginalWorkload) else len(arg.blocks)
            raise self.fail(f"table(NAME,SPEC) names one table, and {(arg.spec or 'SPEC')[:80]!r} is "
                            f"{parts} tables (a vstack, or a marginals family: one table per "
                            "attribute subset): name each part, vstack(table(A,...),table(B,...)); "
                            "one marginal is kron(identity[a],identity[b],total[c])", start)
        self.expect(")", "to close table(NAME,SPEC)")
        self.part_name = name
        return arg

    def call(self, name: str, start: int, depth: int) -> Workload:
        if name == "scale":
            return self.scale_call(start, depth)
        if name == "table":
            return self.table_call(start, depth)
        self.expect("(", f"after {name!r}")
        args: list[Workload] = []
        layouts: list[tuple[str, ...] | None] = []
        names: list[str | None] = []
        while True:
            if self.peek() in (")", ",", ""):
                raise self.fail(f"expected a workload spec as argument {len(args) + 1} of {name}(...)")
            at = self.pos
            args.append(self.spec(depth + 1, top=False))
            if name == "kron" and (self.part_name is not None or has_names(args[-1])):
                raise self.fail("table(NAME,SPEC) inside kron(...): a Kronecker factor is no table; "
                                "name the whole product, table(NAME,kron(...))", at)
            names.append(self.part_name)
            layouts.append(self.layout)
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == ")":
                self.pos += 1
                break
            else:
                found = repr(c) if c else "end of spec"
                raise self.fail(f"expected ',' or ')' in {name}(...), found {found}")
        self.layout = self.combine(name, layouts, start)
        self.part_name = None
        normalized = f"{name}({','.join(_named_spec(n, a.spec) for a, n in zip(args, names, strict=True))})"
        if name == "kron":
            return self.build(lambda: KronWorkload(args), normalized, start, len(args))
        cost = len(args) + _WORDS_PER_COPIED_BLOCK * sum(
            a.num_blocks for a in args if isinstance(a, MarginalWorkload))
        if any(n is not None for n in names):  # a named part is no marginal family: nothing collapses
            return self.build(lambda: VStackWorkload(args, names=names), normalized, start, cost)
        return self.build(lambda: vstack_workloads(args), normalized, start, cost)

    def atom(self, name: str, start: int, top: bool, dims: list[int] | None = None) -> Workload:  # noqa: C901 (counted allow-list)
        """An atom after ``NAME:`` (or, with ``dims``, after ``NAME[attrs]``, whose sizes they are)."""
        given = dims
        if name in _DIM_BUILDERS:
            sizes = given or self.dims(f"the size in {name}:")
            normalized = f"{name}:{'x'.join(map(str, sizes))}"
            builder = _DIM_BUILDERS[name]
            cost = sum(_ATOM_ENTRIES[name](n) for n in sizes)
            if len(sizes) == 1:
                return self.build(lambda: builder(sizes[0]), normalized, start, cost)
            return self.build(lambda: KronWorkload([builder(n) for n in sizes]), normalized, start, cost)
        if name == "width":
            n = self.integer("the domain size n in width:n:w")
            self.expect(":", "between n and w in width:n:w")
            w = self.integer("the range width w in width:n:w")
            return self.build(lambda: width(n, w), f"width:{n}:{w}", start, max(n - w + 1, 1) * n)
        if name == "hadamard":
            self.skip_ws()
            n_start = self.pos
            n = self.integer("the size in hadamard:N")
            return self.build(lambda: hadamard(n), f"hadamard:{n}", n_start, 4 * max(n.bit_length(), 1))
        if name in ("marginals", "marginals_upto"):
            if given is None:
                attr_sizes = self.dims(f"the attribute sizes in {name}:N1xN2x...:WAY")
                self.expect(":", f"before the marginal way in {name}:N1xN2x...:WAY")
            else:
                attr_sizes = list(given)
            self.skip_ws()
            way_start = self.pos
            way = self.integer(f"the marginal way in {name}:N1xN2x...:WAY", minimum=0)
            if way > len(attr_sizes):
                raise self.fail(
                    f"marginal way {way} exceeds the number of attributes ({len(attr_sizes)} sizes given)", way_start
                )
            family = marginals if name == "marginals" else marginals_upto
            normalized = f"{name}:{'x'.join(map(str, attr_sizes))}:{way}"
            blocks = subset_count(len(attr_sizes), way, upto=name == "marginals_upto")
            if blocks > MAX_MARGINAL_BLOCKS:
                raise self.fail(f"{normalized[:80]!r} has more than {MAX_MARGINAL_BLOCKS} marginal "
                                "blocks (attribute subsets), the limit of one marginal workload", start)
            # one identity and one total per distinct size (built lazily, shared); per block a
            # subset tuple, a row offset and a weight
            cost = 2 * sum(set(attr_sizes)) + blocks * (way + _WORDS_PER_BLOCK)
            return self.build(lambda: family(attr_sizes, way), normalized, start, cost)
        if name == "parity":
            d = self.integer("the dimension d in parity:D:WAY")
            self.expect(":", "before the way in parity:D:WAY")
            self.skip_ws()
            way_start = self.pos
            way = self.integer("the way in parity:D:WAY", minimum=0)
            if way > d:
                raise self.fail(f"parity way {way} exceeds the dimension d={d}", way_start)
            return self.build(lambda: parity(d, way), f"parity:{d}:{way}", start,
                              d * subset_count(d, way, cap=MAX_SPEC_ENTRIES))
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
            return self.build(lambda: random(k, n, seed), f"random:{k}x{n}:seed={seed}", start, k * n)
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
        if path.lower().startswith("sha256="):
            digest = path[len("sha256="):].lower()
            if digest not in self.embedded:
                raise self.fail(f"the custom matrix sha256={digest[:16]}… is not among the matrices "
                                "this plan carries", path_start)
            return self.build(lambda: self.embedded[digest], f"{FILE_DIGEST_PREFIX}{digest}", start)
        if not self.read_files:
            raise self.fail("a spec naming a file path is refused here: a plan carries its custom "
                            "matrices inside the plan file (file:sha256=…); re-plan it with this "
                            "version of factorize", path_start)
        try:
            workload = from_file(path)
        except WorkloadError as exc:
            raise self.fail(f"cannot build 'file:{path}': {exc}", start) from None
        except MemoryError:
            raise self.fail(f"out of memory while reading 'file:{path}'", start) from None
        size = workload.nnz if hasattr(workload, "nnz") else workload.shape[0] * workload.shape[1]
        digest = workload.fingerprint()
        return self.build(lambda: workload, f"{FILE_DIGEST_PREFIX}{digest}", start, size)

    # -- attribute-named forms ---------------------------------------------------------------
    def attribute_names(self, name: str) -> list[str]:
        """``[ATTR, ...]``: names separated by commas, bare (trimmed) or double-quoted."""
        self.expect("[", f"after {name!r}")
        names: list[str] = []
        while True:
            self.skip_ws()
            at = self.pos
            if self.peek() == '"':
                self.pos += 1
                buf = []
                while True:
                    if self.pos >= len(self.text):
                        raise self.fail("unterminated quoted attribute name", at)
                    ch = self.text[self.pos]
                    if ch == '"':
                        if self.text[self.pos + 1:self.pos + 2] == '"':
                            buf.append('"')
                            self.pos += 2
                            continue
                        self.pos += 1
                        break
                    buf.append(ch)
                    self.pos += 1
                attr = "".join(buf)
            else:
                end = at
                while end < len(self.text) and self.text[end] not in ",[]\"":
                    end += 1
                attr = self.text[at:end].strip()
                self.pos = end
            if not attr:
                raise self.fail(f"expected an attribute name in {name}[...]", at)
            names.append(attr)
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == "]":
                self.pos += 1
                return names
            else:
                found = repr(c) if c else "end of spec"
                raise self.fail(f"expected ',' or ']' in {name}[...], found {found}")

    def named_atom(self, name: str, start: int) -> Workload:
        """``NAME[attrs]...``: the atom with the sizes of the named domain attributes."""
        bracket = self.pos
        attrs = self.attribute_names(name)
        if self.domain is None:
            raise self.fail(f"{name}[...] names attributes of a domain; give the domain: "
                            "`factorize plan --domain FILE.json` (sizes or a schema), or write sizes "
                            f"({name}:N...)", bracket)
        unknown = [a for a in attrs if a not in self.domain]
        if unknown:
            raise self.fail(f"unknown attribute(s) {unknown}; the domain (--domain) has "
                            f"{', '.join(self.domain.attributes)}", bracket)
        if len(set(attrs)) != len(attrs):
            raise self.fail(f"{name}[...] names an attribute twice", bracket)
        sizes = [int(self.domain[a]) for a in attrs]
        self.layout = tuple(attrs)
        if name == "width":
            if len(attrs) != 1:
                raise self.fail("width[ATTR]:W takes one attribute", bracket)
            self.expect(":", "before the range width in width[ATTR]:W")
            w = self.integer("the range width w in width[ATTR]:W")
            n = sizes[0]
            return self.build(lambda: width(n, w), f"width:{n}:{w}", start, max(n - w + 1, 1) * n)
        if name in ("marginals", "marginals_upto"):
            self.expect(":", f"before the marginal way in {name}[ATTRS]:WAY")
            return self.atom(name, start, False, dims=sizes)
        return self.atom(name, start, False, dims=sizes)

    def combine(self, name: str, layouts: list[tuple[str, ...] | None], start: int) -> tuple[str, ...] | None:
        """The attributes a ``kron`` / ``vstack`` names, from its parts' (module docstring)."""
        named = [lay for lay in layouts if lay is not None]
        if not named:
            return None
        if len(named) != len(layouts):
            raise self.fail(f"{name}(...) mixes parts that name attributes with parts given by sizes; "
                            "name every part's attributes (e.g. prefix[age]) or none", start)
        if name == "kron":
            out = tuple(a for lay in named for a in lay)
            twice = sorted({a for a in out if out.count(a) > 1})
            if twice:
                raise self.fail(f"kron(...) names attribute(s) {twice} in more than one factor; each "
                                "attribute is one axis of the product", start)
            return out
        first = named[0]
        for lay in named[1:]:
            if lay != first:
                raise self.fail(f"the parts of vstack(...) name different attributes ({', '.join(first)}) "
                                f"and ({', '.join(lay)}); every part must name the same attributes in the "
                                "same order (cross a part with total[ATTR] to sum an attribute out)", start)
        return first

    def build(self, make: Callable[[], Workload], normalized: str, start: int,
              entries: int = 0) -> Workload:
        """Build (or reuse) the workload of ``normalized``, charging ``entries`` to the spec's
        budget first (module docstring)."""
        if normalized in self.built:
            return self.built[normalized]
        self.entries += int(entries)
        if self.entries > MAX_SPEC_ENTRIES:
            raise self.fail(f"the spec would store more than {MAX_SPEC_ENTRIES} matrix entries in "
                            f"all (reached at {normalized[:80]!r}); use Kronecker products or "
                            "marginal specs, which store small factors", start)
        try:
            workload = make()
        except WorkloadSpecError:
            raise
        except WorkloadError as exc:
            raise self.fail(f"cannot build {normalized!r}: {exc}", start) from None
        except MemoryError:
            raise self.fail(f"out of memory while building {normalized[:80]!r}", start) from None
        workload.spec = normalized
        self.built[normalized] = workload
        return workload


def parse_workload(spec: str, *, embedded: dict[str, Workload] | None = None,
                   read_files: bool = True, domain: Any = None) -> Workload:
    """Build the workload described by ``spec`` (see the module docstring for the grammar).

    Examples: ``"prefix:64"``, ``"marginals:2x2x2x2x2x2x2x2:2"``,
    ``"kron(prefix:4,kron(identity:2,total:3))"``, ``"random:64x32:seed=7"``,
    ``"file:path/to/W.npy"``. The result's ``.spec`` is the normalized spec
    (no whitespace, lower-case names, canonical integers); nested parts get theirs.

    ``embedded``: content-addressed custom matrices (fingerprint → workload) that
    ``file:sha256=…`` leaves resolve to (a plan's own arrays). ``read_files=False`` refuses
    ``file:PATH`` (the executor never opens a path named in a plan). ``domain``: the
    :class:`~workloads.Domain` whose sizes attribute-named forms (``prefix[age]``) read; use
    :func:`resolve_workload_spec` to get the domain projected onto those attributes too.

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
    if len(spec) > MAX_SPEC_CHARS:
        raise WorkloadSpecError(f"a workload spec may be at most {MAX_SPEC_CHARS} characters long, "
                                f"got {len(spec)}", spec=spec[:80] + "…", position=None)
    return _Parser(spec, embedded, read_files, domain).parse()


def _names_attributes(spec: str) -> bool:
    """Whether ``spec`` may use an attribute-named form (a cheap test before parsing)."""
    return "[" in spec


def resolve_workload_spec(spec: str, domain: Any) -> tuple[str, Any]:
    """``(spec, domain)`` with attribute-named forms (``marginals[sex,race]:2``,
    ``kron(prefix[age],identity[sex])``; module docstring) replaced by sizes read from
    ``domain``, and the domain projected onto the named attributes in the spec's order (its
    schema, if any, projected with it). A spec that names no attribute comes back unchanged,
    with the domain unchanged. This is what ``factorize plan --workload SPEC --domain FILE``
    applies before planning: the plan stores the size-typed spec and the projected domain.

    Raises :class:`WorkloadSpecError` (naming ``--domain``) when the spec names attributes
    and ``domain`` is None or lacks them."""
    if not isinstance(spec, str) or not _names_attributes(spec):
        return spec, domain
    if len(spec) > MAX_SPEC_CHARS:
        parse_workload(spec)  # the length error
    parser = _Parser(spec, None, True, domain)
    workload = parser.parse()
    if parser.layout is None:
        return spec, domain
    return workload.spec or spec, domain.project(list(parser.layout))


def _named_spec(name: str | None, spec: str | None) -> str:
    """The normalized text of a part: ``spec``, or ``table("name",spec)`` when it is named."""
    if name is None:
        return spec or ""
    quoted = name.replace('"', '""')
    return f'table("{quoted}",{spec or ""})'


#: The normalized spellings of a weight and of a named part, public for the modules that write
#: specs (``factorize.plan.table_targets``: the spec of D·W).
format_weight = _format_weight
named_spec = _named_spec


def _scaled(w: float, workload: Workload) -> Workload:
    """``w·workload`` (``compose.scale_workload``), keeping the table names of a stack."""
    if isinstance(workload, VStackWorkload) and has_names(workload):
        return VStackWorkload([_scaled(w, b) for b in workload.blocks], names=workload.names)
    return scale_workload(w, workload)


_ATOM_ENTRIES: dict[str, Callable[[int], int]] = {
    "identity": lambda n: n,
    "total": lambda n: n,
    "prefix": lambda n: n * n,
    "allrange": lambda n: n * n * (n + 1) // 2,
}


def _family_blocks(workload: Workload) -> int:
    """Blocks of the marginal families in ``workload`` (itself, or parts of its stacks):
    what scaling it copies."""
    if isinstance(workload, MarginalWorkload):
        return workload.num_blocks
    if isinstance(workload, VStackWorkload):
        return sum(_family_blocks(b) for b in workload.blocks)
    return 0


def embedded_files(workload: Workload) -> dict[str, Workload]:
    """The content-addressed custom matrices (``file:sha256=…`` leaves) inside ``workload``,
    by fingerprint: what a plan must carry to be rebuilt without reading a path."""
    found: dict[str, Workload] = {}
    stack = [workload]
    while stack:
        w = stack.pop()
        spec = w.spec or ""
        if spec.startswith(FILE_DIGEST_PREFIX):
            found[spec[len(FILE_DIGEST_PREFIX):]] = w
            continue
        if isinstance(w, MarginalWorkload):  # identity/total leaves only; never build its blocks
            continue
        stack.extend(getattr(w, "factors", ()) or ())
        stack.extend(getattr(w, "blocks", ()) or ())
    return found
