"""Per-job view of the kernel trace: what ran on the victim's CPU during each job.

For each job [start_ns, end_ns] on its CPU: how often the victim was preempted and how long
it waited while runnable, the time taken by other processes, hard IRQs and softirqs, its
migrations, and the culprits themselves (one row per job × culprit with the time it took).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .timeline import interrupts, occupancy, runnable_waits


def _overlaps(iv: pd.DataFrame, cpu: int, s: int, e: int) -> pd.DataFrame:
    g = iv[(iv.cpu == cpu) & (iv.start_ns < e) & (iv.end_ns > s)]
    if g.empty:
        return g.assign(overlap_ns=pd.Series(dtype="int64"))
    return g.assign(overlap_ns=np.minimum(g.end_ns, e) - np.maximum(g.start_ns, s))


def per_job(events: pd.DataFrame, jobs: pd.DataFrame, victim_pid: int, labels: dict[int, str] | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, culprits). metrics: one row per job with `trace_*` columns; culprits: job,
    kind (process / irq / softirq / timer), name, pid, ns."""
    labels = labels or {}
    occ = occupancy(events)
    others = occ[(occ.pid != victim_pid) & (occ.pid != 0)]
    ints = interrupts(events)
    waits = runnable_waits(events, victim_pid)
    mig = events[(events.event == "sched_migrate_task") & (events.get("target_pid", pd.Series(dtype="Int64")) == victim_pid)]
    metrics, blame = [], []
    for j in jobs.itertuples():
        cpu, s, e = int(j.cpu_start), int(j.start_ns), int(j.end_ns)
        o = _overlaps(others, cpu, s, e)
        i = _overlaps(ints, cpu, s, e)
        w = waits[(waits.start_ns < e) & (waits.end_ns > s)]
        metrics.append({
            "job": j.job,
            "trace_preemptions": int(((w.start_ns >= s) & (w.start_ns < e)).sum()),
            "trace_runnable_ns": int((np.minimum(w.end_ns, e) - np.maximum(w.start_ns, s)).clip(lower=0).sum()),
            "trace_other_ns": int(o.overlap_ns.sum()),
            "trace_irq_ns": int(i[i.kind == "irq"].overlap_ns.sum()),
            "trace_softirq_ns": int(i[i.kind == "softirq"].overlap_ns.sum()),
            "trace_migrations": int(((mig.ts_ns >= s) & (mig.ts_ns < e)).sum()),
        })
        for r in o.groupby(["pid", "name"], as_index=False).overlap_ns.sum().itertuples():
            blame.append((j.job, "process", labels.get(int(r.pid), r.name), int(r.pid), int(r.overlap_ns)))
        for r in i.groupby(["kind", "name"], as_index=False).overlap_ns.sum().itertuples():
            blame.append((j.job, r.kind, r.name, -1, int(r.overlap_ns)))
    return pd.DataFrame(metrics), pd.DataFrame(blame, columns=["job", "kind", "name", "pid", "ns"])


def rank(culprits: pd.DataFrame, jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Culprits ranked by total time taken from the victim's jobs, with the number of jobs hit."""
    if culprits.empty:
        return pd.DataFrame(columns=["kind", "name", "jobs_hit", "total_ns", "max_ns"])
    g = culprits.groupby(["kind", "name"]).agg(jobs_hit=("job", "nunique"), total_ns=("ns", "sum"), max_ns=("ns", "max"))
    return g.sort_values("total_ns", ascending=False).reset_index()
