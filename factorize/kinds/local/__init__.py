"""Local differential privacy (Edmonds, Nikolov & Ullman 2020): the local plan kind — client
randomizers, plans, aggregation; ``kind.KIND`` (``factorize.kinds``)."""
