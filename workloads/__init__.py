"""Workloads: linear queries ``W`` (k x N) over a histogram ``h`` of length N.

Query ``i`` answers ``(W h)_i``. Workloads are structured linear operators
(:class:`KronWorkload`, :class:`VStackWorkload`, :class:`MarginalWorkload`, ...) that are
densified only on request and within a size limit. Build them with the builders (``prefix``,
``marginals``, ...), from a compact spec string (:func:`parse_workload`), or from
a file (:func:`from_file`). :class:`Domain` maps records to histogram cells in the
order Kronecker workloads use.
"""

from .builders import (
    allrange,
    hadamard,
    identity,
    prefix,
    prefix_nd,
    random,
    range_nd,
    total,
    width,
)
from .coerce import as_workload
from .compose import scale_workload, vstack_workloads
from .domain import Domain
from .errors import DenseTooLargeError, DomainError, WorkloadError, WorkloadSpecError
from .files import from_file
from .marginal_builders import marginals, marginals_upto, parity
from .marginal_workload import MarginalGram, MarginalWorkload
from .operators import (
    DEFAULT_MAX_DENSE_ENTRIES,
    DenseWorkload,
    GramWorkload,
    KronWorkload,
    SparseWorkload,
    SumWorkload,
    VStackWorkload,
    Workload,
)
from .spec import ACCEPTED_FORMS, parse_workload

__all__ = [
    "ACCEPTED_FORMS",
    "DEFAULT_MAX_DENSE_ENTRIES",
    "DenseTooLargeError",
    "DenseWorkload",
    "Domain",
    "DomainError",
    "GramWorkload",
    "KronWorkload",
    "MarginalGram",
    "MarginalWorkload",
    "SparseWorkload",
    "SumWorkload",
    "VStackWorkload",
    "Workload",
    "WorkloadError",
    "WorkloadSpecError",
    "allrange",
    "as_workload",
    "from_file",
    "hadamard",
    "identity",
    "marginals",
    "marginals_upto",
    "parity",
    "parse_workload",
    "prefix",
    "prefix_nd",
    "random",
    "range_nd",
    "scale_workload",
    "total",
    "vstack_workloads",
    "width",
]


#: Builder names before they were made equal to the spec names; importing one
#: warns and gives the renamed builder.
_RENAMED = {"all_range": "allrange", "width_range": "width", "random_pm1": "random"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"workloads.{name} is now workloads.{_RENAMED[name]} (the spec's name)",
                      DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'workloads' has no attribute {name!r}")
