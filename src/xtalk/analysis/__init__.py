"""Analysis of job tables: slowdown and confidence intervals."""
