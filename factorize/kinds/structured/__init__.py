"""The structured plan kind (unions of Kronecker products, never densified): ``kind.KIND``
(``factorize.kinds``)."""
