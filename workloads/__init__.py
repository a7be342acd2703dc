"""Workloads: linear queries ``W`` (k x N) over a histogram ``h`` of length N.

Query ``i`` answers ``(W h)_i``. Workloads are structured linear operators
(:class:`KronWorkload`, :class:`VStackWorkload`, :class:`MarginalWorkload`, ...) that are
densified only on request and within a size limit. Build them with the builders (``prefix``,
``marginals``, ...), from a compact spec string (:func:`parse_workload`), or from
a file (:func:`from_file`). :class:`Domain` maps records to histogram cells in the
order Kronecker workloads use.
"""

from .builders import (
    all_range,
    hadamard,
    identity,
    prefix,
    prefix_nd,
    random_pm1,
    range_nd,
    total,
    width_range,
)
from .coerce import as_workload
from .compose import scale_workload, vstack_workloads
from .domain import Domain
from .errors import DenseTooLargeError, DomainError, WorkloadError, WorkloadSpecError
from .files import from_file
from .marginal_workload import MarginalGram, MarginalWorkload
from .marginals import marginals, marginals_upto, parity
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
    "all_range",
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
    "random_pm1",
    "range_nd",
    "scale_workload",
    "total",
    "vstack_workloads",
    "width_range",
]
