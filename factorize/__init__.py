"""factorize: optimal factorization mechanisms for differentially private linear queries.

Layout (see ARCHITECTURE.md):

- ``factorize.norms``: the matrix norms of MATH.md §1 (pure math).
- ``factorize.factorization``: W = R·A (dense or Kronecker) and its error norms.
- ``factorize.certificate``: dual witnesses, their lower bounds and ``verify()``.
- ``factorize.planner``: chooses and runs a solver, builds and verifies the certificate.
- ``factorize.io``: saving and loading results (JSON + safetensors, never pickle).
- ``factorize.cli``: the ``factorize`` command.
"""

__version__ = "0.1.0"
