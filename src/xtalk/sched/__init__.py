"""Schedulability of seed 001: uniprocessor tests, periodic resource model, VM-level
analysis, SCHED_DEADLINE admission, task-set generation, simulation and coupling with
measured execution times."""
