"""Jobs from a program's probes (`jobs_from = { probe = ... }`): the job table is the program's
steps, checked against the program's own clock; a planted slowdown of the step is found and
an A/A pair (solo against an enemy-less scenario) claims nothing; the whole process stays a
statistic of its own; probes are a view, a method and a summary entry. The derivation's
pieces (spans, wake-ups, the release grid) are checked without the agent too."""

import io
import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

import xtalk
from capabilities import policy
from conftest import ROOT, xtalk as xtalk_cli
from xtalk.store.probe_jobs import _releases, _spans, _wakeups

STEPS, PERIOD_US, WARMUP = 30, 5000, 2
#: The probe counter's rate against CLOCK_MONOTONIC, as calibrated: within this many ppm.
RATE_PPM = 50

EXPERIMENT = """
name = "probe-jobs"
repetitions = 5
settle = "50ms"
[victim]
body = "command"
argv = ["{program}", "-n", "{steps}", "-p", "{period_us}", "-a", "10000", "-o", "{timing}/"]
jobs_from = {{ probe = "step", release = "wake" }}
period = "{period_us}us"
warmup_jobs = {warmup}
cpus = "last"
policy = "fifo"
priority = 80
[[scenario]]
name = "again"
description = "solo once more: an A/A pair"
[[scenario]]
name = "rt-hog"
description = "a real-time process above the loop on its CPU, busy half of every millisecond"
enemies = [{{ kind = "pi", cpus = "last", policy = "fifo", priority = 90, intensity = 50 }}]
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    out = tmp_path_factory.mktemp("periodic") / "periodic"
    p = subprocess.run(["cc", "-O2", "-Wall", "-I", ROOT / "include", ROOT / "examples/apps/periodic.c", "-o", out],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory, program, agent):
    why = policy("fifo")
    if why:
        pytest.skip(why)
    from xtalk.runner import run_experiment

    d = tmp_path_factory.mktemp("probe-jobs")
    timing = d / "timing"
    timing.mkdir()
    f = d / "exp.toml"
    f.write_text(EXPERIMENT.format(program=program, steps=STEPS, period_us=PERIOD_US, timing=timing, warmup=WARMUP))
    out = io.StringIO()
    res = run_experiment(f, d / "res", Console(file=out, width=250), skip_feasibility=True)
    return res, timing, out.getvalue()


def _own_clock(timing, tid) -> pd.DataFrame:
    return pd.read_csv(timing / f"periodic-{tid}.txt", sep=" ")


def test_jobs_are_the_steps_on_the_programs_own_clock(results):
    res, timing, _ = results
    jobs = xtalk.open(res).jobs(measured_only=False)
    assert set(jobs.groupby("run_id").size()) == {STEPS}, "one job per step, every run"
    assert set(jobs.groupby("run_id").warmup.sum()) == {WARMUP}
    for run_id, g in jobs.groupby("run_id"):
        g = g.sort_values("job")
        own = _own_clock(timing, int(g.tid.iloc[0]))
        assert len(own) == STEPS
        # The probe brackets the program's own reads of the clock: begin ≤ its begin, end ≥ its end,
        # within 2 µs plus a rate allowance: probe times map ticks to CLOCK_MONOTONIC linearly
        # between the run's two reference pairs, so an error in one pair grows across the run
        # (CI once saw -2.3 µs at the far end of a 150 ms run, 13 ppm, when the pairs were two
        # plain reads a preemption could split; the agent now keeps the narrowest of 16
        # bracketed reads), and NTP may change CLOCK_MONOTONIC's rate within a run.
        d_begin = own["begin"].to_numpy() - g.start_ns.to_numpy()
        d_end = g.end_ns.to_numpy() - own["end"].to_numpy()
        slack = 2000 + RATE_PPM * 1e-6 * float(own["end"].max() - own["begin"].min())
        assert (d_begin >= -slack).all() and (d_end >= -slack).all(), (run_id, d_begin.min(), d_end.min(), slack)
        assert np.median(d_begin) < 20_000 and np.median(d_end) < 20_000, (run_id, np.median(d_begin), np.median(d_end))
        # Wake-ups are the program's (the mark right after its own read), releases its grid up to one constant.
        assert np.median(np.abs(g.wakeup_ns.to_numpy() - own["wake"].to_numpy())) < 20_000
        offset = g.release_ns.to_numpy() - own["release"].to_numpy()
        assert offset.max() - offset.min() < 1000, ("the release grid is the program's, shifted by one constant",
                                                    run_id, list(offset), list(g.wakeup_ns - g.release_ns))
        assert (g.period_ns == PERIOD_US * 1000).all() and (g.wakeup_latency_ns >= 0).all()


def test_planted_slowdown_is_found_and_aa_claims_nothing(results):
    res, _, printed = results
    table = {r["scenario"]: r for r in json.loads((res / "summary.json").read_text())}
    assert table["solo"]["jobs"] == 5 * (STEPS - WARMUP), "the jobs column counts the steps"
    hog, aa = table["rt-hog"], table["again"]
    ci = {k: (r["slowdown_median"], r["slowdown_median_lo"], r["slowdown_median_hi"]) for k, r in table.items()}
    assert hog["slowdown_median_lo"] > 1, ci  # the planted 2× found: its CI excludes 1
    # Nothing planted in the A/A pair: no effect of the planted size claimed. Its 95 % CI itself
    # excludes 1 in 1 run of 20 by construction (CI failed once on [0.83, 0.98] on a loaded
    # machine), so what is checked is that the CI reaches within 10 % of 1, where a 2× would not.
    assert aa["slowdown_median_lo"] <= 1.1 and aa["slowdown_median_hi"] >= 0.9, ci
    assert "jobs: the spans of probe 'step', released on a 5 ms grid through probe 'wake'" in printed
    assert "whole process (exec to exit; not a job)" in printed
    assert table["solo"]["process_ms"] > STEPS * PERIOD_US / 1e3 * 0.9, "the whole process is its own statistic"
    steps = {p["name"]: p for p in hog["probes"]}["step"]
    assert steps["slowdown_median_lo"] > 1 and steps["n"] == 5 * STEPS


def test_probes_view_and_method(results):
    res, _, _ = results
    out = xtalk_cli("query", res, "SELECT name, count(*) AS n FROM probes GROUP BY 1", "--csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["name,n", f"step,{15 * STEPS}"]
    p = xtalk.open(res).probes()
    assert set(p.name) == {"step"} and len(p) == 15 * STEPS
    assert {"run_id", "scenario", "application", "duration_ns"} <= set(p.columns)


def test_a_probe_the_program_never_recorded_is_named(results, tmp_path):
    from xtalk.store.files import JobLogError
    from xtalk.store.probe_jobs import probe_jobs
    from xtalk.plan import JobsFrom

    res, _, _ = results
    run = next(p for p in (res / "runs").iterdir() if p.is_dir())
    with pytest.raises(JobLogError, match="jobs_from.probe: the program recorded no probe named 'stpe'"):
        probe_jobs(run, None, JobsFrom(probe="stpe"), {}, None)


# --- the derivation's pieces, no agent ----------------------------------------------------


def _events(rows):
    return pd.DataFrame(rows, columns=["ts_ns", "id", "kind", "cpu", "tid"])


def test_spans_pair_per_thread_and_begin_at_one_end_at_another():
    ev = _events([(10, 1, "begin", 0, 7), (12, 1, "begin", 1, 8), (20, 1, "end", 0, 7), (30, 1, "end", 1, 8),
                  (40, 1, "begin", 0, 7), (45, 3, "end", 0, 7), (50, 1, "end", 0, 7)])
    s = _spans(ev, 1, 1)
    assert list(zip(s.tid, s.start_ns, s.end_ns)) == [(7, 10, 20), (8, 12, 30), (7, 40, 50)]
    s = _spans(ev, 1, 3)
    assert list(zip(s.start_ns, s.end_ns)) == [(40, 45)], "from the latest begin of 1 to the next end of 3"


def test_wakeups_are_the_last_mark_before_each_start():
    ev = _events([(5, 2, "mark", 0, 7), (15, 2, "mark", 0, 7), (16, 2, "mark", 0, 8)])
    spans = pd.DataFrame({"tid": [7, 7, 8, 9], "start_ns": [10, 20, 30, 40]})
    assert list(_wakeups(ev, 2, spans)) == [5, 15, 16, 40], "no mark on its thread: the start"


def test_release_grid_is_under_every_wakeup():
    period = 5_000_000
    rng = np.random.default_rng(3)
    lateness = rng.integers(50_000, 1_500_000, 200)
    lateness[[0, 77]] = [3_000_000, 10_000]  # a late first job must not shift the grid
    grid = 1_000_000_000 + np.arange(200) * period
    grid[100:] += period  # one period skipped (the job before ended early): later jobs keep their own releases
    lateness[100] = 30_000  # a skipping loop wakes on time, just after a later grid point
    x = grid + lateness
    prev_end = np.concatenate([[0], x[:-1] + 100_000])
    r = _releases(x, period, prev_end)
    assert (r - grid == 10_000).all(), "the grid through the least late job"


def test_a_late_wakeup_after_a_sleep_keeps_its_slot():
    period = 5_000_000
    grid = 1_000_000_000 + np.arange(5) * period
    wake = grid + 20_000
    wake[2] = grid[2] + period + 1_000_000  # preempted for more than a period: late, not a skip
    end = wake + 500_000
    wake[3] = end[2] + 2_000  # its release has passed: it starts at once
    end[3] = wake[3] + 500_000
    prev_end = np.concatenate([[0], end[:-1]])
    assert list(_releases(wake, period, prev_end) - grid) == [20_000] * 5


def test_an_overrun_makes_the_next_jobs_late_not_released_later():
    period = 3_000_000
    grid = 1_000_000_000 + np.arange(6) * period
    wake = grid + 20_000
    end = wake + 1_000_000
    end[2] = grid[2] + 7_500_000  # job 2 overruns by more than two periods
    wake[3], wake[4] = end[2] + 2_000, end[2] + 2_000 + 1_002_000  # 3 and 4 start at once, late
    end[3], end[4] = wake[3] + 1_000_000, wake[4] + 1_000_000
    prev_end = np.concatenate([[0], end[:-1]])
    assert list(_releases(wake, period, prev_end) - grid) == [20_000] * 6


def test_probes_view_is_there_without_probes(tmp_path):
    (tmp_path / "runs").mkdir()
    from xtalk.store import PROBE_COLUMNS, open as open_results

    r = open_results(tmp_path)
    assert r.connect().execute("SELECT count(*) FROM probes").fetchone() == (0,)
    assert r.probes().empty and list(r.probes().columns) == PROBE_COLUMNS


def test_wakeups_late_by_more_than_a_period_do_not_move_the_grid():
    period = 5_000_000
    rng = np.random.default_rng(5)
    grid = 1_000_000_000 + np.arange(60) * period
    lateness = rng.integers(800_000, 4_000_000, 60)  # spread over most of the period
    lateness[[10, 30]] = [period + 300_000, 2 * period + 100_000]  # preempted past later grid points
    lateness[45] = 50_000  # the least late
    x = grid + lateness
    prev_end = x - period  # every job slept
    assert (_releases(x, period, prev_end) - grid == 50_000).all()
