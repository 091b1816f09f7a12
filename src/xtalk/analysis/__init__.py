"""Statistical analysis of xtalk job tables (SPEC §6, §8): pure functions over DataFrames.

Modules: :mod:`.stats` (bootstrap CIs, slowdown, shift tests, A/A floor, histogram markers),
:mod:`.pwcet` (MBPTA: i.i.d. checks, EVT fits, pWCET or refusal), :mod:`.wakeup` (rel(k),
Δw(k), timer drift apart from backlog, period quantisation), :mod:`.spikes` (spike detection,
periods, attribution), :mod:`.periodicity` (period of event times on a sampling lattice, with
a shuffle test),
:mod:`.verdict` (deadline and serious misses, ε verdict, and every verdict word the reports
print), :mod:`.slowdown` (the one slowdown: ratio against solo with its CI over runs then
jobs, widened for few runs; what `xtalk run`, `xtalk report` and campaigns print),
:mod:`.cells` (an experiment's one pass: jobs → per run → per configuration × scenario, read
by the summary, the report's tables and `xtalk query`).
"""

# No name here is both a submodule and a re-export: the functions pwcet.pwcet,
# periodicity.periodicity and slowdown.slowdown (and stats.slowdown, which once shadowed
# the slowdown module depending on import order) are reached through their modules, so
# ``from xtalk.analysis import pwcet, periodicity, slowdown`` always gives the modules
# (tests/test_analysis_package.py checks it).
# The re-exports load with their module when first named (PEP 562): `xtalk run` reads the
# guards' thresholds and `xtalk plan` the feasibility estimate without pandas and scipy.
_FROM = {
    "periodicity": ["Periodicity"],
    "pwcet": ["PWCETRefused", "PWCETResult", "fit_gev", "fit_gpd", "iid_checks"],
    "spikes": ["Attribution", "attribute_spikes", "detect_spikes", "spike_periods"],
    "stats": ["BootstrapCI", "NoiseFloor", "ShiftTest", "aa_noise_floor", "bootstrap_ci", "cluster_ratio_ci", "markers",
              "per_step_reference", "ratio_ci", "shift_test"],
    "verdict": ["EpsilonSpec", "classify_misses", "deadline_misses", "epsilon_verdict", "epsilon_verdicts"],
    "wakeup": ["Drift", "Quantisation", "drift", "period_quantisation", "run_drift", "wakeup_series"],
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}


def __getattr__(name: str):
    """A re-exported name, from its submodule (imported now if it was not)."""
    import importlib

    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Attribution",
    "BootstrapCI",
    "Drift",
    "EpsilonSpec",
    "NoiseFloor",
    "PWCETRefused",
    "Periodicity",
    "PWCETResult",
    "Quantisation",
    "ShiftTest",
    "aa_noise_floor",
    "attribute_spikes",
    "bootstrap_ci",
    "classify_misses",
    "cluster_ratio_ci",
    "deadline_misses",
    "detect_spikes",
    "drift",
    "epsilon_verdict",
    "epsilon_verdicts",
    "fit_gev",
    "fit_gpd",
    "iid_checks",
    "markers",
    "per_step_reference",
    "period_quantisation",
    "ratio_ci",
    "run_drift",
    "shift_test",
    "spike_periods",
    "wakeup_series",
]
