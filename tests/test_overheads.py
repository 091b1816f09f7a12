"""Measured scheduler overheads (seed 001 §4.5) from a recorded kernel trace: the per-job
decomposition of a latency victim's wake-up into Δevent, Δrel, Δsched and Δcxs, jobs that
cannot be decomposed, the summary, `xtalk summary --view overheads` (and its old verb), `xtalk compare`'s section and the
measured overhead fed to `xtalk sched analyze`. The fixture is a few windows of real runs
of examples/latency_overheads.toml (tests/fixtures/overheads/trim.py says how)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import xtalk
from xtalk.analysis import overheads as ao
from xtalk.sched.cli import app as sched_app
from xtalk.store import open as open_results
from xtalk.store.overheads import collect
from xtalk.trace.overheads import DELTAS, decompose
from xtalk.trace.parse import parse_file

FIXTURE = Path(__file__).parent / "fixtures" / "overheads" / "results"
#: What the matching must find in each recorded window: job -> reason ("" decomposed).
EXPECTED = {
    "1-solo-r0": {767: "no switch", 768: "no switch", 769: "no switch", 770: "no switch", 771: "no switch"},
    "2-write-r1": {134: "no switch", 135: "no switch", 136: "late", 137: "late", 138: "no switch", 139: "no switch",
                   140: "no switch"},
    "3-solo-r1": {18: "no switch", 20: "no switch", 21: "no switch", 23: "no switch", 25: "no switch"},
}


@pytest.fixture
def results(tmp_path) -> Path:
    """A writable copy of the fixture (the commands write beside it)."""
    dst = tmp_path / "results"
    shutil.copytree(FIXTURE, dst)
    return dst


def _run(name: str):
    d = FIXTURE / "runs" / name
    victim = json.loads((d / "run.json").read_text())["pids"]["victim"]
    return parse_file(d / "trace.txt"), pd.read_parquet(d / "jobs.parquet"), victim


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_job_matched_or_given_its_reason(name):
    events, jobs, victim = _run(name)
    o = decompose(events, jobs, victim)
    assert list(o.job) == list(jobs.job)
    assert {j: r for j, r in zip(o.job, o.unmatched) if r} == EXPECTED[name]
    ok = o[o.unmatched == ""]
    # The four add up to the job's measured latency, to the ns, by construction.
    assert (ok[[f"{d}_ns" for d in DELTAS]].sum(axis=1) == ok.wakeup_ns - ok.release_ns).all()
    assert (ok.relev_ns == ok.wakeup_ns - ok.release_ns).all()
    # Instants in order, within the ±0.5 µs of the trace's µs stamps.
    for a, b in (("release_ns", "irq_ns"), ("irq_ns", "wake_ns"), ("wake_ns", "switch_ns"), ("switch_ns", "wakeup_ns")):
        assert (ok[b] - ok[a] >= -1000).all(), (a, b)
    # The timer interrupt's own clock read (ns) is used, not the µs stamp.
    assert (ok.irq_ns % 1000 != 0).any()


def test_unmatched_jobs_carry_no_invented_numbers():
    events, jobs, victim = _run("2-write-r1")
    o = decompose(events, jobs, victim).set_index("job")
    late, no_switch = o.loc[136], o.loc[134]
    assert late[[f"{d}_ns" for d in DELTAS]].isna().all(), "a late job has no overheads, not zeros"
    # Its latency is measured all the same (carried whole into Δ^relEv), and the trace says
    # how far the earlier job ran past its release: most of that latency.
    assert late.relev_ns == late.wakeup_ns - late.release_ns
    assert 0 < late.overrun_ns <= late.relev_ns + 1000
    # The switch is missing: the expiry and the wake-up stand, the rest is unknown.
    assert no_switch.event_ns > 0 and no_switch.rel_ns > -1000
    assert np.isnan(no_switch.sched_ns) and np.isnan(no_switch.cxs_ns) and np.isnan(no_switch.overrun_ns)
    assert no_switch.relev_ns == no_switch.wakeup_ns - no_switch.release_ns


def test_lost_events_leave_jobs_unmatched_and_the_fallback_without_timer_starts():
    events, jobs, victim = _run("1-solo-r0")
    full = decompose(events, jobs, victim).set_index("job")
    release = int(jobs.set_index("job").loc[763, "release_ns"])
    start = events[(events.event == "hrtimer_start") & (events.expires == release)].index
    o = decompose(events.drop(start), jobs, victim).set_index("job")
    assert o.loc[763, "unmatched"] == "no timer start" and np.isnan(o.loc[763, "event_ns"])
    wake = events[(events.event == "sched_wakeup") & (events.target_pid == victim)
                  & (events.ts_ns > full.loc[764, "irq_ns"] - 1000)].index[:1]
    o = decompose(events.drop(wake), jobs, victim).set_index("job")
    assert o.loc[764, "unmatched"] == "no wake-up"
    # A time-shared victim's timer carries slack (expires = softexpires + 50 µs): it is
    # still found by the time it asked for.
    slack = events.copy()
    is_start = slack.event == "hrtimer_start"
    slack.loc[is_start, "expires"] = slack.loc[is_start, "expires"] + 50_000
    assert decompose(slack, jobs, victim).set_index("job").equals(full)
    # The default event set has no hrtimer_start: the victim's wake-up names the CPU and
    # the expiry there; the same jobs decompose to the same numbers.
    bare = decompose(events[events.event != "hrtimer_start"], jobs, victim).set_index("job")
    ok = full.unmatched == ""
    assert (bare.loc[ok, "unmatched"] == "").all()
    assert (bare.loc[ok, "event_ns"] == full.loc[ok, "event_ns"]).all()


def test_summary_per_scenario(results):
    jobs, runs = collect(open_results(results).runs())
    assert len(runs) == 3 and (runs.lost_events == 0).all()
    s = ao.summary(jobs).set_index(["scenario", "overhead"])
    solo = jobs[jobs.scenario == "solo"]
    full = solo[solo.unmatched == ""]
    assert len(full) == 9 + 9
    # Δ^relEv is every job's measured latency, decomposed (18) or not (10 without a switch).
    assert s.loc[("solo", "Δ^relEv"), "count"] == len(solo) == 28
    assert s.loc[("solo", "Δevent"), "count"] == solo.event_ns.notna().sum() == 28
    assert s.loc[("solo", "Δsched"), "max_us"] == pytest.approx(full.sched_ns.max() / 1e3)
    assert s.loc[("solo", "Δcxs"), "p99_us"] == pytest.approx(np.percentile(full.cxs_ns / 1e3, 99))
    assert s.loc[("solo", "Δ^relEv"), "mean_us"] == pytest.approx(((solo.wakeup_ns - solo.release_ns) / 1e3).mean())
    cov = ao.coverage(jobs, runs).set_index("scenario")
    assert cov.loc["write", "jobs"] == 14 and cov.loc["write", "matched"] == 7
    assert cov.loc["write", "unmatched"] == "no switch 5, late 2"
    b = ao.breakdown(jobs, "max", "solo")
    assert b["event"] == pytest.approx(solo.event_ns.max() / 1e3)


def test_command_prints_and_writes_and_refuses_without_traces(results, tmp_path):
    p = xtalk("summary", results, "--view", "overheads")
    assert p.returncode == 0, p.stderr
    assert "Δsched" in p.stdout and "18 of 28 jobs decomposed" in p.stdout
    csv = pd.read_csv(results / "overheads.csv")
    assert list(csv.columns) == ao.SUMMARY_COLUMNS and len(csv) == 2 * 6
    md = (results / "overheads.md").read_text()
    assert md.startswith("# Scheduler overheads (µs)") and "| solo | default | Δ^relEv | 28 |" in md
    assert "of the latency tail" in p.stdout and "tail_explained" in md
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURE, bare)
    for t in bare.glob("runs/*/trace.txt"):
        t.unlink()
    for where in (bare, tmp_path / "nothing"):
        p = xtalk("summary", where, "--view", "overheads")
        assert p.returncode == 2, p.stdout + p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_the_old_verbs_are_the_views_with_one_deprecation_line(results, tmp_path):
    view = xtalk("summary", results, "--view", "overheads", "--json")
    old = xtalk("overheads", results, "--json")
    assert view.returncode == old.returncode == 0, view.stderr + old.stderr
    assert old.stderr == ("xtalk: deprecated: `xtalk overheads RESULTS` is now "
                          "`xtalk summary RESULTS --view overheads`\n") and view.stderr == ""
    strip = lambda out: {k: v for k, v in json.loads(out).items() if k != "provenance"}  # noqa: E731 (its time)
    assert strip(old.stdout) == strip(view.stdout)
    for verb in ("latency", "tasks", "containment"):  # each still answers, and says what replaces it
        r = xtalk(verb, tmp_path / "nothing")
        assert r.returncode == 2 and f"is now `xtalk summary RESULTS --view {verb}" in r.stderr, r.stderr
        assert "not an xtalk results directory" in r.stderr.splitlines()[-1]
    assert "overheads" not in xtalk("--help").stdout.split("Commands")[-1]  # in the docs, not the list


def test_measured_overhead_changes_the_verdict(results, tmp_path):
    """Near the boundary (Table 4.1 with T4 at 2 ms, R4 = 15 ms of 18), seed 001's 385 µs
    makes the set unschedulable; the mean measured here (about 56 µs) does not."""
    f = tmp_path / "t.toml"
    f.write_text('[system]\nscheduler = "rm"\noverhead = "385us"\n'
                 + "".join(f'[[task]]\nname = "T{i}"\nwcet = {w}\nperiod = {p}\n\n'
                           for i, (w, p) in enumerate([(1, 4), (1, 5), (3, 9), (2, 18)], 1)))
    runner = CliRunner()
    r = runner.invoke(sched_app, ["analyze", str(f)])
    assert r.exit_code == 0 and "overhead: [system] overhead = 385 µs" in r.output and "verdict: NOT schedulable" in r.output
    r = runner.invoke(sched_app, ["analyze", str(f), "--overheads-from", f"{results}:solo", "--overheads-stat", "mean"])
    assert r.exit_code == 0, r.output
    jobs, _ = collect(open_results(results).runs())
    total = sum(ao.breakdown(jobs, "mean", "solo").values())
    out = " ".join(r.output.split())  # the line names the results path: where it wraps depends on its length
    assert "overhead: measured" in out and f"Δ^relEv {total:.1f} µs" in out
    assert "replaces [system] overhead = 385 µs" in out and "verdict: schedulable" in out
    r = runner.invoke(sched_app, ["analyze", str(f), "--overheads-from", f"{results}:solo", "--overheads-stat", "max"])
    assert r.exit_code == 0 and "verdict: NOT schedulable" in r.output
    for bad in (["--overheads-from", f"{results}:nope"], ["--overheads-from", str(tmp_path)],
                ["--overheads-from", str(results), "--overheads-stat", "p50"]):
        r = runner.invoke(sched_app, ["analyze", str(f), *bad])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_compare_puts_the_breakdowns_side_by_side(results, tmp_path):
    from xtalk.report import compare as cmp

    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    comp = cmp.compare([cmp.measure(results, "native"), cmp.measure(other, "guest")])
    assert comp.overheads is not None
    row = comp.overheads.set_index(["scenario", "overhead"]).loc[("write", "Δsched")]
    assert row["native: max µs"] == row["guest: max µs"] > 0
    md = cmp.markdown(comp)
    assert "## Scheduler overheads (µs)" in md and "native · write (default): 7 of 14 jobs decomposed" in md
    files = cmp.write(comp, tmp_path / "out")
    assert tmp_path / "out" / "overheads.csv" in files


def test_the_latency_tail_is_kept_and_a_breakdown_below_it_is_said(results, tmp_path):
    """Issue 32: the `late` jobs (an earlier job overran) are the latency tail; dropping them
    gave a Δ^relEv p99 far below the measured latency's, and `sched analyze` added that."""
    jobs, runs = collect(open_results(results).runs())
    write = jobs[jobs.scenario == "write"]
    lat_us = (write.wakeup_ns - write.release_ns) / 1e3
    complete = write[write.unmatched == ""]
    s = ao.summary(jobs).set_index(["scenario", "overhead"])
    assert s.loc[("write", "Δ^relEv"), "count"] == 14
    assert s.loc[("write", "Δ^relEv"), "p99_us"] == pytest.approx(np.percentile(lat_us, 99))
    assert s.loc[("write", "Δ^relEv"), "max_us"] == pytest.approx(lat_us.max())
    # What the decomposed jobs alone said, against the whole: the tail was missing.
    assert np.percentile(complete.relev_ns / 1e3, 99) < 0.7 * s.loc[("write", "Δ^relEv"), "p99_us"]
    assert s.loc[("write", "overrun"), "count"] == 2 and s.loc[("write", "overrun"), "max_us"] > 0
    cov = ao.coverage(jobs, runs).set_index("scenario")
    assert cov.loc["write", "latency_p99_us"] == pytest.approx(np.percentile(lat_us, 99))
    assert cov.loc["write", "tail_jobs"] == 1 and cov.loc["write", "tail_explained"] == 0.0
    assert cov.loc["write", "tail_not"] == "no switch 1"
    check = ao.tail_check(jobs, "p99", "write")
    assert check["below"] and check["latency_us"] == pytest.approx(np.percentile(lat_us, 99))
    assert not ao.tail_check(jobs, "max", "solo")["below"]

    f = tmp_path / "t.toml"
    f.write_text('[system]\nscheduler = "rm"\n[[task]]\nname = "T1"\nwcet = 1\nperiod = 10\n')
    runner = CliRunner()
    r = runner.invoke(sched_app, ["analyze", str(f), "--overheads-from", f"{results}:write", "--overheads-stat", "p99"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "overhead: warning:" in out and f"below the p99 of the measured wake-up latency, {check['latency_us']:.1f} µs" in out
    assert "0% of the latency tail" in out
    r = runner.invoke(sched_app, ["analyze", str(f), "--overheads-from", f"{results}:solo", "--overheads-stat", "max"])
    assert r.exit_code == 0 and "overhead: measured" in r.output and "warning" not in r.output, r.output
    # The report's latency section says it too.
    from xtalk.report.build import build
    from xtalk.store.frames import load

    page = build(load(results), results / "report", n_boot=100, csv=False).read_text()
    assert "write (default): the four Δ explain 0% of the latency tail (1 job at or above its p99" in page
