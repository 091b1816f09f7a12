"""Experiment files: schema, units, expansion into run plans."""
