"""Strategy families and the one search over them: ``base`` (the protocol and the
problem), one module per family, ``registry`` (the list), ``search`` (run all, keep the best)."""

from .base import PlanProblem, StrategyFamily
from .registry import FAMILIES, family
from .search import SearchResult, search

__all__ = ["FAMILIES", "PlanProblem", "SearchResult", "StrategyFamily", "family", "search"]
