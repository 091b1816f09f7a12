"""What ran where and when, from the event table: task occupancy per CPU (sched_switch),
interrupt and softirq intervals (entry/exit pairs), and a task's waits while runnable."""

from __future__ import annotations

import pandas as pd

INTERVAL_COLUMNS = ["cpu", "start_ns", "end_ns", "kind", "name", "pid"]


def occupancy(events: pd.DataFrame, end_ns: int | None = None) -> pd.DataFrame:
    """Intervals during which each task ran on each CPU (kind "process"; pid 0 is idle).

    Some kernels (seen on a KVM guest) record no sched_switch when a CPU leaves idle. A task
    that switches out without having been switched in was running all the same: its interval
    starts at its latest wake-up on that CPU, else at the first event recorded in its context.
    """
    if events.empty or not (events.event == "sched_switch").any():
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    last = end_ns if end_ns is not None else int(events.ts_ns.max())
    events = events[~cut_short(events)]
    rows = []
    wake_pid = events.target_pid if "target_pid" in events else pd.Series(pd.NA, index=events.index)
    for cpu, g in events.groupby("cpu", sort=True):
        cur_pid, cur_name, cur_start = None, None, None
        woke: dict[int, int] = {}  # pid -> latest wake-up on this CPU since the last switch
        seen: dict[int, int] = {}  # pid -> first event in its context since the last switch
        for r, wp in zip(g.itertuples(), wake_pid.loc[g.index]):
            if r.event == "sched_wakeup" and not pd.isna(wp):
                woke[int(wp)] = r.ts_ns
            if r.event != "sched_switch":
                seen.setdefault(int(r.pid), r.ts_ns)
                continue
            prev = int(r.prev_pid)
            if cur_pid is not None and prev != cur_pid:
                # Missed switch-in of `prev`: close the current interval where `prev` began.
                began = woke.get(prev, seen.get(prev, r.ts_ns))
                began = min(max(began, cur_start), r.ts_ns)
                rows.append((cpu, cur_start, began, "process", cur_name, cur_pid))
                cur_start = began
            if cur_pid is not None:
                rows.append((cpu, cur_start, r.ts_ns, "process", r.prev_comm if prev != cur_pid else cur_name, prev))
            cur_pid, cur_name, cur_start = int(r.next_pid), r.next_comm, r.ts_ns
            woke, seen = {}, {}
        if cur_pid is not None:
            rows.append((cpu, cur_start, max(last, cur_start), "process", cur_name, cur_pid))
    df = pd.DataFrame(rows, columns=INTERVAL_COLUMNS)
    return df[df.end_ns > df.start_ns].reset_index(drop=True)


def cut_short(events: pd.DataFrame) -> pd.Series:
    """The rows of sched_switch and sched_migrate_task whose fields did not parse (a text line
    cut short): they say nothing of who ran or moved, so the timelines leave them out."""
    def na(col):
        return events[col].isna() if col in events else pd.Series(True, index=events.index)

    return (((events.event == "sched_switch") & (na("prev_pid") | na("next_pid")))
            | ((events.event == "sched_migrate_task") & (na("target_pid") | na("dest_cpu"))))


def _pairs(events: pd.DataFrame, entry: str, exit_: str, kind: str, key: str) -> pd.DataFrame:
    """Pair entry/exit events per CPU with a stack (a hard IRQ may interrupt a softirq)."""
    ev = events[events.event.isin([entry, exit_])]
    rows = []
    for cpu, g in ev.groupby("cpu", sort=True):
        stack: list[tuple[int, str]] = []
        for r in g.itertuples():
            if r.event == entry:
                stack.append((r.ts_ns, getattr(r, "name", None) or f"{key} {getattr(r, key, '?')}"))
            elif stack:
                start, name = stack.pop()
                rows.append((cpu, start, r.ts_ns, kind, name, -1))
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def interrupts(events: pd.DataFrame) -> pd.DataFrame:
    """Hard IRQ, softirq and hrtimer-callback intervals (kinds irq, softirq, timer)."""
    parts = [_pairs(events, "irq_handler_entry", "irq_handler_exit", "irq", "irq"),
             _pairs(events, "softirq_entry", "softirq_exit", "softirq", "vec"),
             _pairs(events, "hrtimer_expire_entry", "hrtimer_expire_exit", "timer", "hrtimer")]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=INTERVAL_COLUMNS)


def runnable_waits(events: pd.DataFrame, pid: int) -> pd.DataFrame:
    """Intervals where `pid` was preempted (switched out while runnable) until it ran again:
    its next switch-in, or its next event on any CPU when that switch-in was not recorded."""
    rows = []
    out_at = None
    for r in events[~cut_short(events)].itertuples():
        if out_at is not None and (r.pid == pid or (r.event == "sched_switch" and r.next_pid == pid)):
            rows.append((out_at[1], out_at[0], r.ts_ns))
            out_at = None
        if r.event == "sched_switch" and r.prev_pid == pid:
            out_at = (r.ts_ns, r.cpu) if str(r.prev_state).startswith("R") else None
    return pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns"])
