"""Jobs from the scheduler trace: the activations of a program that has no probes.

Each wake-up → run → block cycle of a chosen thread is one job, as LISA's and rt-app's
analyses derive them:

- release: the expiry the thread asked for when its sleeping timer fired (the `softexpires`
  of its `hrtimer_start` for `hrtimer_wakeup`: for an absolute periodic sleep, the release
  itself); for any other wake-up, the `sched_wakeup`;
- start (and wake-up): its first switch-in after that wake-up;
- end: the switch-out in which it blocks (any state but runnable `R`/`R+`);
- `cpu_time_ns`: the time on a CPU between start and end (preemptions, `R` switch-outs, are
  counted in `nivcsw` and left out).

A cycle is a job only when the trace saw it from its wake-up to its block: the thread's
start-up before its first sleep (from its exec, `sched_process_exec`, on), the cycle in which
it exits (its last step with its tear-down: how long the step took cannot be told apart) and a
cycle cut by the window's end are not jobs. A thread
that overruns its period arms its sleep timer for a time already past and does not block:
the timer's expiry while it runs ends the job where it armed the timer and starts the next
(released at the time it asked for). A program that overruns without calling its sleep at
all makes one long job of two steps: what the trace cannot tell apart.

Which thread: `main` is the process itself (its first thread); a name selects the threads
of the process that carry that name besides the main thread (a program whose threads keep
its own name, as cyclictest's do, is named by its program name), else the main thread if it
carries the name. The process's threads are the traced process and everything it cloned
during the trace (`sched_process_fork`), plus `known_threads` (an attached process's threads
from before the trace). With several threads, `task` numbers them in thread-id order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The events the derivation reads; `jobs_from = { trace = ... }` enables them.
EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_process_fork", "sched:sched_process_exec",
          "timer:hrtimer_start", "timer:hrtimer_expire_entry"]

#: The job table's columns (store/jobs.py `read_job_log`), in its order.
COLUMNS = ["job", "task", "warmup", "release_ns", "wakeup_ns", "start_ns", "end_ns", "cpu_time_ns", "cpu_start", "cpu_end",
           "migrated", "nvcsw", "nivcsw", "missed", "failed", "period_ns", "deadline_ns", "exec_ns", "response_ns",
           "wakeup_latency_ns"]


class NoThread(ValueError):
    """The trace holds no thread of the process with that name."""


def _col(events: pd.DataFrame, name: str) -> pd.Series:
    return events[name] if name in events else pd.Series(pd.NA, index=events.index, dtype="object")


def threads(events: pd.DataFrame, pid: int, known: dict[int, str] | None = None) -> dict[int, str]:
    """tid -> its name (the last the trace shows) for the process `pid`: itself, `known`, and
    every task cloned from them during the trace."""
    out = {int(pid): ""} | {int(t): n for t, n in (known or {}).items()}
    forks = events[events.event == "sched_process_fork"]
    for parent, child, comm in zip(_col(forks, "parent_pid"), _col(forks, "child_pid"), _col(forks, "child_comm")):
        if not pd.isna(parent) and int(parent) in out and not pd.isna(child):
            out.setdefault(int(child), str(comm))
    sw = events[events.event == "sched_switch"]
    for tid_col, comm_col in (("prev_pid", "prev_comm"), ("next_pid", "next_comm")):
        for tid, comm in zip(_col(sw, tid_col), _col(sw, comm_col)):
            if not pd.isna(tid) and int(tid) in out:
                out[int(tid)] = str(comm)
    return out


def select(events: pd.DataFrame, pid: int, which: str, known: dict[int, str] | None = None) -> list[int]:
    """The thread ids `which` ("main" or a thread name) names in process `pid`; NoThread if none."""
    if which == "main":
        return [int(pid)]
    named = threads(events, pid, known)
    chosen = sorted(t for t, n in named.items() if n == which and t != int(pid))
    if chosen:
        return chosen
    if named.get(int(pid)) == which:
        return [int(pid)]
    seen = ", ".join(sorted({n for n in named.values() if n})) or "none"
    raise NoThread(f"jobs_from.trace: no thread named {which!r} in process {pid} (its threads in the trace: {seen}); "
                   "give one of those names, or \"main\"")


def _cycles(ev: pd.DataFrame, tid: int) -> list[tuple]:
    """(release, wakeup, start, end, cpu_ns, preemptions, cpu_start, cpu_end, migrated) per
    complete cycle of thread `tid`, from its events in time order."""
    out = []
    state = "unknown"  # unknown | asleep | woken | running | preempted
    timers: dict[str, int] = {}  # the thread's armed sleep timers: hrtimer -> asked expiry
    timer_release = None  # the asked expiry of the timer that fired since the thread blocked
    armed_at = None  # when the running thread armed its sleep (its step's end if it never blocks)
    job: dict = {}

    def emit(end, cpu):
        out.append((job["release"], job["start"], job["start"], end, job["cpu_ns"], job["preempt"], job["cpu_start"], cpu,
                    len(job["cpus"]) > 1))

    def overrun(t, release, cpu):
        # Its sleep ended before it blocked (it asked for a time already past, or came just
        # at it): the job ended where it armed the sleep, the next begins now, on the CPU.
        nonlocal job, armed_at
        job["cpu_ns"] += armed_at - job["since"]
        emit(armed_at, cpu)
        job = {"release": min(release, t), "wakeup": t, "start": t, "cpu_start": cpu, "since": t, "cpu_ns": 0, "preempt": 0,
               "cpus": {cpu}}
        armed_at = None

    for r in ev.itertuples(index=False):
        e = r.event
        if e == "sched_process_exec":
            # A new program: what ran before was not its, and its start-up is no job.
            state, job, armed_at, timer_release = "unknown", {}, None, None
            timers.clear()
            continue
        if e == "hrtimer_start":
            if r.pid == tid:
                timers[r.hrtimer] = int(r.softexpires if not pd.isna(r.softexpires) else r.expires)
                if state == "woken":
                    # It arms its timer, so it runs: woken while still on its CPU (or its
                    # switch-in went unrecorded).
                    job.update(start=job["wakeup"], cpu_start=r.cpu, since=job["wakeup"])
                    job["cpus"].add(r.cpu)
                    state = "running"
                if state == "running":
                    armed_at = r.ts_ns
            continue
        if e == "hrtimer_expire_entry":
            if r.hrtimer in timers:
                timer_release = timers.pop(r.hrtimer)
                if state == "running" and armed_at is not None:
                    overrun(r.ts_ns, timer_release, r.cpu)
                    timer_release = None
            continue
        if e == "sched_wakeup":
            if timer_release is None and timers:
                # The expiry itself may be missing from the trace: the sleep timer that was
                # due by now is what woke it.
                due = [t for t in timers.values() if t <= r.ts_ns]
                timer_release = max(due) if due else None
                if due:
                    timers.clear()
            if state in ("unknown", "asleep"):
                release = timer_release if timer_release is not None and timer_release <= r.ts_ns else r.ts_ns
                job = {"release": release, "wakeup": r.ts_ns, "cpu_ns": 0, "preempt": 0, "cpus": set()}
                state, timer_release = "woken", None
            elif state == "running" and armed_at is not None and timer_release is not None:
                overrun(r.ts_ns, timer_release, r.cpu)
                timer_release = None
            continue
        # sched_switch
        if r.next_pid == tid:
            if state == "woken":
                job["start"], job["cpu_start"], armed_at = r.ts_ns, r.cpu, None
            if state in ("woken", "preempted"):
                job["since"] = r.ts_ns
                job["cpus"].add(r.cpu)
                state = "running"
        if r.prev_pid == tid:
            blocks = not str(r.prev_state).startswith("R")
            if state == "woken":
                # Its switch-in was not recorded (some kernels record none when a CPU leaves
                # idle): it ran from its wake-up, on the CPU it leaves.
                job["start"], job["cpu_start"], job["since"] = job["wakeup"], r.cpu, job["wakeup"]
                job["cpus"].add(r.cpu)
                armed_at = None
                state = "running"
            if state == "running":
                job["cpu_ns"] += r.ts_ns - job["since"]
                if str(r.prev_state)[:1] in ("X", "Z"):
                    state = "asleep"  # it exits: its last step with its tear-down, no job
                elif blocks:
                    emit(r.ts_ns, r.cpu)
                    state = "asleep"
                else:
                    job["preempt"] += 1
                    state = "preempted"
            elif blocks:
                state = "asleep"
    return out


def activations(events: pd.DataFrame, pid: int, which: str, period_ns: int | None = None, deadline_ns: int = 0,
                known: dict[int, str] | None = None, warmup_jobs: int = 0) -> pd.DataFrame:
    """The job table (store/jobs.py's columns) of the activations of thread(s) `which` of
    process `pid` in the event table `events` (trace/parse.py). `period_ns`: the declared
    period (None: the median interval between releases); a job misses when it ends after
    release + `deadline_ns` (0: never); the first `warmup_jobs` are warm-up."""
    tids = select(events, pid, which, known)
    frames = []
    for task, tid in enumerate(tids):
        sw = events.event == "sched_switch"
        # Sleep timers only: the tick and other kernel timers are armed in its context too.
        sleeper = _col(events, "name") == "hrtimer_wakeup"
        mine = ((sw & ((_col(events, "prev_pid") == tid) | (_col(events, "next_pid") == tid)).fillna(False))
                | ((events.event == "sched_wakeup") & (_col(events, "target_pid") == tid).fillna(False))
                | ((events.event == "hrtimer_start") & (events.pid == tid) & sleeper.fillna(False))
                | ((events.event == "sched_process_exec") & (events.pid == tid))
                | ((events.event == "hrtimer_expire_entry") & sleeper.fillna(False)))
        ev = events[mine]
        for c in ("prev_pid", "next_pid", "prev_state", "hrtimer", "softexpires", "expires"):
            if c not in ev:
                ev = ev.assign(**{c: pd.NA})
        rows = _cycles(ev, tid)
        f = pd.DataFrame(rows, columns=["release_ns", "wakeup_ns", "start_ns", "end_ns", "cpu_time_ns", "nivcsw", "cpu_start",
                                        "cpu_end", "migrated"])
        f.insert(0, "task", task)
        frames.append(f)
    df = pd.concat(frames, ignore_index=True).sort_values(["release_ns", "task"], kind="stable").reset_index(drop=True)
    n = len(df)
    for c in ("release_ns", "wakeup_ns", "start_ns", "end_ns", "cpu_time_ns", "nivcsw"):
        df[c] = df[c].astype(np.int64)
    df["job"] = np.arange(n, dtype=np.int64)
    df["warmup"] = np.arange(n) < warmup_jobs
    df["cpu_start"] = df["cpu_start"].astype(np.int32)
    df["cpu_end"] = df["cpu_end"].astype(np.int32)
    df["migrated"] = df["migrated"].astype(bool)
    df["nvcsw"] = np.ones(n, dtype=np.int64)  # the block that ends it
    df["missed"] = (df.end_ns > df.release_ns + deadline_ns) if deadline_ns > 0 else np.zeros(n, dtype=bool)
    df["failed"] = np.zeros(n, dtype=bool)
    if period_ns is None:
        gaps = np.diff(df.release_ns[df.task == 0].to_numpy())
        period_ns = int(np.median(gaps)) if len(gaps) else 0
    df["period_ns"] = np.int64(period_ns)
    df["deadline_ns"] = np.int64(deadline_ns)
    df["exec_ns"] = df.end_ns - df.start_ns
    df["response_ns"] = df.end_ns - df.release_ns
    df["wakeup_latency_ns"] = df.wakeup_ns - df.release_ns
    return df[COLUMNS]
