"""A factorization ``W = R·A``, dense or as a Kronecker product of factor pairs.

``Factorization((R_1, …, R_d), (A_1, …, A_d))`` means ``R = R_1 ⊗ … ⊗ R_d`` and
``A = A_1 ⊗ … ⊗ A_d`` (numpy's ``np.kron`` order); a dense factorization is the case
d = 1. The mechanism is ``M(h) = R (A h + Z)`` (docs/math.md §2.1).

The error norms of a Kronecker product are products of the factors' norms (column
norms, row norms and Frobenius norms of ``X ⊗ Y`` are products of those of X and Y), so
none of them needs the product matrix (docs/math.md §5.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factorize import norms
from factorize.errors import InputError


@dataclass(frozen=True)
class Factorization:
    """``R = ⊗ R_factors``, ``A = ⊗ A_factors``; the product ``R·A`` approximates W."""

    R_factors: tuple[np.ndarray, ...]
    A_factors: tuple[np.ndarray, ...]

    def __post_init__(self) -> None:
        if len(self.R_factors) == 0 or len(self.R_factors) != len(self.A_factors):
            raise InputError("a factorization needs as many R factors as A factors, at least one")
        for i, (R, A) in enumerate(zip(self.R_factors, self.A_factors, strict=True)):
            if R.ndim != 2 or A.ndim != 2 or R.shape[1] != A.shape[0]:
                raise InputError(
                    f"factor {i}: R {R.shape} and A {A.shape} cannot be multiplied")
            if not (np.all(np.isfinite(R)) and np.all(np.isfinite(A))):
                raise InputError(f"factor {i}: R or A has a non-finite entry")

    @classmethod
    def dense(cls, R: np.ndarray, A: np.ndarray) -> Factorization:
        """One factor pair, stored C-contiguous: norms summed over another memory layout
        can differ in the last bit from those of the same matrix read back from a file."""
        return cls((np.ascontiguousarray(R, dtype=np.float64),),
                   (np.ascontiguousarray(A, dtype=np.float64),))

    @property
    def is_kron(self) -> bool:
        return len(self.R_factors) > 1

    @property
    def shape(self) -> tuple[int, int]:
        """(k, N) of the product ``R·A``."""
        return (math.prod(int(R.shape[0]) for R in self.R_factors),
                math.prod(int(A.shape[1]) for A in self.A_factors))

    @property
    def strategy_rows(self) -> int:
        """m: the number of noisy measurements ``A h``."""
        return math.prod(int(A.shape[0]) for A in self.A_factors)

    # ---- error norms (products over factors) --------------------------------------
    def col_norm_max_A(self) -> float:
        """``||A||_{1→2}`` (the L2 sensitivity of the strategy under add/remove)."""
        return math.prod(norms.col_norm_max(A) for A in self.A_factors)

    def row_norm_max_R(self) -> float:
        """``||R||_{2→∞}``."""
        return math.prod(norms.row_norm_max(R) for R in self.R_factors)

    def frobenius_R(self) -> float:
        """``||R||_F``."""
        return math.prod(norms.frobenius(R) for R in self.R_factors)

    def row_norms_R(self) -> np.ndarray:
        """Per-query noise multipliers ``||r_i||`` (length k; Kronecker of factor vectors)."""
        out = np.ones(1)
        for R in self.R_factors:
            out = np.kron(out, np.sqrt(np.einsum("ij,ij->i", R, R)))
        return out

    def gamma_f_value(self) -> float:
        """``k^{-1/2} ||R||_F ||A||_{1→2}`` — the RMS error per unit noise (docs/math.md §2.2)."""
        k, _ = self.shape
        return self.frobenius_R() * self.col_norm_max_A() / math.sqrt(k)

    def gamma_2_value(self) -> float:
        """``||R||_{2→∞} ||A||_{1→2}`` — the worst per-query std per unit noise."""
        return self.row_norm_max_R() * self.col_norm_max_A()

    def value(self, norm: str) -> float:
        if norm == "gamma_f":
            return self.gamma_f_value()
        if norm in ("gamma_2", "approx_gamma_2"):
            return self.gamma_2_value()
        raise InputError(f"unknown norm {norm!r}")

    def value_upper_bound(self, norm: str) -> float:
        """A certified upper bound on ``value(norm)`` (``numerics.scaled_norm_upper``: every
        factor scaled by a power of two first, so squares cannot underflow — a float64
        ``√(Σa²)`` of entries near 2⁻⁵³⁷ is 0 — and every rounding is allowed for)."""
        from factorize.numerics import product_upper, round_up, scaled_norm_upper

        a = scaled_norm_upper(list(self.A_factors), "col_max", "the strategy A")
        if norm == "gamma_f":
            k, _ = self.shape
            r = scaled_norm_upper(list(self.R_factors), "frobenius", "the reconstruction R")
            return round_up(product_upper([r, a]) / math.sqrt(k), 2)
        if norm in ("gamma_2", "approx_gamma_2"):
            r = scaled_norm_upper(list(self.R_factors), "row_max", "the reconstruction R")
            return product_upper([r, a])
        raise InputError(f"unknown norm {norm!r}")

    # ---- the product -------------------------------------------------------------
    def R_dense(self) -> np.ndarray:
        return _kron_all(self.R_factors)

    def A_dense(self) -> np.ndarray:
        return _kron_all(self.A_factors)

    def normalized(self) -> Factorization:
        """Rescale every pair so that each ``||A_i||_{1→2} = 1`` (values are invariant)."""
        Rs, As = [], []
        for R, A in zip(self.R_factors, self.A_factors, strict=True):
            c = norms.col_norm_max(A)
            if c == 0.0:
                raise InputError("strategy factor with all-zero columns")
            Rs.append(R * c)
            As.append(A / c)
        return Factorization(tuple(Rs), tuple(As))


def kron_compose(parts: list[Factorization]) -> Factorization:
    """The Kronecker product of factorizations: factors are concatenated in order."""
    Rs: list[np.ndarray] = []
    As: list[np.ndarray] = []
    for p in parts:
        Rs.extend(p.R_factors)
        As.extend(p.A_factors)
    return Factorization(tuple(Rs), tuple(As))


def _kron_all(mats: tuple[np.ndarray, ...]) -> np.ndarray:
    out = mats[0]
    for M in mats[1:]:
        out = np.kron(out, M)
    return out


def kron_residual_max(W_factors: list[np.ndarray], fact: Factorization) -> float:
    """An upper bound on ``||⊗W_i − ⊗(R_i A_i)||_max`` from the factors alone.

    Telescoping ``⊗W − ⊗W̃ = Σ_j W̃_1⊗…⊗W̃_{j−1}⊗(W_j − W̃_j)⊗W_{j+1}⊗…`` and
    ``||X ⊗ Y||_max = ||X||_max ||Y||_max`` give
    ``Σ_j Π_{i<j} ||W̃_i||_max · ||W_j − W̃_j||_max · Π_{i>j} ||W_i||_max``.
    """
    approx = [R @ A for R, A in zip(fact.R_factors, fact.A_factors, strict=True)]
    total = 0.0
    for j, (Wj, Aj) in enumerate(zip(W_factors, approx, strict=True)):
        term = float(np.max(np.abs(Wj - Aj)))
        for i in range(j):
            term *= float(np.max(np.abs(approx[i])))
        for i in range(j + 1, len(W_factors)):
            term *= float(np.max(np.abs(W_factors[i])))
        total += term
    return total
