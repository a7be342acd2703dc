"""Local differential privacy (Edmonds, Nikolov & Ullman 2020): client randomizers, plans, aggregation."""
