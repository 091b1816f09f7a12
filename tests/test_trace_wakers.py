"""Who woke the victim, who blocked it (trace/wakers.py), on a synthetic trace whose every
time is known: a timer callback wakes the victim while a hog runs, the hog runs on before it,
a planted task preempts it every third job, an IRQ interrupts it; and the LISA-shaped frames
of a run's trace (trace/frames.py)."""

import pandas as pd
import pytest

from test_trace import line, switch
from xtalk.errors import UsageError
from xtalk.trace.culprits import per_job, rank
from xtalk.trace.frames import RunTrace
from xtalk.trace.parse import parse_lines
from xtalk.trace.wakers import victim_states, wakers

V, HOG, PLANT = 100, 777, 555


def planted(n_jobs=12, period_us=10_000, every=3, hog=True, plant=True, migrate_job=None):
    """Victim (pid 100) on CPU 1. Each job: the hrtimer fires at r (5 µs callback, waking the
    victim at r+2) in the context of `hog` (which runs until r+200) or of idle; the victim runs
    1 ms; every `every`-th job `planted` preempts it at +400 for 300 µs; eth0 interrupts it for
    20 µs. `migrate_job`: that job waits on CPU 0 first, then migrates to CPU 1."""
    lines, jobs = [], []
    t0 = 10_000_000
    for k in range(n_jobs):
        r = t0 + k * period_us
        ctx, cpid = ("hog", HOG) if hog else ("swapper/1", 0)
        if hog:
            lines.append(switch(1, r - 100, "swapper/1", 0, "R", "hog", HOG))
        lines.append(line(ctx, cpid, 1, r, "hrtimer_expire_entry", "hrtimer=0000 function=hrtimer_wakeup now=1"))
        tcpu = 0 if k == migrate_job else 1
        lines.append(line(ctx, cpid, 1, r + 2, "sched_waking", f"comm=xt-victim pid={V} prio=9 target_cpu={tcpu:03d}"))
        lines.append(line(ctx, cpid, 1, r + 5, "hrtimer_expire_exit", "hrtimer=0000"))
        if k == migrate_job:
            lines.append(line(ctx, cpid, 1, r + 50, "sched_migrate_task",
                              f"comm=xt-victim pid={V} prio=9 orig_cpu=0 dest_cpu=1"))
        s = r + 200 if hog else r + 10
        if hog:
            lines.append(switch(1, s, "hog", HOG, "S", "xt-victim", V))
        else:
            lines.append(switch(1, s, "swapper/1", 0, "R", "xt-victim", V))
        e = s + 1000
        if plant and k % every == 0:
            lines.append(switch(1, s + 400, "xt-victim", V, "R", "planted", PLANT))
            lines.append(switch(1, s + 700, "planted", PLANT, "S", "xt-victim", V))
            e += 300
        lines.append(line("xt-victim", V, 1, s + 800, "irq_handler_entry", "irq=24 name=eth0"))
        lines.append(line("xt-victim", V, 1, s + 820, "irq_handler_exit", "irq=24 ret=handled"))
        lines.append(switch(1, e, "xt-victim", V, "S", "swapper/1", 0))
        jobs.append({"job": k, "cpu_start": 1, "start_ns": (s + 1) * 1000, "end_ns": e * 1000, "release_ns": r * 1000,
                     "exec_ns": (e - s) * 1000, "warmup": False})
    return parse_lines(lines), pd.DataFrame(jobs)


def test_the_waker_the_latency_and_the_planted_preemptor_with_its_time():
    ev, jobs = planted()
    metrics, culprits = per_job(ev, jobs, victim_pid=V, labels={PLANT: "planted-task"})
    m = metrics.set_index("job")
    assert (m.trace_waker == "hrtimer_wakeup").all() and (m.trace_waker_kind == "timer").all(), m
    assert (m.trace_wakeup_ns == 198_000).all()  # waking at r+2, switch-in at r+200
    top = rank(culprits)
    assert list(top["name"][:2]) == ["hog", "planted-task"], top
    plant = top[top["name"] == "planted-task"].iloc[0]
    assert plant.blocked_ns == plant.preempted_ns == 4 * 300_000 and plant.jobs_blocked == 4
    hog = top[top["name"] == "hog"].iloc[0]
    # It ran before the victim from the wake-up to the switch-in, less its own timer callback.
    assert hog.before_ns == 12 * 195_000 and hog.preempted_ns == 0
    # Present during the jobs (the old measure): the hog ran before the job started, so none.
    assert hog.total_ns == 0 and plant.total_ns == 4 * 300_000
    eth0 = top[top["name"] == "eth0"].iloc[0]
    assert eth0.interrupted_ns == 12 * 20_000 and eth0.kind == "irq"
    timer = top[top["name"] == "hrtimer_wakeup"].iloc[0]
    assert timer.before_ns == 12 * 3_000
    assert (m.trace_blocked_ns == 195_000 + 3_000 + 20_000 + pd.Series([300_000 if k % 3 == 0 else 0 for k in m.index],
                                                                      index=m.index)).all()
    w = wakers(metrics)
    assert w.iloc[0].waker == "hrtimer_wakeup" and w.iloc[0].jobs == 12 and w.iloc[0].median_wakeup_ns == 198_000


def test_nothing_planted_blames_no_task():
    ev, jobs = planted(hog=False, plant=False)
    metrics, culprits = per_job(ev, jobs, victim_pid=V)
    top = rank(culprits)
    assert top[top.kind == "process"].blocked_ns.sum() == 0, top
    assert set(top[top.blocked_ns > 0].kind) == {"irq", "timer"}
    assert (metrics.trace_waker == "hrtimer_wakeup").all()
    assert (metrics.trace_wakeup_ns == 8_000).all()  # idle is no blocker: the latency still says it


def test_a_migration_splits_the_wait_by_cpu():
    ev, jobs = planted(migrate_job=4, plant=False)
    wakes, segs = victim_states(ev, V)
    wait = segs[(segs.state == "runnable") & (segs.start_ns >= jobs.release_ns[4]) & (segs.end_ns <= jobs.end_ns[4])]
    assert list(wait.cpu) == [0, 1] and wait.start_ns.iloc[1] == jobs.release_ns[4] + 50_000
    metrics, culprits = per_job(ev, jobs, victim_pid=V)
    hog4 = culprits[(culprits.job == 4) & (culprits.name == "hog")].iloc[0]
    assert hog4.before_ns == 150_000  # only while the victim waited on the hog's CPU
    assert metrics.set_index("job").trace_migrations[4] == 0  # the migration came before the job began


def test_a_job_without_a_wakeup_names_no_waker():
    ev, jobs = planted(n_jobs=3, plant=False)
    ev = ev[ev.event != "sched_waking"].reset_index(drop=True)
    metrics, _ = per_job(ev, jobs, victim_pid=V)
    assert (metrics.trace_waker == "").all() and metrics.trace_wakeup_ns.isna().all()


def test_the_trace_as_lisa_shaped_frames(tmp_path):
    ev, _ = planted(n_jobs=4)
    t = RunTrace(ev, tmp_path)
    assert {"sched_switch", "sched_waking", "irq_handler_entry"} <= set(t.available_events)
    sw = t.df_event("sched_switch")
    assert sw.index.name == "Time" and sw.index.dtype == "int64" and sw.index.is_monotonic_increasing
    assert list(sw.columns[:3]) == ["__cpu", "__pid", "__comm"]
    assert {"prev_pid", "next_pid", "prev_state", "next_comm"} <= set(sw.columns) and "target_pid" not in sw
    wk = t.df_event("sched_waking")
    assert (wk.target_pid == V).all() and wk.index[0] == 10_000_002_000  # ns, on the trace's clock
    assert set(t.dfs()) == set(t.available_events)
    with pytest.raises(KeyError, match="sched_switch"):
        t.df_event("sched_stat_runtime")
    with pytest.raises(UsageError, match="no kernel trace"):
        RunTrace.of(tmp_path)


def test_a_switch_in_the_trace_lacks_ends_the_wait_at_the_jobs_start():
    """KVM guests may log no sched_switch when a CPU leaves idle for the victim: its wait
    ends where its job began (the job table's start), not at its next switch-out."""
    ev, jobs = planted(hog=False, plant=False)
    ev = ev[~((ev.event == "sched_switch") & (ev.next_pid == V))].reset_index(drop=True)
    metrics, culprits = per_job(ev, jobs, victim_pid=V)
    assert (metrics.trace_wakeup_ns == 9_000).all(), metrics  # waking at r+2, job start at r+11
    held = rank(culprits).set_index("name")
    assert held.loc["eth0", "interrupted_ns"] == 12 * 20_000 and held.loc["hrtimer_wakeup", "before_ns"] == 12 * 3_000


def test_lines_cut_short_are_left_out_not_crashed_on():
    ev, jobs = planted(n_jobs=3)
    whole, _ = per_job(ev, jobs, victim_pid=V)
    cut = parse_lines([line("xt-victim", V, 1, 10_000_500, "sched_switch", "prev_comm=xt-victim prev_pid=100 prev_pri"),
                       line("xt-victim", V, 1, 10_000_600, "sched_migrate_task", "comm=xt-victim pid=100 prio=9 orig_cpu=")])
    ev = pd.concat([ev, cut]).sort_values("ts_ns", kind="stable").reset_index(drop=True)
    metrics, _ = per_job(ev, jobs, victim_pid=V)
    pd.testing.assert_frame_equal(metrics, whole)
