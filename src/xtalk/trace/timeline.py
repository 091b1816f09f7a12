"""What ran where and when, from the event table: task occupancy per CPU (sched_switch),
interrupt and softirq intervals (entry/exit pairs), and a task's waits while runnable."""

from __future__ import annotations

import pandas as pd

INTERVAL_COLUMNS = ["cpu", "start_ns", "end_ns", "kind", "name", "pid"]


def occupancy(events: pd.DataFrame, end_ns: int | None = None) -> pd.DataFrame:
    """Intervals during which each task ran on each CPU (kind "process"; pid 0 is idle)."""
    sw = events[events.event == "sched_switch"]
    if sw.empty:
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    last = end_ns if end_ns is not None else int(events.ts_ns.max())
    out = []
    for cpu, g in sw.groupby("cpu", sort=True):
        ts = g.ts_ns.to_numpy()
        nxt = list(ts[1:]) + [max(last, int(ts[-1]))]
        out.append(pd.DataFrame({"cpu": cpu, "start_ns": ts, "end_ns": nxt, "kind": "process",
                                 "name": g.next_comm.to_numpy(), "pid": g.next_pid.astype("int64").to_numpy()}))
    return pd.concat(out, ignore_index=True)


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
    """Intervals where `pid` was preempted (switched out while runnable) until it ran again."""
    sw = events[events.event == "sched_switch"]
    rows = []
    out_at = None
    for r in sw.itertuples():
        if r.prev_pid == pid and str(r.prev_state).startswith("R"):
            out_at = (r.ts_ns, r.cpu)
        elif r.next_pid == pid and out_at is not None:
            rows.append((out_at[1], out_at[0], r.ts_ns))
            out_at = None
        elif r.prev_pid == pid:
            out_at = None  # went to sleep: not a preemption
    return pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns"])
