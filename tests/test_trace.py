"""Kernel trace: parsing (a recorded fixture), culprit attribution (a synthetic trace with a
planted disturber), a live capture through tracefs, and the Chrome JSON export's structure."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import small_plan, write_plan
from xtalk.trace import chrome_json
from xtalk.trace.culprits import per_job, rank
from xtalk.trace.parse import parse_file, parse_lines
from xtalk.trace.timeline import interrupts, occupancy, runnable_waits

FIXTURE = Path(__file__).parent / "fixtures" / "trace_sample.txt"


def test_recorded_trace_parses():
    ev = parse_file(FIXTURE)
    assert len(ev) > 350
    assert {"sched_switch", "softirq_entry", "softirq_exit", "hrtimer_expire_entry"} <= set(ev.event)
    assert ev.ts_ns.is_monotonic_increasing
    sw = ev[ev.event == "sched_switch"].iloc[0]
    assert sw.prev_comm and sw.next_comm and sw.prev_state and int(sw.next_pid) >= 0
    # microsecond text timestamps become ns on CLOCK_MONOTONIC
    assert (ev.ts_ns % 1000 == 0).all()
    occ = occupancy(ev)
    assert (occ.end_ns >= occ.start_ns).all() and set(occ.cpu) <= {0, 1}


def line(comm, pid, cpu, t_us, event, args):
    return f"{comm:>16}-{pid:<6} [{cpu:03d}] d..2. {t_us // 1_000_000}.{t_us % 1_000_000:06d}: {event}: {args}"


def switch(cpu, t, prev, prev_pid, state, nxt, next_pid):
    return line(prev, prev_pid, cpu, t, "sched_switch",
                f"prev_comm={prev} prev_pid={prev_pid} prev_prio=9 prev_state={state} ==> next_comm={nxt} next_pid={next_pid} next_prio=120")


def synthetic(n_jobs=20, period_us=10_000, disturb_every=5):
    """Victim (pid 100) on CPU 1 runs 2 ms per job; every 5th job a 'timesyncd' (pid 555)
    preempts it for 300 us; a network IRQ fires in every job for 20 us."""
    lines, jobs = [], []
    t0 = 10_000_000
    for k in range(n_jobs):
        s = t0 + k * period_us
        e = s + 2_000
        lines.append(switch(1, s, "swapper/1", 0, "S", "xt-victim", 100))
        if k % disturb_every == 0:
            lines.append(switch(1, s + 500, "xt-victim", 100, "R", "timesyncd", 555))
            lines.append(switch(1, s + 800, "timesyncd", 555, "S", "xt-victim", 100))
            e += 300
        lines.append(line("xt-victim", 100, 1, s + 1000, "irq_handler_entry", "irq=24 name=eth0"))
        lines.append(line("xt-victim", 100, 1, s + 1020, "irq_handler_exit", "irq=24 ret=handled"))
        lines.append(switch(1, e, "xt-victim", 100, "S", "swapper/1", 0))
        jobs.append({"job": k, "cpu_start": 1, "start_ns": s * 1000, "end_ns": e * 1000, "release_ns": s * 1000,
                     "exec_ns": (e - s) * 1000, "response_ns": (e - s) * 1000, "missed": False, "warmup": False})
    return parse_lines(lines), pd.DataFrame(jobs)


def test_planted_disturber_is_ranked_first_and_counted_per_job():
    ev, jobs = synthetic()
    metrics, culprits = per_job(ev, jobs, victim_pid=100, labels={555: "systemd-timesyncd"})
    m = metrics.set_index("job")
    assert m.loc[0, "trace_preemptions"] == 1 and m.loc[1, "trace_preemptions"] == 0
    assert m.loc[0, "trace_runnable_ns"] == 300_000 and m.loc[0, "trace_other_ns"] == 300_000
    assert (m.trace_irq_ns == 20_000).all()
    top = rank(culprits)
    assert top.iloc[0]["name"] == "systemd-timesyncd" and top.iloc[0]["jobs_hit"] == 4
    assert top.iloc[0]["total_ns"] == 4 * 300_000
    irq = top[top.kind == "irq"].iloc[0]
    assert irq["name"] == "eth0" and irq["jobs_hit"] == 20
    assert len(runnable_waits(ev, 100)) == 4
    assert set(interrupts(ev).kind) == {"irq"}


def test_perfetto_export_is_structurally_valid(tmp_path):
    ev, jobs = synthetic()
    path = chrome_json.write(ev, jobs, {100: "victim", 555: "systemd-timesyncd"}, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns"
    for e in events:
        assert e["ph"] in ("M", "X") and isinstance(e["pid"], int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["name"], str) and "tid" in e
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"CPU 1", "victim jobs", "victim", "systemd-timesyncd"} <= names
    assert sum(1 for e in events if e.get("cat") == "job") == 20
    assert any(e.get("cat") == "irq" and e["name"] == "irq: eth0" for e in events)


def tracefs_state() -> str:
    mounts = Path("/proc/mounts").read_text()
    inst = Path("/sys/kernel/tracing/instances")
    return mounts.count("tracefs") and str(sorted(p.name for p in inst.iterdir() if p.name.startswith("xtalk-"))) or "unmounted"


def test_live_capture_leaves_tracefs_as_found(agent, tmp_path, facts, needs_tracefs):
    before = tracefs_state()
    plan = small_plan(jobs=40, cpus=[facts.online_cpus[-1]])
    plan["trace"] = {}
    out = tmp_path / "exp" / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["trace"]["file"] == "trace.dat" and meta["trace"]["capture"] == "raw" and meta["trace"]["lost_events"] == 0
    ev = parse_file(out / "trace.dat")
    victim = meta["pids"]["victim"]
    sleeps = ev[(ev.event == "sched_switch") & (ev.prev_pid == victim) & (ev.prev_state == "S")]
    from xtalk import store
    jobs = store.open(tmp_path / "exp").jobs()
    # A job that ends past the next release goes straight on: only the others sleep.
    assert len(sleeps) >= int((~jobs.missed).sum()), "the victim slept after every job that met its deadline"
    assert {"trace_preemptions", "trace_runnable_ns", "trace_irq_ns"} <= set(jobs.columns)
    # The recovered timeline has the victim on its CPU through (nearly) every job.
    occ = occupancy(ev)
    mine = occ[occ.pid == victim]
    covered = sum(((mine.start_ns <= j.start_ns + 2_000) & (mine.end_ns >= j.end_ns - 2_000)).any() for j in jobs.itertuples())
    assert covered >= 0.9 * len(jobs), f"{covered}/{len(jobs)} jobs inside a victim interval"
    assert tracefs_state() == before, "tracefs mount and instances as found"


TRACE_CMD = shutil.which("trace-cmd")
# `trace-cmd report -t` (ns stamps): "comm-pid [cpu] sec.nsec: event: ..."
REPORT_LINE = re.compile(r"^\s*.+?-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<sec>\d+)\.(?P<ns>\d{9}):\s+(?P<event>\w+):")


@pytest.mark.skipif(TRACE_CMD is None, reason="needs trace-cmd (Debian's trace-cmd; tests/peers.sh installs it)")
def test_trace_dat_opens_in_trace_cmd_at_ns_on_the_job_records_clock(agent, tmp_path, facts, needs_tracefs):
    plan = small_plan(jobs=20, cpus=[facts.online_cpus[-1]])
    plan["trace"] = {"events": ["sched:sched_switch", "sched:sched_wakeup", "timer:hrtimer_start", "timer:hrtimer_expire_entry"]}
    out = tmp_path / "exp" / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert not (out / "trace.txt").exists()
    rep = subprocess.run([TRACE_CMD, "report", "-t", out / "trace.dat"], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    lines = [m for m in map(REPORT_LINE.match, rep.stdout.splitlines()) if m]
    tc = pd.DataFrame({"ts_ns": [int(m["sec"]) * 1_000_000_000 + int(m["ns"]) for m in lines],
                       "cpu": [int(m["cpu"]) for m in lines], "pid": [int(m["pid"]) for m in lines],
                       "event": [m["event"] for m in lines]})
    ours = parse_file(out / "trace.dat")[["ts_ns", "cpu", "pid", "event"]]
    # trace-cmd and the host's reader decode the same pages into the same events and stamps.
    key = ["ts_ns", "cpu", "pid", "event"]
    pd.testing.assert_frame_equal(tc.sort_values(key).reset_index(drop=True), ours.astype({"pid": int, "cpu": int}).sort_values(key).reset_index(drop=True))
    assert (tc.ts_ns % 1000 != 0).mean() > 0.5, "stamps carry ns, not µs"
    victim = json.loads((out / "run.json").read_text())["pids"]["victim"]
    ev = parse_file(out / "trace.dat")
    sw = ev[ev.event == "sched_switch"]
    # The victim's own events (some kernels, this machine's included, trace no switch out of
    # the idle task, so its switch-ins from an idle CPU may be missing; its sleeps and
    # wake-ups are always there).
    sleeps = sw[(sw.prev_pid == victim) & sw.prev_state.str.startswith("S")].ts_ns.to_numpy()
    wakes = ev[(ev.event == "sched_wakeup") & (ev.target_pid == victim)].ts_ns.to_numpy()
    from xtalk import store
    jobs = store.open(tmp_path / "exp").jobs().sort_values("job")
    assert len(jobs) and len(sleeps) and len(wakes)
    # One clock, to 1 µs: the victim sleeps only between one job's end and the next one's
    # wake-up (both its own CLOCK_MONOTONIC reads), and each sleep ends with a wake-up
    # between that job's release and its wake-up date.
    released = []  # the releases the victim slept until
    for prev, j in zip(jobs.itertuples(), jobs.iloc[1:].itertuples()):
        inside = sleeps[(sleeps > prev.end_ns - 1_000) & (sleeps < j.wakeup_ns + 1_000)]
        during = sleeps[(sleeps > j.wakeup_ns + 1_000) & (sleeps < j.end_ns - 1_000)]
        assert not len(during), f"job {j.job}: the trace has the victim asleep at {during[0]}, inside its job [{j.wakeup_ns}, {j.end_ns}]"
        if len(inside):
            released.append(j.release_ns)
            w = wakes[(wakes >= max(inside[0], j.release_ns - 1_000)) & (wakes <= j.wakeup_ns + 1_000)]
            assert len(w), f"job {j.job}: no wake-up of the victim between its release {j.release_ns} and its wake-up date {j.wakeup_ns}"
    assert released, "the victim slept between jobs"
    theirs = tc[(tc.event == "sched_switch") & (tc.pid == victim)].ts_ns
    assert set(sleeps) <= set(theirs), "trace-cmd shows the victim's sched_switch events at the same ns"
    # To the ns: the timer each sleep armed asks for that job's release exactly (hrtimer_start's
    # softexpires against the job records), and each expiry's stamp comes after the clock
    # read its interrupt made (`now`, CLOCK_MONOTONIC) and near it: one clock, not another.
    timers = ev[(ev.event == "hrtimer_start") & (ev.pid == victim) & (ev.name == "hrtimer_wakeup")]
    assert set(released) <= set(timers.softexpires.astype("int64")), sorted(set(released) - set(timers.softexpires.astype("int64")))
    expiry = ev[(ev.event == "hrtimer_expire_entry") & (ev.name == "hrtimer_wakeup")]
    lag = (expiry.ts_ns - expiry.now).astype("int64")
    assert len(lag) and (lag >= 0).all() and (lag < 1_000_000).all(), lag.describe()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_unknown_trace_event_is_refused(agent, tmp_path):
    plan = small_plan()
    plan["trace"] = {"events": ["sched:sched_switch", "sched:sched_teleport"]}
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "trace.events[1]" in p.stderr and "sched_teleport" in p.stderr and "sched" in p.stderr


def test_missing_switch_in_from_idle_is_recovered():
    """Some kernels record no sched_switch when a CPU leaves idle: the task's interval must
    still start at its wake-up, so its time is not counted as idle."""
    lines = [
        switch(1, 1_000, "xt-victim", 100, "S", "swapper/1", 0),
        line("<idle>", 0, 1, 2_000, "sched_wakeup", "comm=chronyd pid=777 prio=120 target_cpu=001"),
        # no swapper -> chronyd switch recorded
        line("chronyd", 777, 1, 2_100, "irq_handler_entry", "irq=5 name=timer"),
        line("chronyd", 777, 1, 2_110, "irq_handler_exit", "irq=5 ret=handled"),
        switch(1, 2_500, "chronyd", 777, "S", "swapper/1", 0),
    ]
    occ = occupancy(parse_lines(lines))
    chrony = occ[occ.pid == 777]
    assert len(chrony) == 1
    assert chrony.iloc[0].start_ns == 2_000_000 and chrony.iloc[0].end_ns == 2_500_000
    idle = occ[(occ.pid == 0) & (occ.start_ns == 1_000_000)].iloc[0]
    assert idle.end_ns == 2_000_000
