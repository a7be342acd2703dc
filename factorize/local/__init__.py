"""Local differential privacy (issue 7): client randomizers, plans, aggregation."""
