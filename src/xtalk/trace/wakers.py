"""Who woke the victim, who blocked it: its states from the trace and, per job, the waker,
the wake-up latency and every task and interrupt that held it off its CPU.

The victim wants its CPU from its wake-up until it blocks again. While it waits (runnable),
whatever runs on the CPU it waits on holds it off: a task that preempted it (the victim was
switched out still runnable) or one that was running when it woke and ran before it; while it
runs, interrupts still take time from it. That time, not mere presence during the job, is
what the culprit ranking uses (trace/culprits.py keeps the presence as well).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .overlap import overlaps
from .timeline import cut_short, interrupts, occupancy

WAKEUP_COLUMNS = ["ts_ns", "cpu", "waker_pid", "waker_comm", "target_cpu", "run_ns"]
SEGMENT_COLUMNS = ["cpu", "start_ns", "end_ns", "state", "cause"]
#: What a blocker did, as culprits.parquet columns: preempted the victim, ran before it after
#: its wake-up, interrupted it while it ran.
HOW = {"preempted": "preempted_ns", "woken": "before_ns", "running": "interrupted_ns"}
BLOCK_COLUMNS = ["job", "kind", "name", "pid", "blocked_ns", "preempted_ns", "before_ns", "interrupted_ns"]


def _col(events: pd.DataFrame, name: str) -> pd.Series:
    return events[name] if name in events else pd.Series(pd.NA, index=events.index, dtype="Int64")


def victim_states(events: pd.DataFrame, pid: int, running_at=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(wake-ups, segments) of task ``pid``.

    wake-ups: one row per wake-up from sleep: ``ts_ns`` (sched_waking, logged by the waker,
    else sched_wakeup), ``cpu`` where it was logged, ``waker_pid``/``waker_comm`` (the task
    that CPU ran then; an interrupt's own name is found by :func:`name_wakers`),
    ``target_cpu``, ``run_ns`` (its next switch-in; NA if the trace ends first).
    segments: the intervals it wanted a CPU, ``state`` running or runnable, ``cause`` of a
    runnable one (woken, preempted), split at migrations (``cpu`` is where it waited).
    A switch-in the trace lacks (seen on KVM guests when a CPU leaves idle) is taken at the
    task's first event in its own context, or at the first instant of ``running_at`` (times it
    is known to run: its jobs' starts, read by the task itself) if that comes first.
    """
    if events.empty:
        return pd.DataFrame(columns=WAKEUP_COLUMNS), pd.DataFrame(columns=SEGMENT_COLUMNS)
    last = int(events.ts_ns.max())
    events = events[~cut_short(events)]
    ev = events.event
    tgt, prev, nxt = _col(events, "target_pid"), _col(events, "prev_pid"), _col(events, "next_pid")
    mine = (((ev == "sched_waking") | (ev == "sched_wakeup") | (ev == "sched_migrate_task")) & (tgt == pid)).fillna(False)
    mine |= ((ev == "sched_switch") & ((prev == pid) | (nxt == pid))).fillna(False)
    mine |= events.pid == pid
    sub = events[mine]
    if running_at is not None and len(running_at):
        seen = pd.DataFrame({"ts_ns": np.asarray(running_at, dtype=np.int64), "cpu": -1, "pid": pid, "event": "",
                             "comm": ""})
        sub = pd.concat([sub, seen], ignore_index=True).sort_values("ts_ns", kind="stable")
    wakes, segs = [], []
    state, since, cpu, cause, wake = "sleeping", None, None, None, None

    def close(t, c, next_state):
        nonlocal state, since, cpu, cause, wake
        if state in ("running", "runnable") and t > since:
            segs.append((cpu if c is None or state == "running" else c, since, t, state, cause))
        if state == "runnable" and next_state == "running" and wake is not None:
            wakes[wake][5] = t
            wake = None

    for r in sub.itertuples():
        e = r.event
        if e in ("sched_waking", "sched_wakeup"):
            if state == "sleeping":
                tc = getattr(r, "target_cpu", None)
                tc = int(tc) if tc is not None and not pd.isna(tc) else int(r.cpu)
                wakes.append([r.ts_ns, int(r.cpu), int(r.pid), r.comm, tc, pd.NA])
                state, since, cpu, cause, wake = "runnable", r.ts_ns, tc, "woken", len(wakes) - 1
            elif state == "runnable" and e == "sched_wakeup" and cause == "woken":
                tc = getattr(r, "target_cpu", None)
                if tc is not None and not pd.isna(tc):
                    cpu = int(tc)  # where the wake-up put it (sched_waking names the previous CPU)
                    wakes[wake][4] = cpu
        elif e == "sched_migrate_task":
            if state == "runnable" and r.ts_ns > since:
                segs.append((cpu, since, r.ts_ns, state, cause))
                since = r.ts_ns
            cpu = int(r.dest_cpu)
        elif e == "sched_switch" and r.next_pid == pid:
            close(r.ts_ns, int(r.cpu), "running")
            state, since, cpu = "running", r.ts_ns, int(r.cpu)
        elif e == "sched_switch" and r.prev_pid == pid:
            if state == "runnable":  # switched out without a recorded switch-in
                close(r.ts_ns, int(r.cpu), "running")
                state, since = "running", r.ts_ns
            close(r.ts_ns, int(r.cpu), "")
            if str(r.prev_state).startswith("R"):
                state, since, cpu, cause = "runnable", r.ts_ns, int(r.cpu), "preempted"
            else:
                state, since, cpu, cause = "sleeping", None, None, None
        elif r.pid == pid and state != "running":
            here = int(r.cpu) if r.cpu >= 0 else cpu  # a job's start says "running", not where
            if here is None:
                continue  # running, but on a CPU no event named: its next switch-out will
            if state == "runnable":
                close(r.ts_ns, here, "running")
            state, since, cpu = "running", r.ts_ns, here
    if state in ("running", "runnable"):
        if last > since:
            segs.append((cpu, since, last, state, cause))
    w = pd.DataFrame(wakes, columns=WAKEUP_COLUMNS)
    w["run_ns"] = w["run_ns"].astype("Int64")
    return w, pd.DataFrame(segs, columns=SEGMENT_COLUMNS)


def name_wakers(wakeups: pd.DataFrame, ints: pd.DataFrame, labels: dict[int, str]) -> pd.DataFrame:
    """``waker`` and ``waker_kind`` for each wake-up: the innermost interrupt, softirq or timer
    callback running on that CPU when it was logged (a timer's wake-up comes from its callback,
    whatever task it interrupted), else the task (named by ``labels`` where xtalk knows it)."""
    out = wakeups.copy()
    out["waker"] = [labels.get(int(p), c) for p, c in zip(out["waker_pid"], out["waker_comm"])]
    out["waker_kind"] = "process"
    if out.empty or ints.empty:
        return out
    t = out["ts_ns"].to_numpy(dtype=np.int64)
    w, i, _ = overlaps(out["cpu"].to_numpy(dtype=np.int64), t, t + 1,
                       *(ints[c].to_numpy(dtype=np.int64) for c in ("cpu", "start_ns", "end_ns")))
    if w.size:
        starts = ints["start_ns"].to_numpy(dtype=np.int64)[i]
        order = np.lexsort((starts, w))  # per wake-up, the latest-starting (innermost) last
        last = np.r_[w[order][1:] != w[order][:-1], True]
        ww, ii = w[order][last], i[order][last]
        out.loc[out.index[ww], "waker"] = ints["name"].to_numpy()[ii]
        out.loc[out.index[ww], "waker_kind"] = ints["kind"].to_numpy()[ii]
    return out


def _pairs(cpu, s, e, iv: pd.DataFrame):
    return overlaps(cpu, s, e, *(iv[c].to_numpy(dtype=np.int64) for c in ("cpu", "start_ns", "end_ns")))


def per_job(events: pd.DataFrame, jobs: pd.DataFrame, pid: int, labels: dict[int, str] | None = None,
            occ: pd.DataFrame | None = None, ints: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, blockers) of the victim ``pid``'s jobs.

    A job's window runs from the wake-up that started it (the last one at or before its
    start, after the previous job's end) to its end. metrics, one row per job:
    ``trace_waker`` and ``trace_waker_kind`` (:func:`name_wakers`; empty when the job began
    without a wake-up, e.g. it followed an overrun), ``trace_wakeup_ns`` (waking → switch-in),
    ``trace_blocked_ns`` (the time blockers took from it). blockers (``BLOCK_COLUMNS``), one
    row per job × task or interrupt: ``blocked_ns`` = ``preempted_ns`` (ran on its CPU after
    preempting it) + ``before_ns`` (ran there between its wake-up and its switch-in) +
    ``interrupted_ns`` (interrupts while it ran). A task's time excludes the interrupts it
    was itself interrupted by (they are rows of their own); the idle task is no blocker (the
    wake-up latency counts the CPU's way out of idle). ``occ``, ``ints``: the trace's
    :func:`~xtalk.trace.timeline.occupancy` and :func:`~xtalk.trace.timeline.interrupts`, when
    the caller has them.
    """
    labels = labels or {}
    n = len(jobs)
    job = jobs["job"].to_numpy()
    s = jobs["start_ns"].to_numpy(dtype=np.int64)
    e = jobs["end_ns"].to_numpy(dtype=np.int64)
    wakes, segs = victim_states(events, pid, s)
    ints = (interrupts(events) if ints is None else ints).reset_index(drop=True)
    wakes = name_wakers(wakes, ints, labels)
    # The job's wake-up: the last at or before its start (1 µs for a text trace's rounding),
    # after the previous job's end.
    wt = wakes["ts_ns"].to_numpy(dtype=np.int64)
    k = np.searchsorted(wt, s + 1_000, side="right") - 1
    prev_end = np.r_[np.iinfo(np.int64).min, e[:-1]] if n else e
    ok = (k >= 0) & (wt[np.maximum(k, 0)] >= prev_end) if wt.size else np.zeros(n, dtype=bool)
    kk = np.where(ok, k, 0)
    run_ns = wakes["run_ns"].to_numpy(dtype="float64", na_value=np.nan)
    metrics = pd.DataFrame({
        "job": job,
        "trace_waker": np.where(ok, wakes["waker"].to_numpy(dtype=object)[kk] if wt.size else "", ""),
        "trace_waker_kind": np.where(ok, wakes["waker_kind"].to_numpy(dtype=object)[kk] if wt.size else "", ""),
        "trace_wakeup_ns": pd.array(np.where(ok, (run_ns[kk] if wt.size else np.nan) - (wt[kk] if wt.size else 0), np.nan),
                                    dtype="Float64").round().astype("Int64"),
    })
    win_s = np.where(ok, wt[kk] if wt.size else s, s)
    # Job window × the victim's segments (its own, one CPU at a time: matched on one key).
    jw, si, _ = _pairs(np.zeros(n, dtype=np.int64), win_s, e, segs.assign(cpu=0))
    cs = np.maximum(win_s[jw], segs["start_ns"].to_numpy(dtype=np.int64)[si])
    ce = np.minimum(e[jw], segs["end_ns"].to_numpy(dtype=np.int64)[si])
    ccpu = segs["cpu"].to_numpy(dtype=np.int64)[si]
    how = np.where(segs["state"].to_numpy()[si] == "running", "running", segs["cause"].to_numpy(dtype=object)[si])
    parts = []
    # Tasks on its CPU while it waited, less the interrupts within them.
    occ = occupancy(events) if occ is None else occ
    others = occ[(occ.pid != pid) & (occ.pid != 0)].reset_index(drop=True)
    waiting = how != "running"
    pw, pi_, po = _pairs(ccpu[waiting], cs[waiting], ce[waiting], others)
    idx = np.flatnonzero(waiting)[pw]
    if pw.size:
        ps = np.maximum(cs[idx], others["start_ns"].to_numpy(dtype=np.int64)[pi_])
        pe = np.minimum(ce[idx], others["end_ns"].to_numpy(dtype=np.int64)[pi_])
        iw, _, io = _pairs(ccpu[idx], ps, pe, ints)
        po = po - np.bincount(iw, weights=io, minlength=len(po)).astype(np.int64)
        pids = others["pid"].to_numpy()[pi_]
        parts.append(pd.DataFrame({"job": job[jw[idx]], "kind": "process",
                                   "name": [labels.get(int(p), m) for p, m in zip(pids, others["name"].to_numpy()[pi_])],
                                   "pid": pids.astype(np.int64), "how": how[idx], "ns": po}))
    # Interrupts on its CPU while it wanted it.
    iw, ii, io = _pairs(ccpu, cs, ce, ints)
    if iw.size:
        parts.append(pd.DataFrame({"job": job[jw[iw]], "kind": ints["kind"].to_numpy()[ii], "name": ints["name"].to_numpy()[ii],
                                   "pid": -1, "how": how[iw], "ns": io}))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["job", "kind", "name", "pid", "how", "ns"])
    rows = rows[rows["ns"] > 0]
    if rows.empty:
        blockers = pd.DataFrame(columns=BLOCK_COLUMNS)
    else:
        wide = rows.pivot_table(index=["job", "kind", "name", "pid"], columns="how", values="ns", aggfunc="sum", fill_value=0)
        wide = wide.rename(columns=HOW).reindex(columns=list(HOW.values()), fill_value=0).astype(np.int64)
        wide.insert(0, "blocked_ns", wide.sum(axis=1))
        blockers = wide.reset_index()[BLOCK_COLUMNS]
        blockers["pid"] = blockers["pid"].astype(np.int64)
    total = blockers.groupby("job").blocked_ns.sum() if len(blockers) else pd.Series(dtype=np.int64)
    metrics["trace_blocked_ns"] = metrics["job"].map(total).fillna(0).astype(np.int64)
    return metrics, blockers


def wakers(metrics: pd.DataFrame) -> pd.DataFrame:
    """The victim's wakers ranked by the jobs they woke: waker, kind, jobs, median and max
    wake-up latency (ns)."""
    m = metrics[metrics["trace_waker"].astype(str) != ""] if "trace_waker" in metrics else metrics.iloc[:0]
    if m.empty:
        return pd.DataFrame(columns=["waker", "kind", "jobs", "median_wakeup_ns", "max_wakeup_ns"])
    g = m.groupby(["trace_waker", "trace_waker_kind"]).agg(jobs=("job", "size"),
                                                           median_wakeup_ns=("trace_wakeup_ns", "median"),
                                                           max_wakeup_ns=("trace_wakeup_ns", "max"))
    g = g.reset_index().rename(columns={"trace_waker": "waker", "trace_waker_kind": "kind"})
    return g.sort_values("jobs", ascending=False, kind="stable").reset_index(drop=True)
