"""Planning: power and sample sizes, evaluation time and time budgets, the memory bill. Pure."""
