"""Guards on results: planted faults make each guard fire in the terminal table, summary.json
and the HTML report; a sound experiment fires none on solo."""

import json

from conftest import xtalk
from xtalk.analysis import guards
from xtalk.report.synthetic import Scenario, write_results

PERIOD = 1_000_000
DEADLINE_VICTIM = {"period_ns": PERIOD, "deadline_ns": PERIOD,
                   "sched": {"policy": "deadline", "runtime_ns": 500_000, "deadline_ns": PERIOD, "period_ns": PERIOD}}


def _kinds(res):
    rows = json.loads((res / "summary.json").read_text())
    return {r["scenario"]: {w["kind"] for w in r["warnings"]} for r in rows}


def test_planted_faults_fire_their_guards_everywhere(tmp_path):
    # Solo needs 95 % of the period (overloaded) and more than its 0.5 ms DEADLINE runtime;
    # the enemy scenario runs twice as fast; 3 runs per side are too few for a maximum.
    res = write_results(tmp_path / "bad", [Scenario("solo"), Scenario("faster", slowdown=0.5)], repetitions=3, jobs=200,
                        period_ns=PERIOD, exec_ns=950_000, victim=DEADLINE_VICTIM)
    p = xtalk("summary", res)
    assert p.returncode == 0, p.stderr
    kinds = _kinds(res)
    assert kinds["solo"] == {"overloaded_solo", "deadline_runtime_below_need"}, kinds
    assert kinds["faster"] == {"faster_under_interference", "too_few_runs_for_max"}, kinds
    out = " ".join(p.stdout.split())  # the terminal wraps long lines
    for needle in ("overloaded alone", "below the victim's solo need", "ran faster beside the enemies", "from 3 run(s) per side"):
        assert needle in out, (needle, p.stdout)
    assert "– (3 runs)" in out, "a maximum of 3 runs is not shown as a number"
    assert "## Warnings" in (res / "summary.md").read_text()
    r = xtalk("report", res, "--no-csv") if "--no-csv" in xtalk("report", "--help").stdout else xtalk("report", res)
    assert r.returncode == 0, r.stderr
    html = (res / "report" / "index.html").read_text()
    for needle in ("overloaded alone", "below the victim&#x27;s solo need", "ran faster beside the enemies"):
        assert needle in html, needle


def test_a_sound_experiment_fires_no_guard_on_solo(tmp_path):
    res = write_results(tmp_path / "good", [Scenario("solo"), Scenario("slow", slowdown=1.3)], repetitions=6, jobs=200,
                        period_ns=PERIOD, exec_ns=300_000, victim={"period_ns": PERIOD, "sched": {"policy": "fifo", "priority": 90}})
    assert xtalk("summary", res).returncode == 0
    kinds = _kinds(res)
    assert kinds == {"solo": set(), "slow": set()}, kinds


def test_a_wide_ci_says_how_many_runs_would_do():
    import pandas as pd
    row = dict(configuration="default", scenario="x", runs_ok=4, slowdown_median=1.1, slowdown_median_lo=0.9,
               slowdown_median_hi=1.5)
    (g,) = [g for g in guards.check(pd.DataFrame([row]), {}) if g.kind == guards.Kind.CI_TOO_WIDE]
    assert "about 144 repetitions (now 4)" in g.message  # 4 × (0.6 / 0.1)²
