"""The local protocol's two ends: clients encode records into messages, the server aggregates.

Client (:func:`record_codes`, :func:`encode_record`, :func:`encode_codes`): a record (one value
per domain attribute: a raw value read through the plan's domain schema exactly as ``factorize
run`` reads a text column, or an integer code where the domain gives sizes only) → its codes →
its cell x (row-major, attribute 0 slowest) → the strategy column a_x → one randomized
message (``kinds.local.randomizer``; OS randomness unless a test rng is passed). No solver, no data
other than the one record.

Messages file: Parquet, one row per message, float64 columns ``y0 … y{m−1}``; the schema
metadata (key ``factorize``) names the plan's SHA-256 and whether the messages were drawn in
test mode.

Server (:func:`aggregate_file`): ``count(*)`` and ``sum(y_j)`` over the file inside DuckDB (one
streaming scan, constant memory in n, no spill to disk), then the counts ``ŷ = R·Σ Y`` with
per-query standard deviation ``√(n·v)·‖r_i‖`` and 95% intervals ``ŷ ± (1.96·sd + n·η)``
(normal approximation of a sum of n independent bounded messages, plus the factorization's
bias bound). :func:`aggregate_sums` is the same from sums already computed (another engine).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.engines.errors import DataError
from factorize.kinds.local.plan import Z95, LocalPlan

if TYPE_CHECKING:
    from workloads import Domain

#: An integer code as text (a domain of sizes only): ASCII digits, U+0020 spaces around.
_CODE_TEXT = re.compile(r" *([0-9]+) *")
#: How many of a categorical attribute's values an unknown-value refusal lists.
_LISTED_VALUES = 12


def _randomizer(plan: LocalPlan) -> Any:
    """The plan's client randomizer: the ℓ2 one at ε, or the Gaussian one at (ε, δ) (the
    verifier re-derives which from the guarantee, ``plan.randomizer_spec``)."""
    from factorize.kinds.local.randomizer import GaussianLocalRandomizer, L2Randomizer
    from factorize.plan.errors import PlanError
    from factorize.privacy import ZCDP, ApproxDP

    g = plan.guarantee
    m = plan.A.shape[0]
    if isinstance(g, ZCDP):
        raise PlanError("a local plan's guarantee is ε- or (ε, δ)-LDP, not zCDP")
    if plan.randomizer["kind"] == "l2":
        return L2Randomizer(g.epsilon, m)
    if not isinstance(g, ApproxDP):
        raise PlanError("the Gaussian randomizer needs an (ε, δ) guarantee")
    return GaussianLocalRandomizer(g.epsilon, g.delta, m)


def cells_of_codes(plan: LocalPlan, codes: np.ndarray) -> np.ndarray:
    """Row-major cell index of each code row (attribute 0 slowest); ``DataError`` when out of
    range (the records are private: the message names no value)."""
    sizes = np.asarray(plan.domain.sizes, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] != sizes.size:
        raise DataError(f"a record has {sizes.size} attribute values")
    if np.any(codes < 0) or np.any(codes >= sizes):
        raise DataError("a record value is outside its attribute's domain")
    strides = np.ones(sizes.size, dtype=np.int64)
    for j in range(sizes.size - 2, -1, -1):
        strides[j] = strides[j + 1] * sizes[j + 1]
    return codes @ strides


def record_codes(domain: Domain, values: Mapping[str, str]) -> dict[str, int]:
    """The codes of one record given as text (``attribute → value``, every domain attribute
    once). With a domain schema (``docs/schema.md``) each value is a raw value mapped by the
    schema's rule for a text column, ``AttributeSchema.encode(value, "text")`` -- the Python
    reference that ``factorize run``'s SQL mapping (``engines.schema_sql.code_sql``) is tested
    equal to --, so ``sex=Female`` gets the code ``run`` gives a ``Female`` cell; a value
    outside the schema goes where ``run`` sends it (the catch-all code, the clamped end) or is
    refused naming the attribute and the schema's rule (never the value). A domain of sizes
    only takes integer codes ``0 … size−1``."""
    from workloads.schema import MISSING, OUTSIDE

    attrs = list(domain.attributes)
    if set(values) != set(attrs):
        raise DataError(f"the record must give exactly the attributes {attrs}")
    schema = domain.schema
    out: dict[str, int] = {}
    for name, size in zip(attrs, domain.sizes, strict=True):
        text = values[name]
        if schema is None:
            m = _CODE_TEXT.fullmatch(text)
            if m is None or int(m.group(1)) >= size:
                raise DataError(f"record attribute {name!r}: the plan's domain gives sizes only, so its value "
                                f"must be a code 0..{size - 1} (a plan made with a domain schema, "
                                "docs/schema.md, reads raw values)")
            out[name] = int(m.group(1))
            continue
        attr = schema[name]
        code = attr.encode(text, "text")
        if code == MISSING:
            raise DataError(f"record attribute {name!r}: the value is missing")
        if code == OUTSIDE and attr.kind == "categorical":
            labels = attr.labels()
            listed = ", ".join(labels[:_LISTED_VALUES]) + (", …" if len(labels) > _LISTED_VALUES else "")
            raise DataError(f"record attribute {name!r}: the value is {attr.rule_text()} ({listed})")
        if code == OUTSIDE:
            raise DataError(f"record attribute {name!r}: the value is {attr.rule_text()}")
        if code < 0:
            raise DataError(f"record attribute {name!r}: the value is {attr.unparsed_text()}")
        out[name] = code
    return out


def encode_codes(plan: LocalPlan, codes: np.ndarray, rng: Any) -> np.ndarray:
    """One message per record (rows of ``codes``): the clients' work, vectorised to simulate."""
    cells = cells_of_codes(plan, codes)
    return _randomizer(plan).randomize_batch(np.ascontiguousarray(plan.A[:, cells].T), rng)


def encode_record(plan: LocalPlan, record: dict[str, int], rng: Any = None) -> np.ndarray:
    """The client: one record (attribute → value code) → one ε-LDP message (OS randomness)."""
    from factorize.privacy import SecureRandom

    attrs = list(plan.domain.attributes)
    if set(record) != set(attrs):
        raise DataError(f"the record must give exactly the attributes {attrs}")
    codes = np.array([[int(record[a]) for a in attrs]])
    cell = int(cells_of_codes(plan, codes)[0])
    return _randomizer(plan).randomize(plan.A[:, cell], rng if rng is not None else SecureRandom())


def write_messages(path: str | Path, Y: np.ndarray, plan_sha256: str, test_mode: bool) -> None:
    """Messages as Parquet (module docstring), written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from factorize.io.atomic import atomic_target

    Y = np.asarray(Y, dtype=np.float64)
    table = pa.table({f"y{j}": Y[:, j] for j in range(Y.shape[1])})
    table = table.replace_schema_metadata({"factorize": json.dumps(
        {"plan_sha256": plan_sha256, "test_mode": bool(test_mode), "messages": int(Y.shape[0])})})
    with atomic_target(Path(path)) as tmp:
        pq.write_table(table, tmp)


def aggregate_file(plan: LocalPlan, path: str | Path, *, threads: int | None = None) -> dict[str, Any]:
    """Stream the messages file through DuckDB: n and Σ Y (module docstring); then the release."""
    sums, n, _ = message_sums(plan, path, threads=threads)
    return aggregate_sums(plan, sums, n)


def message_sums(plan: LocalPlan, path: str | Path, *, threads: int | None = None
                 ) -> tuple[np.ndarray, int, dict[str, Any]]:
    """``(Σ Y, n, info)`` of a messages file, streamed through DuckDB (every value finite, the
    columns the plan's), with ``info`` the file's ``factorize`` metadata (plan digest, whether
    the messages were simulated in test mode)."""
    import duckdb

    m = plan.A.shape[0]
    p = Path(path)
    if p.suffix.lower() not in (".parquet", ".pq"):
        raise DataError(f"messages must be a Parquet file, got {str(p)!r}")
    config: dict[str, Any] = {"temp_directory": "", "autoinstall_known_extensions": False,
                              "autoload_known_extensions": False}
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(":memory:", config=config)
    try:
        src = "read_parquet(?)"
        cols = [str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {src}", [str(p)]).fetchall()]
        if cols != [f"y{j}" for j in range(m)]:
            raise DataError(f"messages file {str(p)!r}: expected columns y0..y{m - 1} for this plan")
        sums = ", ".join(f"sum(y{j})" for j in range(m))
        checks = " OR ".join(f"NOT isfinite(y{j}) OR y{j} IS NULL" for j in range(m))
        row = con.execute(f"SELECT count(*), count(*) FILTER (WHERE {checks}), {sums} FROM {src}",
                          [str(p)]).fetchone()
    except duckdb.Error as exc:
        raise DataError(f"messages file {str(p)!r} cannot be read ({type(exc).__name__})") from None
    finally:
        con.close()
    if row is None:  # an aggregate without GROUP BY returns one row: DuckDB broke its contract
        raise DataError(f"messages file {str(p)!r} cannot be read (the count query returned no row)")
    n, bad = int(row[0]), int(row[1])
    if n == 0:
        raise DataError(f"messages file {str(p)!r} has no messages")
    if bad:  # how many: in holder_message only (no data-dependent number in a refusal)
        raise DataError(f"messages file {str(p)!r}: some messages have missing or non-finite values",
                        holder_message=f"messages file {str(p)!r}: {bad} of {n} messages have missing "
                                       "or non-finite values")
    return np.array(row[2:], dtype=np.float64), n, _message_info(p)


def _message_info(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(path).metadata or {}).get(b"factorize")
        info = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def aggregate_sums(plan: LocalPlan, sums: np.ndarray, n: int) -> dict[str, Any]:
    """Counts R·ΣY with standard deviations and 95% intervals (module docstring)."""
    sums = np.asarray(sums, dtype=np.float64)
    if sums.shape != (plan.A.shape[0],) or not np.all(np.isfinite(sums)) or n < 1:
        raise DataError("the sums must be m finite numbers and n ≥ 1")
    est = plan.R @ sums
    sd = plan.per_query_std(n)
    half = Z95 * sd + n * plan.eta
    return {"estimate": est, "std_error": sd, "ci_low": est - half, "ci_high": est + half,
            "n": n, "bias_bound": n * plan.eta,
            "predicted_max_error": plan.eta * n + float(np.max(np.linalg.norm(plan.R, axis=1)))
            * math.sqrt(n * plan.randomizer["variance"] * 2.0 * math.log(2.0 * plan.shape[0]))}
