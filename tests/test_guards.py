"""Guards on results: planted faults make each guard fire in the terminal table, summary.json
and the HTML report; a sound experiment fires none on solo."""

import json
import math

import pandas as pd
import pytest

from conftest import xtalk
from xtalk.analysis import guards
from xtalk.testing.synthetic import Scenario, write_results

PERIOD = 1_000_000
DEADLINE_VICTIM = {"period_ns": PERIOD, "deadline_ns": PERIOD,
                   "sched": {"policy": "deadline", "runtime_ns": 500_000, "deadline_ns": PERIOD, "period_ns": PERIOD}}


def _kinds(res):
    rows = json.loads((res / "summary.json").read_text())
    return {r["scenario"]: {w["kind"] for w in r["warnings"]} for r in rows}


@pytest.mark.slow  # a summary and a whole report in subprocesses: make test-slow
def test_planted_faults_fire_their_guards_everywhere(tmp_path):
    # Solo needs 95 % of the period (overloaded) and more than its 0.5 ms DEADLINE runtime;
    # the enemy scenario runs twice as fast; 3 runs per side are too few for a maximum.
    res = write_results(tmp_path / "bad", [Scenario("solo"), Scenario("faster", slowdown=0.5)], repetitions=3, jobs=200,
                        period_ns=PERIOD, exec_ns=950_000, victim=DEADLINE_VICTIM)
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    kinds = _kinds(res)
    assert kinds["solo"] == {"overloaded_solo", "deadline_runtime_below_need"}, kinds
    assert kinds["faster"] == {"faster_under_interference", "too_few_runs_for_max", "disturbed_reference"}, kinds
    out = " ".join(p.stdout.split())  # the terminal wraps long lines
    for needle in ("overloaded alone", "below the victim's solo need", "ran faster beside the enemies", "from 3 run(s) per side"):
        assert needle in out, (needle, p.stdout)
    assert "– (3 runs)" in out, "a maximum of 3 runs is not shown as a number"
    assert "## Warnings" in (res / "summary.md").read_text()
    r = xtalk("report", res, "--no-csv")
    assert r.returncode == 0, r.stderr
    html = (res / "report" / "index.html").read_text()
    for needle in ("overloaded alone", "below the victim&#x27;s solo need", "ran faster beside the enemies"):
        assert needle in html, needle


def test_a_sound_experiment_fires_no_guard_on_solo(tmp_path):
    res = write_results(tmp_path / "good", [Scenario("solo"), Scenario("slow", slowdown=1.3)], repetitions=6, jobs=200,
                        period_ns=PERIOD, exec_ns=300_000, victim={"period_ns": PERIOD, "sched": {"policy": "fifo", "priority": 90}})
    assert xtalk("summary", res).returncode == 0
    kinds = _kinds(res)
    assert kinds == {"solo": set(), "slow": {"too_few_runs_for_max"}}, kinds  # 6 runs: no maximum


def _row(lo, hi, med=None, runs=4, scenario="x"):
    return dict(configuration="default", scenario=scenario, runs_ok=runs, slowdown_median=med or (lo + hi) / 2,
                slowdown_median_lo=lo, slowdown_median_hi=hi)


def _fired(rows, **kw):
    return [g for g in guards.check(pd.DataFrame(rows), {}, **kw) if g.kind == guards.Kind.CI_TOO_WIDE]


def test_a_ci_that_excludes_one_has_concluded_however_wide():
    # examples/cohabitation.toml: [2.04, 2.73] was "too wide to conclude; about 143 repetitions".
    assert _fired([_row(2.04, 2.73), _row(1.02, 1.9)]) == []
    # Within ±min_effect of 1: no effect of that size, concluded too.
    assert _fired([_row(0.97, 1.04)]) == []
    assert guards.concluded(2.04, 2.73) and guards.concluded(0.97, 1.04, 0.05) and not guards.concluded(0.97, 1.04, 0.02)


def test_a_ci_holding_one_and_wider_than_min_effect_says_how_many_runs_would_do():
    (g,) = _fired([_row(0.9, 1.5)])
    assert "holds 1" in g.message and "nothing is concluded at min_effect" in g.message
    assert "about 400 repetitions (now 4)" in g.message  # 4 × (0.5 / 0.05)²: the far end to within ±5 %
    # Narrower than 30 % yet not concluded at the experiment's min_effect: warned (the old rule was silent).
    (g,) = _fired([_row(0.99, 1.08)], min_effect=0.02)
    assert "±2%" in g.message
    # With the solo runs' spread known, the repetitions are those the end-of-run line names.
    from xtalk.feasibility import after_runs

    (g,) = _fired([_row(0.93, 1.14, runs=5)], spreads={"default": 0.1})
    _, line = after_runs([1.0e6, 1.12e6, 0.90e6, 1.08e6, 0.95e6], pd.DataFrame([_row(0.93, 1.14, runs=5)]), 0.05, 5)
    need = guards.repetitions_needed(0.1, 0.05)
    assert f"set repetitions = {need}" in g.message and f"set repetitions = {need}" not in line, line
    # (the line's spread is its own solo runs': the words, not the number, are the guard's)
    assert "nothing is concluded at min_effect" in line and "set repetitions = " in line


def _experiment(res, **fields):
    doc = json.loads((res / "experiment.json").read_text())
    doc["experiment"].update(fields)
    (res / "experiment.json").write_text(json.dumps(doc))


def _report_html(res):
    r = xtalk("report", res, "--no-csv")
    assert r.returncode == 0, r.stderr
    return " ".join((res / "report" / "index.html").read_text().split())


@pytest.mark.slow  # a summary and a whole report in subprocesses: make test-slow
def test_the_end_of_run_conclusion_is_in_summary_json_and_the_report(tmp_path):
    # An effect of nothing measured at a min_effect of 0.1 %: the CI holds 1 and is wider.
    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("same")], repetitions=3, jobs=200, period_ns=PERIOD,
                        exec_ns=300_000, victim={"period_ns": PERIOD, "sched": {"policy": "fifo", "priority": 90}})
    _experiment(res, min_effect="0.1%")
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    rows = {r["scenario"]: r for r in json.loads((res / "summary.json").read_text())}
    (w,) = [w for w in rows["same"]["warnings"] if w["kind"] == "ci_too_wide"]
    assert "nothing is concluded at min_effect" in w["message"] and "set repetitions = " in w["message"]
    assert "nothing is concluded at min_effect" in " ".join(p.stdout.split())
    assert "nothing is concluded at min_effect" in (res / "summary.md").read_text()
    assert "nothing is concluded at min_effect" in _report_html(res)


@pytest.mark.slow  # a summary and a whole report in subprocesses: make test-slow
def test_a_disturbed_solo_fires_its_guard_and_flags_what_is_measured_against_it(tmp_path):
    # `make demo`: solo missed 58 deadlines, one 3 ms job took 99 ms, and warnings were [].
    # Here solo (planted last) misses 3 deadlines of 1200 jobs (0.25 %, under the old 5 %) and
    # one job runs 2.5 periods (serious).
    res = write_results(tmp_path / "r", [Scenario("slow", slowdown=1.3), Scenario("solo")], repetitions=3, jobs=400,
                        period_ns=PERIOD, exec_ns=300_000, miss_jobs=(50, 150), serious_jobs=(250,),
                        victim={"period_ns": PERIOD, "sched": {"policy": "fifo", "priority": 90}})
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    kinds = _kinds(res)
    assert {"misses_solo", "tail_solo"} <= kinds["solo"], kinds
    assert "disturbed_reference" in kinds["slow"], kinds
    r = xtalk("report", res, "--no-csv", "--epsilon", "exec:max:1.2x")
    assert r.returncode == 0, r.stderr
    html = " ".join((res / "report" / "index.html").read_text().split())
    assert "against a DISTURBED reference" in html and "the reference is disturbed (solo: 3 deadline misses" in html
    v = pd.read_csv(res / "report" / "tables" / "verdicts.csv").set_index("scenario")
    assert v.loc["slow", "status"].endswith(", against a DISTURBED reference"), v.loc["slow", "status"]
    assert "DISTURBED" in v.loc["slow", "epsilon_verdicts"] and "DISTURBED" not in v.loc["solo", "status"]


def test_five_runs_show_no_max_slowdown(tmp_path):
    # (an enemy of its own, so that "slow" is no A/A pair of solo for the noise floor)
    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("slow", [{"kind": "pi"}], slowdown=1.3)], repetitions=5,
                        jobs=100, period_ns=PERIOD, exec_ns=300_000,
                        victim={"period_ns": PERIOD, "sched": {"policy": "fifo", "priority": 90}})
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    assert "– (5 runs)" in " ".join(p.stdout.split()) and "too_few_runs_for_max" in _kinds(res)["slow"]
    html = _report_html(res)
    assert "max – (5 runs: too few for a maximum)" in html, "the verdict line prints no maximum from 5 runs"
    # The interference word names its statistic (the median), beside it.
    assert "(the median slowed down, against the noise floor ±" in html
    v = pd.read_csv(res / "report" / "tables" / "verdicts.csv").set_index("scenario")
    assert "max – (5 runs" in v.loc["slow", "verdict"], v.loc["slow", "verdict"]


def test_a_task_set_alone_is_judged_per_task():
    # examples/taskset_reservations.toml: the periodic task missed 0 of 10, each hog (planned
    # to overrun: wcet 100 ms, deadline 50 ms) 10 of 10; the pooled guard said "the victim
    # misses 67 % of its deadlines alone".
    tasks = pd.DataFrame([dict(scenario="solo", configuration="default", task=k, name=n, jobs=10, missed=m, dmr=m / 10,
                               wcet_ms=w, deadline_ms=50.0) for k, (n, m, w) in
                          enumerate([("periodic", 0, 20.0), ("hog0", 10, 100.0), ("hog1", 10, 100.0)])])
    solo = dict(configuration="default", scenario="solo", runs_ok=1, jobs=30, deadline_misses=20, serious_misses=20,
                median_exec_ms=15.0, max_exec_ms=100.0, slowdown_median=1.0, slowdown_median_lo=float("nan"),
                slowdown_median_hi=float("nan"))
    victim = {"period_ns": 50_000_000, "body": {"kind": "taskset"}}
    assert guards.check(pd.DataFrame([solo]), {"default": victim}, tasks=tasks) == []
    late = tasks.assign(missed=[2, 10, 10], dmr=[0.2, 1.0, 1.0])
    (g,) = guards.check(pd.DataFrame([solo]), {"default": victim}, tasks=late)
    assert g.kind == guards.Kind.MISSES_SOLO and "task periodic misses 2 of 10" in g.message


def test_a_command_victim_is_not_told_to_set_utilization():
    solo = dict(configuration="default", scenario="solo", runs_ok=3, jobs=300, deadline_misses=290, serious_misses=0,
                median_exec_ms=9.5, max_exec_ms=9.9)
    (g,) = guards.check(pd.DataFrame([solo]), {"default": {"period_ns": 10_000_000, "body": {"kind": "command"}}})
    assert g.kind == guards.Kind.OVERLOADED_SOLO and "utilization" not in g.message and "command" in g.message


@pytest.mark.parametrize("lo, hi, floor, effect, word", [
    (2.04, 2.73, math.nan, 0.05, "slowed down"),   # the review's CI: a slowdown however wide
    (2.04, 2.73, 0.2, 0.05, "slowed down"),
    (1.01, 1.10, 0.05, 0.05, "inconclusive"),      # excludes 1, not the noise floor
    (1.01, 1.10, math.nan, 0.05, "slowed down"),   # no floor measured: excludes 1
    (0.90, 1.50, math.nan, 0.05, "inconclusive"),  # holds 1, wider than ±5 %
    (0.97, 1.04, math.nan, 0.05, "within noise"),  # within ±min_effect: no effect of that size
    (0.97, 1.04, math.nan, 0.02, "inconclusive"),
    (0.97, 1.04, 0.06, 0.02, "within noise"),      # within the floor
    (0.50, 0.90, 0.05, 0.05, "sped up"),
    (1.20, 1.40, 0.60, 0.05, "noise too high to judge"),
])
def test_one_rule_gives_the_same_word_on_every_surface(lo, hi, floor, effect, word):
    """verdict.interference (the report's and a campaign cell's word), the guards'
    `concluded` and `ci_too_wide`, and the campaign maps' known cells judge one CI alike."""
    from xtalk.analysis import verdict as vd
    from xtalk.results import campaign_maps as cm

    assert vd.interference(lo, hi, floor, effect) == word
    done = word in vd.CONCLUDED
    assert guards.concluded(lo, hi, effect, floor) == done
    fired = _fired([_row(lo, hi, runs=20)], min_effect=effect, floor=floor)
    assert bool(fired) == (not done and hi >= 1 - guards.FASTER), fired
    if effect == cm.MIN_EFFECT:  # the maps judge at the default min_effect (a campaign has none of its own)
        cells = pd.DataFrame([dict(scenario="x", exec_slowdown_median_lo=lo, exec_slowdown_median_hi=hi,
                                   exec_noise_floor=floor)])
        stat = cm.STATS["exec-median"]
        assert list(stat.words(cells)) == [word] and bool(stat.known(cells).iloc[0]) == done


def test_a_ci_inside_the_noise_floor_says_so_in_its_guard():
    (g,) = _fired([_row(1.01, 1.10, runs=20)], floor=0.05)
    assert "reaches inside the noise floor ±5.0%" in g.message and "holds 1" not in g.message
    (g,) = _fired([_row(1.2, 1.4, runs=20)], floor=0.6)
    assert "noise floor of ±60%" in g.message
