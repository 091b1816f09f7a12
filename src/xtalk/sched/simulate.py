"""Two-level discrete-event scheduling simulator (one CPU; `simulate_cpus` runs several side by side).

Level 1 schedules partitions (VMs), level 2 schedules the tasks inside the running
partition (preemptive RM/fixed priority or EDF). Level-1 policies:

* ``dedicated``: one partition owns the CPU (plain uniprocessor scheduling);
* ``fifo``: POSIX SCHED_FIFO between partitions, no time slice: a partition runs until it
  has nothing to do or a higher-priority partition is ready (seed 001 §4.3, Fig. 4.4: an
  equal-priority busy VM starves the other);
* ``rr``: SCHED_RR, the same with a ``quantum``;
* ``ps``: periodic servers (Θ, Π) under RM; an idle server keeps its budget running
  (non-work-conserving, the RT-Xen PS of seed 001 §2.3.4);
* ``ds``: deferrable servers under RM: budget kept while idle, replenished every Π;
* ``cbs``: EDF over hard constant-bandwidth servers (SCHED_DEADLINE, seed 000 §2.4.4):
  a server that wakes with c ≥ (d − now)·Q/T gets d = now + T, c = Q; on exhaustion it
  is throttled until its deadline, then c = Q, d = d + T.

Time is integral (``resolution`` ms per tick, default 1 µs) so that the schedule is exact.
Each job's demand is its WCET (or a random fraction, seeded) plus an injected release
overhead Δ^relEv (seed 001 §4.5). Releases are synchronous and periodic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from xtalk.sched.taskset import Task

from .. import safepath

if TYPE_CHECKING:  # numpy and pandas: loaded by a simulation, not by `xtalk sched --help`
    import numpy as np
    import pandas as pd

__all__ = ["SimPartition", "SimResult", "simulate", "simulate_cpus", "GLOBAL_POLICIES", "gantt"]

GLOBAL_POLICIES = ("dedicated", "fifo", "rr", "ps", "ds", "cbs")


@dataclass
class SimPartition:
    """A partition: its tasks, local policy, server parameters and level-1 priority."""

    name: str
    tasks: list[Task]
    local: str = "rm"  # rm (fixed priority: explicit priority, else period) or edf
    budget: float | None = None  # Θ (ms) for ps / ds / cbs
    period: float | None = None  # Π (ms)
    priority: int | None = None  # fifo / rr / ps / ds: smaller = higher (ps/ds default: RM on Π)


@dataclass
class _Job:
    task: int
    part: int
    seq: int
    release: int
    deadline: int
    remaining: int
    prio: tuple
    start: int | None = None
    finish: int | None = None


@dataclass
class SimResult:
    """Job table, execution intervals and summary metrics of one simulation."""

    jobs: pd.DataFrame  # task, partition, job, release, start, finish, deadline, response, missed (ms)
    intervals: list[tuple[str, str | None, float, float]]  # (partition, task or None = idle budget, start, end)
    horizon: float

    @property
    def deadline_miss_ratio(self) -> float:
        """Missed jobs / judged jobs (seed 001 §4.6 DMR)."""
        return float(self.jobs["missed"].mean()) if len(self.jobs) else 0.0

    def miss_ratio_by_task(self) -> pd.Series:
        """Deadline-miss ratio of each task."""
        return self.jobs.groupby("task")["missed"].mean()

    def max_response_by_task(self) -> pd.Series:
        """Largest observed response time (ms) of each task."""
        return self.jobs.groupby("task")["response"].max()


class _Server:
    def __init__(self, budget: int | None, period: int | None):
        self.q = budget
        self.t = period
        self.c = budget if budget is not None else 0
        self.next_rep = period if period is not None else None
        self.deadline = 0  # CBS absolute deadline
        self.throttled = False


def _ticks(ms: float, res: float) -> int:
    return int(round(ms / res))


def simulate(
    partitions: Sequence[SimPartition],
    duration: float,
    policy: str = "dedicated",
    quantum: float = 10.0,
    overhead: float = 0.0,
    exec_fraction: tuple[float, float] = (1.0, 1.0),
    rng: np.random.Generator | None = None,
    resolution: float = 1e-3,
) -> SimResult:
    """Simulate ``duration`` ms; jobs whose deadline is after the horizon and that have not
    finished are left out of the metrics. ``exec_fraction`` draws each job's demand as
    U[lo, hi]·WCET (seeded ``rng``), then ``overhead`` (ms) is added."""
    if policy not in GLOBAL_POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(GLOBAL_POLICIES)}")
    parts = list(partitions)
    if policy == "dedicated" and len(parts) != 1:
        raise ValueError("policy 'dedicated' takes exactly one partition")
    if policy in ("ps", "ds", "cbs"):
        for p in parts:
            if p.budget is None or p.period is None or not 0 < p.budget <= p.period:
                raise ValueError(f"partition {p.name}: {policy} needs 0 < budget <= period")
    lo, hi = exec_fraction
    if not 0 < lo <= hi <= 1:
        raise ValueError("exec_fraction must satisfy 0 < lo <= hi <= 1")
    import numpy as np

    rng = rng or np.random.default_rng(0)
    end = _ticks(duration, resolution)
    q_ticks = max(1, _ticks(quantum, resolution))
    oh = _ticks(overhead, resolution)

    # static tables
    tasks: list[tuple[int, Task]] = [(pi, t) for pi, p in enumerate(parts) for t in p.tasks]
    periods = [_ticks(t.period, resolution) for _, t in tasks]
    deadlines = [_ticks(t.d, resolution) for _, t in tasks]
    wcets = [_ticks(t.wcet, resolution) for _, t in tasks]
    prio_key = []
    for i, (pi, t) in enumerate(tasks):
        prio_key.append((t.priority if t.priority is not None else 0, periods[i], i))
    servers = [
        _Server(
            max(1, _ticks(p.budget, resolution)) if p.budget is not None else None,
            _ticks(p.period, resolution) if p.period is not None else None,
        )
        for p in parts
    ]
    if policy in ("ps", "ds"):
        lvl1 = [(p.priority if p.priority is not None else 0, servers[i].t, i) for i, p in enumerate(parts)]
    else:
        lvl1 = [(p.priority if p.priority is not None else 0, 0, i) for i, p in enumerate(parts)]

    next_rel = [0] * len(tasks)
    seqs = [0] * len(tasks)
    ready: list[list[_Job]] = [[] for _ in parts]
    done: list[_Job] = []
    intervals: list[tuple[int, int | None, int, int]] = []
    fifo_queue: list[int] = []  # fifo / rr: ready partitions in queue order
    slice_left = q_ticks
    now = 0

    def make_job(i: int, at: int) -> _Job:
        demand = wcets[i]
        if hi < 1 or lo < 1:
            demand = max(1, int(round(demand * rng.uniform(lo, hi))))
        pi = tasks[i][0]
        dl = at + deadlines[i]
        key = (dl, i) if parts[pi].local == "edf" else prio_key[i]
        # at least one tick: a zero-length job would stall the event loop
        return _Job(i, pi, seqs[i], at, dl, max(1, demand + oh), key)

    while now < end:
        # releases due now
        for i in range(len(tasks)):
            while next_rel[i] <= now:
                job = make_job(i, next_rel[i])
                seqs[i] += 1
                pi = job.part
                srv = servers[pi]
                if policy == "cbs" and not ready[pi] and not srv.throttled:
                    # CBS wake-up rule: keep (c, d) only if the remaining bandwidth fits
                    if srv.c * srv.t >= (srv.deadline - now) * srv.q:
                        srv.deadline = now + srv.t
                        srv.c = srv.q
                ready[pi].append(job)
                next_rel[i] += periods[i]
        # replenishments due now
        for srv in servers:
            if policy in ("ps", "ds") and srv.next_rep is not None and srv.next_rep <= now:
                srv.c = srv.q
                srv.next_rep += srv.t
            if policy == "cbs" and srv.throttled and srv.deadline <= now:
                srv.throttled = False
                srv.c = srv.q
                srv.deadline += srv.t
        # level 1: which partition runs
        run: int | None = None
        if policy == "dedicated":
            run = 0
        elif policy in ("fifo", "rr"):
            for pi in range(len(parts)):
                if ready[pi] and pi not in fifo_queue:
                    fifo_queue.append(pi)
            fifo_queue[:] = [pi for pi in fifo_queue if ready[pi]]
            if fifo_queue:
                top = min(lvl1[pi][0] for pi in fifo_queue)
                run = next(pi for pi in fifo_queue if lvl1[pi][0] == top)
        elif policy == "ps":
            cands = [pi for pi in range(len(parts)) if servers[pi].c > 0]
            run = min(cands, key=lambda pi: lvl1[pi]) if cands else None
        elif policy == "ds":
            cands = [pi for pi in range(len(parts)) if servers[pi].c > 0 and ready[pi]]
            run = min(cands, key=lambda pi: lvl1[pi]) if cands else None
        else:  # cbs
            cands = [pi for pi in range(len(parts)) if ready[pi] and not servers[pi].throttled]
            run = min(cands, key=lambda pi: (servers[pi].deadline, pi)) if cands else None
        job = min(ready[run], key=lambda j: j.prio) if run is not None and ready[run] else None

        # next event
        t_next = min(min(next_rel), end)
        for srv in servers:
            if policy in ("ps", "ds") and srv.next_rep is not None:
                t_next = min(t_next, srv.next_rep)
            if policy == "cbs" and srv.throttled:
                t_next = min(t_next, srv.deadline)
        if job is not None:
            t_next = min(t_next, now + job.remaining)
        budgeted = policy in ("ps", "ds", "cbs") and run is not None
        if budgeted:
            t_next = min(t_next, now + servers[run].c)
        if policy == "rr" and run is not None:
            t_next = min(t_next, now + slice_left)
        dt = t_next - now
        if dt <= 0:  # pragma: no cover - every branch above makes progress
            raise RuntimeError("simulator made no progress")

        # advance
        if run is not None:
            intervals.append((run, job.task if job else None, now, t_next))
        if job is not None:
            if job.start is None:
                job.start = now
            job.remaining -= dt
        if budgeted:
            servers[run].c -= dt
        if policy == "rr" and run is not None:
            slice_left -= dt
        now = t_next
        if job is not None and job.remaining == 0:
            job.finish = now
            ready[job.part].remove(job)
            done.append(job)
        if budgeted and servers[run].c == 0 and policy == "cbs":
            srv = servers[run]
            srv.throttled = True
            if srv.deadline <= now:  # deadline already reached: replenish at once
                srv.throttled = False
                srv.c = srv.q
                srv.deadline += srv.t
        if policy == "rr" and run is not None:
            if slice_left == 0 or not ready[run]:
                if run in fifo_queue and slice_left == 0:
                    fifo_queue.remove(run)
                    if ready[run]:
                        fifo_queue.append(run)
                slice_left = q_ticks

    rows = []
    pending = [j for r in ready for j in r]
    for j in done + pending:
        if j.finish is None and j.deadline > end:
            continue  # not judged: its deadline is beyond the horizon
        finish = j.finish
        missed = finish is None or finish > j.deadline
        rows.append(
            {
                "task": tasks[j.task][1].name,
                "partition": parts[j.part].name,
                "job": j.seq,
                "release": j.release * resolution,
                "start": None if j.start is None else j.start * resolution,
                "finish": None if finish is None else finish * resolution,
                "deadline": j.deadline * resolution,
                "response": None if finish is None else (finish - j.release) * resolution,
                "missed": bool(missed),
            }
        )
    import pandas as pd

    df = pd.DataFrame(rows, columns=["task", "partition", "job", "release", "start", "finish", "deadline", "response", "missed"])
    df = df.sort_values(["release", "task"]).reset_index(drop=True)
    ivs = [
        (parts[p].name, tasks[t][1].name if t is not None else None, a * resolution, b * resolution)
        for p, t, a, b in _merge(intervals)
    ]
    return SimResult(jobs=df, intervals=ivs, horizon=duration)


def _merge(intervals: list[tuple[int, int | None, int, int]]) -> list[tuple[int, int | None, int, int]]:
    # join back-to-back slices of the same (partition, task): events split them needlessly
    out: list[tuple[int, int | None, int, int]] = []
    for p, t, a, b in intervals:
        if out and out[-1][0] == p and out[-1][1] == t and out[-1][3] == a:
            out[-1] = (p, t, out[-1][2], b)
        else:
            out.append((p, t, a, b))
    return out


def gantt(result: SimResult, path: str, title: str = "") -> None:
    """Write a Gantt chart of the execution intervals (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted({(p, t) for p, t, _, _ in result.intervals if t is not None})
    index = {r: i for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5), layout="tight")  # its own engine: the report's style may set another
    colors = plt.get_cmap("tab10")
    parts = sorted({p for p, _ in rows})
    for p, t, a, b in result.intervals:
        if t is None:
            continue
        ax.broken_barh([(a, b - a)], (index[(p, t)] - 0.4, 0.8), color=colors(parts.index(p) % 10))
    missed = result.jobs[result.jobs["missed"]]
    for _, j in missed.iterrows():
        key = (j["partition"], j["task"])
        if key in index:
            ax.plot([j["deadline"]], [index[key]], "rx")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{p}/{t}" for p, t in rows])
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "schedule")
    safepath.save_figure(fig, path)
    plt.close(fig)


def simulate_cpus(
    cpus: Sequence[tuple[int, Sequence[SimPartition], str]],
    duration: float,
    quantum: float = 10.0,
    overhead: float = 0.0,
    exec_fraction: tuple[float, float] = (1.0, 1.0),
    rng: np.random.Generator | None = None,
    resolution: float = 1e-3,
) -> SimResult:
    """Several CPUs side by side, each ``(cpu, partitions, policy)`` simulated on its own (no
    migration: partitioned scheduling, as :mod:`xtalk.sched.placement` places servers and
    tasks); one result whose job table has a ``cpu`` column."""
    import numpy as np

    rng = rng or np.random.default_rng(0)
    frames, intervals = [], []
    for cpu, parts, policy in cpus:
        r = simulate(parts, duration, policy, quantum=quantum, overhead=overhead, exec_fraction=exec_fraction,
                     rng=rng, resolution=resolution)
        frames.append(r.jobs.assign(cpu=cpu))
        intervals += r.intervals
    import pandas as pd

    jobs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(jobs):
        jobs = jobs.sort_values(["release", "task"]).reset_index(drop=True)
    return SimResult(jobs=jobs, intervals=intervals, horizon=duration)
