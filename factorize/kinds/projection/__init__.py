"""The projection plan kind (jl, covariance, relaxed projection): ``kind.KIND`` (``factorize.kinds``)."""
