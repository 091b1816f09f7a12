"""Per-job view of the kernel trace: what ran on the victim's CPU during each job, and what
held the victim off it.

For each job [start_ns, end_ns] on its CPU: how often the victim was preempted and how long
it waited while runnable, the time taken by other processes, hard IRQs and softirqs, its
migrations, its waker and wake-up latency (trace/wakers.py), and the culprits themselves:
one row per job × culprit with the time it was present during the job (``ns``) and the time
it held the victim off its CPU (``blocked_ns`` and its parts, trace/wakers.py), which ranks them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .overlap import overlaps
from .timeline import interrupts, occupancy, runnable_waits
from .wakers import BLOCK_COLUMNS
from .wakers import per_job as blocking


def _pairs(cpu: np.ndarray, s: np.ndarray, e: np.ndarray, iv: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(window, interval, overlap ns) of every window [s, e) on CPU ``cpu`` and row of ``iv``
    (cpu, start_ns, end_ns) on that CPU that overlap (:func:`overlap.overlaps`)."""
    return overlaps(cpu, s, e, *(iv[c].to_numpy(dtype=np.int64) for c in ("cpu", "start_ns", "end_ns")))


def _per_window(n: int, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.bincount(w, weights=x, minlength=n).astype(np.int64) if n else np.zeros(0, dtype=np.int64)


def per_job(events: pd.DataFrame, jobs: pd.DataFrame, victim_pid: int, labels: dict[int, str] | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, culprits). metrics: one row per job with `trace_*` columns; culprits: job,
    kind (process / irq / softirq / timer), name, pid, ns (present on the victim's CPU during
    the job), then ``blocked_ns``, ``preempted_ns``, ``before_ns``, ``interrupted_ns``
    (:func:`xtalk.trace.wakers.per_job`: the time it held the victim off, from its wake-up).
    Every job at once (a loop over jobs took a minute for a 13 s run of 1900 jobs)."""
    labels = labels or {}
    occ = occupancy(events)
    others = occ[(occ.pid != victim_pid) & (occ.pid != 0)].reset_index(drop=True)
    ints = interrupts(events).reset_index(drop=True)
    waits = runnable_waits(events, victim_pid)
    mig = events[(events.event == "sched_migrate_task") & (events.get("target_pid", pd.Series(dtype="Int64")) == victim_pid)]
    n = len(jobs)
    job = jobs["job"].to_numpy()
    cpu = jobs["cpu_start"].to_numpy(dtype=np.int64)
    s = jobs["start_ns"].to_numpy(dtype=np.int64)
    e = jobs["end_ns"].to_numpy(dtype=np.int64)
    ow, oi, oo = _pairs(cpu, s, e, others)
    iw, ii, io = _pairs(cpu, s, e, ints)
    kinds = ints["kind"].to_numpy()[ii]
    # The victim's waits are its own (one CPU at a time): matched on every CPU alike.
    ww, wi, wo = _pairs(np.zeros(n, dtype=np.int64), s, e, waits.assign(cpu=0))
    w_start = waits["start_ns"].to_numpy(dtype=np.int64)[wi]
    mig_ts = np.sort(mig["ts_ns"].to_numpy(dtype=np.int64))
    metrics = pd.DataFrame({
        "job": job,
        "trace_preemptions": np.bincount(ww[(w_start >= s[ww]) & (w_start < e[ww])], minlength=n)[:n],
        "trace_runnable_ns": _per_window(n, ww, wo),
        "trace_other_ns": _per_window(n, ow, oo),
        "trace_irq_ns": _per_window(n, iw[kinds == "irq"], io[kinds == "irq"]),
        "trace_softirq_ns": _per_window(n, iw[kinds == "softirq"], io[kinds == "softirq"]),
        "trace_migrations": np.searchsorted(mig_ts, e, side="left") - np.searchsorted(mig_ts, s, side="left"),
    })
    procs = (pd.DataFrame({"w": ow, "pid": others["pid"].to_numpy()[oi], "name": others["name"].to_numpy()[oi], "ns": oo})
             .groupby(["w", "pid", "name"], sort=True).ns.sum().reset_index())
    procs = pd.DataFrame({"job": job[procs["w"].to_numpy()], "kind": "process",
                          "name": [labels.get(int(p), m) for p, m in zip(procs["pid"], procs["name"])],
                          "pid": procs["pid"].to_numpy(), "ns": procs["ns"].to_numpy(dtype=np.int64)})
    irqs = (pd.DataFrame({"w": iw, "kind": kinds, "name": ints["name"].to_numpy()[ii], "ns": io})
            .groupby(["w", "kind", "name"], sort=True).ns.sum().reset_index())
    irqs = pd.DataFrame({"job": job[irqs["w"].to_numpy()], "kind": irqs["kind"].to_numpy(), "name": irqs["name"].to_numpy(),
                         "pid": -1, "ns": irqs["ns"].to_numpy(dtype=np.int64)})
    present = pd.concat([procs, irqs], ignore_index=True)
    present["pid"] = present["pid"].astype(np.int64)
    held_metrics, held = blocking(events, jobs, victim_pid, labels, occ, ints)
    keys = ["job", "kind", "name", "pid"]
    blame = present.merge(held, on=keys, how="outer") if len(held) else present.assign(
        **{c: 0 for c in BLOCK_COLUMNS[4:]})
    blame = blame.fillna({c: 0 for c in ["ns", *BLOCK_COLUMNS[4:]]})
    blame = blame.astype({c: np.int64 for c in ["ns", *BLOCK_COLUMNS[4:]]})
    blame = blame.sort_values(["job", "blocked_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    metrics = metrics.merge(held_metrics, on="job", how="left")
    return metrics, blame[["job", "kind", "name", "pid", "ns", *BLOCK_COLUMNS[4:]]]


#: Columns of :func:`rank`.
RANK_COLUMNS = ["kind", "name", "jobs_blocked", "blocked_ns", "max_blocked_ns", "preempted_ns", "before_ns",
                "interrupted_ns", "jobs_hit", "total_ns", "max_ns"]


def rank(culprits: pd.DataFrame, jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Culprits ranked by the time they held the victim off its CPU (``blocked_ns``: preempted
    it, ran before it after its wake-up, interrupted it), with the jobs they blocked; then the
    time they were present during its jobs (``jobs_hit``, ``total_ns``, ``max_ns``: the
    ranking of a culprits.parquet written before blocked time was derived)."""
    if culprits.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    c = culprits if "blocked_ns" in culprits else culprits.assign(blocked_ns=0, preempted_ns=0, before_ns=0, interrupted_ns=0)
    c = c.assign(blocked_job=c["job"].where(c["blocked_ns"] > 0), hit_job=c["job"].where(c["ns"] > 0))
    g = c.groupby(["kind", "name"]).agg(jobs_blocked=("blocked_job", "nunique"), blocked_ns=("blocked_ns", "sum"),
                                        max_blocked_ns=("blocked_ns", "max"), preempted_ns=("preempted_ns", "sum"),
                                        before_ns=("before_ns", "sum"), interrupted_ns=("interrupted_ns", "sum"),
                                        jobs_hit=("hit_job", "nunique"), total_ns=("ns", "sum"), max_ns=("ns", "max"))
    return g.sort_values(["blocked_ns", "total_ns"], ascending=False, kind="stable").reset_index()[RANK_COLUMNS]
