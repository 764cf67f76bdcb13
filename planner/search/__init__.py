"""Search: vectorized sweep, constrained search and Pareto fronts, trade-offs, diagnosis."""
