"""The noise floor against the intervals actually obtained (planted data, no agent): the
warning after the runs fires only where a slowdown CI concluded nothing at `min_effect`, and
the passes before the runs are sized by time, not by a fixed 20 jobs."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from xtalk.feasibility import after_runs, noise_jobs, repetitions_needed, unresolved


def _table(*rows) -> pd.DataFrame:
    """Summary rows: (scenario, lo, hi), solo first as write_summary gives it."""
    return pd.DataFrame([{"configuration": "default", "scenario": "solo", "slowdown_median_lo": 1.0,
                          "slowdown_median_hi": 1.0}] +
                        [{"configuration": "default", "scenario": s, "slowdown_median_lo": lo, "slowdown_median_hi": hi}
                         for s, lo, hi in rows])


# Five solo runs whose medians spread 10 % (the demo's short passes gave about that): by the
# spread alone a 5 % effect "needs" 31 repetitions.
NOISY = [1.00e6, 1.12e6, 0.90e6, 1.08e6, 0.95e6]


def test_the_demo_case_concluding_cis_get_no_warning_despite_a_wide_spread():
    noise, warning = after_runs(NOISY, _table(("read", 1.06, 1.31), ("chase", 1.02, 1.12)), 0.05, 5)
    assert noise["repetitions_needed"] > 5 and noise["source"] == "solo runs" and noise["passes"] == 5
    assert warning is None


def test_an_interval_holding_one_and_wider_than_the_effect_is_warned_with_the_repetitions():
    noise, warning = after_runs(NOISY, _table(("read", 1.06, 1.31), ("chase", 0.93, 1.14)), 0.05, 5)
    need = repetitions_needed(noise["spread"], 0.05)
    assert warning is not None and "chase" in warning and "read" not in warning.split(";")[1]
    assert f"set repetitions = {need}" in warning and "holds 1" in warning


def test_a_narrow_interval_around_one_has_shown_no_effect_of_that_size():
    assert unresolved(_table(("quiet", 0.98, 1.03)), 0.05) == []
    assert unresolved(_table(("quiet", 0.98, 1.03)), 0.02) == ["quiet"]
    # A speed-up concludes too (its own guard says what it means); a missing CI is the guards' matter.
    assert unresolved(_table(("faster", 0.7, 0.9), ("none", float("nan"), float("nan"))), 0.05) == []


def test_a_wide_interval_with_a_quiet_solo_says_the_effect_varies_not_the_solo():
    quiet = [1.0e6, 1.001e6, 0.999e6, 1.0005e6, 0.9995e6]
    _, warning = after_runs(quiet, _table(("chase", 0.9, 1.3)), 0.05, 5)
    assert warning is not None and "the enemies' effect varies" in warning


def test_noise_passes_are_sized_by_time_and_never_longer_than_a_run():
    def plan(period_ms: float, jobs: int):  # noise_jobs reads the victim's period and jobs only
        return SimpleNamespace(victim=SimpleNamespace(period_ns=int(period_ms * 1e6), jobs=jobs))

    assert noise_jobs(plan(10, 600)) == 150  # 1.5 s of a 10 ms period, not 20 jobs
    assert noise_jobs(plan(1, 100)) == 100  # the run itself is shorter than 1.5 s
    assert noise_jobs(plan(500, 600)) == 20  # a long period: still enough jobs for a median


def test_the_machine_delay_separates_late_starts_and_stolen_time_from_the_jobs_own_work():
    from xtalk.feasibility import delay_text, machine_delay

    ms = 1_000_000
    # Ten 3 ms jobs of a 10 ms period; job 4 starts 9 ms late, job 7 loses 8 ms on its CPU
    # with no context switch, job 8 is preempted (a switch: its lost time is not the machine's
    # hidden hand but a visible one, left out).
    rows = [dict(release_ns=k * 10 * ms, start_ns=k * 10 * ms + 50_000, end_ns=k * 10 * ms + 50_000 + 3 * ms,
                 cpu_time_ns=3 * ms, nvcsw=0, nivcsw=0, exec_ns=3 * ms) for k in range(10)]
    rows[4].update(start_ns=rows[4]["release_ns"] + 9 * ms, end_ns=rows[4]["release_ns"] + 12 * ms)
    rows[7].update(end_ns=rows[7]["start_ns"] + 11 * ms, exec_ns=11 * ms)
    rows[8].update(end_ns=rows[8]["start_ns"] + 6 * ms, exec_ns=6 * ms, nivcsw=1)
    d = machine_delay([pd.DataFrame(rows[:5]), pd.DataFrame(rows[5:])], 10 * ms)
    assert d["jobs"] == 10 and d["max_late_start_ns"] == 9 * ms and d["max_stolen_ns"] == 8 * ms
    assert d["slack_ns"] == 7 * ms and d["over_slack"] == 2  # jobs 4 and 7, not the preempted 8
    assert "2 job(s) lost more than the slack" in delay_text(d) and "the machine's" in delay_text(d)
    quiet = machine_delay([pd.DataFrame(rows[:4])], 10 * ms)
    assert quiet["over_slack"] == 0 and "expect solo misses" not in delay_text(quiet)
    assert "up to 8 ms off the CPU without a context switch" in delay_text(d)
    assert "never off the CPU without a context switch" in delay_text(quiet)  # none stolen: not "up to 0 ms"
