"""The post-processing layer's error, apart from its other modules so that each can raise it
without importing another."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["PostprocessError"]


class PostprocessError(InputError):
    """Post-processing that cannot be served: a workload with a block whose answers do not
    determine the marginal table they are read from (the projection and the rounding work in
    the algebra of marginals), an unknown method, or released values of the wrong shape. The
    message names what was asked and why not."""
