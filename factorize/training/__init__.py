"""Matrix factorization for model training and continual release (DP-FTRL / DP-MF): strategies
certified under multi-participation (``privacy.participation``).

Dense strategies (``multi_epoch``: the exact multi-epoch program with its dual lower bound;
``streaming``: the lower-triangular factor of a strategy's Gram matrix; ``certificate``: the
solver-free re-derivation of both bounds) and long-horizon ones (banded, Toeplitz, BLT, the
banded inverse square root ``bisr`` with its certified series reciprocal ``series``). The
package imports nothing eagerly: each module is loaded where it is used.
"""
