"""Custom workload matrices carried inside a plan file, by content.

A workload spec may name a matrix file (``file:W.npy``) when planning. The plan never stores
the path: the parser content-addresses the matrix (normalized spec ``file:sha256=<fingerprint>``,
``workloads.spec``) and the plan carries the matrix itself as arrays, so ``verify`` and
``run`` rebuild the workload from the plan alone and never open a path named in a file they
were given (a path would let a forged plan probe the executor's machine: the shape of a
private CSV, its first non-numeric cell, whether a fingerprint matches).

Arrays: ``workload.<i>`` (a dense matrix) or ``workload.<i>.rows`` / ``.cols`` / ``.vals``
(a sparse one, coordinates as exact float64 integers); the manifest's
``workload.embedded`` lists ``{"sha256", "format": "dense" | "coo", "shape": [k, N]}`` in
order. Reading checks every listed matrix against its digest (the workload fingerprint).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorize.numerics import is_int

from .errors import PlanError

PREFIX = "workload."


def embedded_arrays(embedded: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The manifest list and arrays that carry the custom matrices ``embedded``
    (fingerprint → workload, e.g. ``workloads.spec.embedded_files(W)``)."""
    listing: list[dict[str, Any]] = []
    arrays: dict[str, np.ndarray] = {}
    for i, (digest, w) in enumerate(sorted(embedded.items())):
        matrix = getattr(w, "matrix", None)
        if matrix is None:
            raise PlanError(f"custom matrix {digest[:16]}… is not an explicit matrix")
        if hasattr(matrix, "tocoo"):
            coo = matrix.tocoo()
            arrays[f"{PREFIX}{i}.rows"] = coo.row.astype(np.float64)
            arrays[f"{PREFIX}{i}.cols"] = coo.col.astype(np.float64)
            arrays[f"{PREFIX}{i}.vals"] = coo.data.astype(np.float64)
            fmt = "coo"
        else:
            arrays[f"{PREFIX}{i}"] = np.asarray(matrix, dtype=np.float64)
            fmt = "dense"
        listing.append({"sha256": digest, "format": fmt, "shape": [int(s) for s in w.shape]})
    return listing, arrays


def embedded_listing(embedded: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest list of :func:`embedded_arrays` alone."""
    return [{"sha256": digest, "format": "coo" if hasattr(getattr(w, "matrix", None), "tocoo") else "dense",
             "shape": [int(s) for s in w.shape]} for digest, w in sorted(embedded.items())]


def split_arrays(arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(the plan's own arrays, the embedded-workload arrays)``."""
    own = {k: v for k, v in arrays.items() if not k.startswith(PREFIX)}
    emb = {k: v for k, v in arrays.items() if k.startswith(PREFIX)}
    return own, emb


def read_embedded(listing: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Rebuild the custom matrices (fingerprint → workload), each checked against its digest;
    PlanError on any inconsistency."""
    from workloads import DenseWorkload, SparseWorkload

    if listing is None:
        listing = []
    if not isinstance(listing, list):
        raise PlanError("workload.embedded must be a list")
    expected: set[str] = set()
    out: dict[str, Any] = {}
    for i, item in enumerate(listing):
        if not (isinstance(item, dict) and isinstance(item.get("sha256"), str)
                and item.get("format") in ("dense", "coo") and isinstance(item.get("shape"), list)
                and len(item["shape"]) == 2
                and all(is_int(s) and s >= 1 for s in item["shape"])):
            raise PlanError(f"workload.embedded[{i}] is malformed")
        k, N = item["shape"]
        w: DenseWorkload | SparseWorkload
        try:
            if item["format"] == "dense":
                name = f"{PREFIX}{i}"
                expected.add(name)
                M = arrays[name]
                if M.shape != (k, N):
                    raise PlanError(f"embedded matrix {i} has shape {M.shape}, listed {(k, N)}")
                w = DenseWorkload(M)
            else:
                import scipy.sparse as sp  # only for a sparse (coo) matrix

                names = [f"{PREFIX}{i}.{part}" for part in ("rows", "cols", "vals")]
                expected.update(names)
                rows, cols, vals = (arrays[n] for n in names)
                if not (rows.ndim == cols.ndim == vals.ndim == 1 and rows.size == cols.size == vals.size):
                    raise PlanError(f"embedded sparse matrix {i} has inconsistent coordinates")
                r, c = rows.astype(np.int64), cols.astype(np.int64)
                if (not np.array_equal(r, rows) or not np.array_equal(c, cols)
                        or (r.size and (r.min() < 0 or r.max() >= k or c.min() < 0 or c.max() >= N))):
                    raise PlanError(f"embedded sparse matrix {i} has coordinates outside {k}×{N}")
                w = SparseWorkload(sp.coo_array((vals, (r, c)), shape=(k, N)))
        except KeyError as exc:
            raise PlanError(f"embedded matrix {i}: array {exc.args[0]!r} is missing") from None
        except ValueError as exc:
            if isinstance(exc, PlanError):
                raise
            raise PlanError(f"embedded matrix {i} is invalid ({type(exc).__name__})") from None
        digest = w.fingerprint()
        if digest != item["sha256"]:
            raise PlanError(f"embedded matrix {i} does not match its digest sha256={item['sha256'][:16]}…")
        out[digest] = w
    extra = set(arrays) - expected
    if extra:
        raise PlanError(f"the plan has embedded-workload arrays it does not list: {sorted(extra)[:3]}")
    return out


def plan_workload(plan: Any) -> Any:
    """The plan's workload rebuilt from its spec and the custom matrices it carries (never a
    path: ``read_files=False``) — what every reader of a plan other than the verifier (which
    also checks the fingerprint, ``checks``) uses, e.g. the report."""
    from workloads import parse_workload

    return parse_workload(plan.workload["spec"], embedded=getattr(plan, "embedded", None) or {},
                          read_files=False)
