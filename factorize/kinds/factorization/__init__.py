"""The factorization plan kind (dense and Kronecker W = R·A): ``kind.KIND`` (``factorize.kinds``)."""
