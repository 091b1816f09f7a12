"""Verdicts of several measured applications (analysis/cohabitation.py, analysis/propagation.py)
on synthetic job frames with planted effects: the interference matrix cell, the ε verdict in
the worst case, failure propagation between criticality levels, and how many runs an open
verdict needs. Pure: no agent, no machine."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from xtalk.analysis import verdict as vd
from xtalk.analysis.cohabitation import (
    Application, epsilon_verdicts, grid, matrix, parse_scenario, runs_needed,
)
from xtalk.analysis.propagation import property_check, propagation
from xtalk.testing.synthetic import Application as SynApp
from xtalk.testing.synthetic import application_results

AOCS, PAYLOAD, LOGGER = "aocs", "payload", "logger"
SYN = [SynApp(AOCS, "A"), SynApp(PAYLOAD, "C"), SynApp(LOGGER, "D")]


def _apps(**eps) -> list[Application]:
    crit = {AOCS: "A", PAYLOAD: "C", LOGGER: "D"}
    return [Application(n, crit[n], vd.EpsilonSpec(**eps[n]) if n in eps else None) for n in (AOCS, PAYLOAD, LOGGER)]


@pytest.fixture(scope="module")
def planted():
    """The payload slows the AOCS loop by 1.6× (and the logger nothing); nobody slows the payload."""
    return application_results(SYN, repetitions=4, jobs=200, perturb={("default", AOCS, PAYLOAD): 1.6}, seed=1)


def test_scenario_names_read_back():
    assert parse_scenario("pair:aocs+logger").apps == ("aocs", "logger")
    assert parse_scenario("fault:logger:forkbomb").extra == "forkbomb"
    assert parse_scenario("all+enemies").kind == "all" and parse_scenario("solo").kind is None


def test_planted_pair_lands_in_its_cell_not_the_mirror(planted):
    jobs, _ = planted
    m = matrix(jobs, _apps(), n_boot=500)
    cell = m.set_index(["victim", "perturber"])
    hit = cell.loc[(AOCS, PAYLOAD)]
    assert hit["slowdown"] == pytest.approx(1.6, rel=0.05) and hit["interference"] == vd.SLOWED_DOWN
    assert hit["low"] > 1.4 and hit["scenario"] == "pair:aocs+payload"
    mirror = cell.loc[(PAYLOAD, AOCS)]
    assert mirror["slowdown"] == pytest.approx(1.0, abs=0.05) and mirror["interference"] != vd.SLOWED_DOWN
    assert cell.loc[(AOCS, LOGGER), "interference"] != vd.SLOWED_DOWN
    assert cell.loc[(AOCS, "all"), "interference"] == vd.SLOWED_DOWN  # the payload is in `all`
    g = grid(m, "default", _apps())
    assert list(g.index) == [AOCS, PAYLOAD, LOGGER]  # criticality order, A first
    assert g.loc[AOCS, PAYLOAD] == pytest.approx(1.6, rel=0.05) and math.isnan(g.loc[AOCS, AOCS])


def test_epsilon_holds_violated_inconclusive(planted):
    jobs, _ = planted
    apps = _apps(aocs={"metric": "exec", "statistic": "median", "relative": 1.3},
                 payload={"metric": "exec", "statistic": "median", "relative": 1.3},
                 logger={"metric": "response", "statistic": "max", "bound_ns": 5e6})
    v = epsilon_verdicts(jobs, apps, n_boot=500).set_index("application")
    # The AOCS loop's worst case is beside the payload (×1.6 > 1.3): violated, and said where.
    assert v.loc[AOCS, "verdict"] == vd.VIOLATED and v.loc[AOCS, "scenario"] in ("pair:aocs+payload", "all")
    assert v.loc[AOCS, "ratio_low"] > 1.3
    assert v.loc[PAYLOAD, "verdict"] == vd.HOLDS and v.loc[PAYLOAD, "firm"]
    assert v.loc[LOGGER, "verdict"] == vd.HOLDS  # response max ~0.22 ms, far under 5 ms
    # An effect on the bound with two runs a side: the widened CI straddles it.
    few, _ = application_results(SYN, repetitions=2, jobs=200, perturb={("default", AOCS, PAYLOAD): 1.3},
                                 sigma=0.05, seed=2)
    w = epsilon_verdicts(few, _apps(aocs={"metric": "exec", "statistic": "median", "relative": 1.3}),
                         n_boot=500).set_index("application")
    assert w.loc[AOCS, "verdict"] == vd.INCONCLUSIVE and not w.loc[AOCS, "firm"]


def test_few_runs_inconclusive_with_the_number_needed():
    jobs, _ = application_results(SYN, repetitions=2, jobs=100, perturb={("default", AOCS, PAYLOAD): 1.2},
                                  sigma=0.15, seed=3)
    v = epsilon_verdicts(jobs, _apps(aocs={"metric": "exec", "statistic": "median", "relative": 1.1}),
                         n_boot=500).set_index("application").loc[AOCS]
    assert v["verdict"] == vd.INCONCLUSIVE
    assert v["runs_needed"] is not None and 2 < v["runs_needed"] <= 1000
    # One run a side is never firm, however narrow its job-level CI.
    one, _ = application_results(SYN, repetitions=1, jobs=200, seed=4)
    o = epsilon_verdicts(one, _apps(aocs={"metric": "exec", "statistic": "median", "relative": 1.5}),
                         n_boot=300).set_index("application").loc[AOCS]
    assert o["verdict"] == vd.INCONCLUSIVE and o["runs_needed"] == 2


def test_runs_needed_projection():
    # ratio 1.2, CI [1.0, 1.44] over 3 runs against a bound of 1.1: a handful more runs.
    n = runs_needed(1.2, 1.0, 1.44, 1.1, 3)
    assert n is not None and 3 < n < 50
    assert runs_needed(1.2, 1.15, 1.25, 1.1, 3) == 3  # already decided
    assert runs_needed(1.1, 1.0, 1.2, 1.1, 3) is None  # on the bound: more runs will not settle it


FAULTY = dict(faults=[(LOGGER, "memhog")], configurations=("shared", "partitioned"), repetitions=4, jobs=200)


@pytest.fixture(scope="module")
def faulted():
    """A memory hog in the D logger: under `shared` it pushes the A loop past its deadline
    (×6: 1.2 ms jobs every 1 ms) and slows the C payload by 1.5×; under `partitioned` it
    touches nobody."""
    return application_results(SYN, fault_effect={("shared", LOGGER, AOCS): 6.0, ("shared", LOGGER, PAYLOAD): 1.5},
                               seed=5, **FAULTY)


def test_fault_of_d_reaching_a_violates_the_property_shared_only(faulted):
    jobs, runs = faulted
    apps = _apps(payload={"metric": "exec", "statistic": "median", "relative": 2.0})
    p = propagation(jobs, runs, apps, n_boot=500).set_index(["configuration", "application"])
    a = p.loc[("shared", AOCS)]
    assert a["verdict"] == vd.PROPAGATED and a["firm"] and "deadline miss" in a["why"]
    # The payload was slowed beyond `all`, but its ε (2× alone) held.
    assert p.loc[("shared", PAYLOAD), "verdict"] == vd.SLOWED
    assert p.loc[("partitioned", AOCS), "verdict"] == vd.CONTAINED
    assert p.loc[("partitioned", PAYLOAD), "verdict"] == vd.CONTAINED
    prop = property_check(propagation(jobs, runs, apps, n_boot=500), apps).set_index("configuration")
    assert prop.loc["shared", "verdict"] == vd.VIOLATED and "aocs" in prop.loc["shared", "why"]
    assert prop.loc["partitioned", "verdict"] == vd.HOLDS
    assert set(p["verdict"]) <= set(vd.CONTAINMENT)


def test_failure_of_the_other_application_is_propagation(faulted):
    jobs, runs = faulted
    apps = _apps()
    status = pd.DataFrame({"run_id": runs["run_id"], "application": AOCS,
                           "failed": [s == "fault:logger:memhog" and c == "partitioned"
                                      for s, c in zip(runs["scenario"], runs["configuration"])],
                           "reason": "killed by SIGKILL"})
    p = propagation(jobs, runs, apps, status=status, n_boot=300).set_index(["configuration", "application"])
    assert p.loc[("partitioned", AOCS), "verdict"] == vd.PROPAGATED and "SIGKILL" in p.loc[("partitioned", AOCS), "why"]


def test_a_fault_between_equal_or_upward_levels_does_not_count():
    apps = [Application("x", "A"), Application("y", "A")]
    jobs, runs = application_results([SynApp("x", "A"), SynApp("y", "A")], faults=[("x", "crash")], repetitions=3,
                                     jobs=150, fault_effect={("default", "x", "y"): 6.0}, seed=6)
    p = propagation(jobs, runs, apps, n_boot=300)
    assert (p["verdict"] == vd.PROPAGATED).all()
    assert property_check(p, apps).iloc[0]["verdict"] == vd.NOT_EXERCISED


def test_few_fault_runs_leave_the_property_inconclusive():
    # The fault seems to push the A loop past its ε (×1.25 against 1.2) but two noisy runs a
    # side cannot tell: the property is open, and says how many runs would settle it.
    jobs, runs = application_results(SYN, faults=[(LOGGER, "forkbomb")], repetitions=2, jobs=100, sigma=0.15,
                                     fault_effect={("default", LOGGER, AOCS): 1.25}, seed=7)
    apps = _apps(aocs={"metric": "exec", "statistic": "median", "relative": 1.2})
    p = propagation(jobs, runs, apps, n_boot=300).set_index("application")
    assert p.loc[AOCS, "verdict"] != vd.PROPAGATED and not p.loc[AOCS, "firm"]
    prop = property_check(p.reset_index(), apps).iloc[0]
    assert prop["verdict"] == vd.INCONCLUSIVE and prop["unsettled"] >= 1
    assert prop["runs_needed"] is None or prop["runs_needed"] > 2


def test_first_k_columns_and_judged_for_epsilon():
    # A series over the first k instances (seed 000 §5.3.1): first:2 holds the first two.
    apps = [SynApp("i1", "A"), SynApp("i2", "A"), SynApp("i3", "A")]
    jobs, _ = application_results(apps, repetitions=3, jobs=100, perturb={("default", "i1", "i2"): 1.3}, seed=8)
    first = jobs[jobs["scenario"] == "pair:i1+i2"].astype({"scenario": str}).assign(scenario="first:2")
    both = pd.concat([jobs.astype({"scenario": str}), first.astype({"scenario": str})], ignore_index=True)
    both["run_id"] = both["run_id"].astype(str) + both["scenario"].map(lambda s: "-f" if s == "first:2" else "")
    named = [Application(a.name, "A", vd.EpsilonSpec(metric="exec", statistic="median", relative=1.2)) for a in apps]
    m = matrix(both, named, n_boot=300).set_index(["victim", "perturber"])
    assert m.loc[("i1", "first:2"), "slowdown"] == pytest.approx(1.3, rel=0.05)
    assert ("i3", "first:2") not in m.index  # i3 is not among the first two
    assert epsilon_verdicts(both, named, n_boot=300).set_index("application").loc["i1", "verdict"] == vd.VIOLATED


def test_a_mean_ratio_ci_resamples_runs_not_pooled_jobs():
    # Two runs a side whose means differ by 10 % from run to run (each run its own machine
    # state), nothing between the sides: a CI over the pooled jobs claimed ±3 %.
    import numpy as np

    from xtalk.analysis.cohabitation import ratio

    rng = np.random.default_rng(1)
    runs = lambda levels: [rng.normal(lv, 0.02, 3000) for lv in levels]  # noqa: E731
    scen, ref = runs([1.0, 1.1]), runs([0.95, 1.05])
    for stat in ("mean", "p99"):
        ci = ratio(scen, ref, stat, n_boot=500)
        assert ci.method == "runs" and ci.runs == (2, 2), ci
        assert ci.low < 1.0 < ci.high and ci.high - ci.low > 0.1, (stat, ci)


def test_is_multi_on_label_codes_as_nunique():
    """More than one application: from the categorical codes' extremes as from nunique, with
    missing labels, unused categories, one label, none, and a column of strings."""
    from xtalk.analysis.cohabitation import is_multi

    cases = [["a", "a", "b"], ["a", "a"], ["a", None, "a"], [None, "b", None, "a"], [None, None], [], ["b", None]]
    for labels in cases:
        for col in (pd.Categorical(labels, categories=["a", "b", "c"]), pd.Series(labels, dtype=object)):
            jobs = pd.DataFrame({"application": col})
            assert is_multi(jobs) == (jobs["application"].nunique() > 1), labels
    assert not is_multi(pd.DataFrame({"job": [1, 2]}))
