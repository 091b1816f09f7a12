"""Jobs of a command application from its probes (`jobs_from = { probe = ... }`).

The agent runs a command as one record (job 0, the whole process). When the plan declares the
command's jobs (plan.JobsFrom), the conversion replaces that record by one row per span of the
probe, in the job table's own columns, so every analysis reads them as it reads a built-in
victim's jobs. Per job:

- start / end: the probe's begin and end (or the next end of probe `end`), on one thread;
- wake-up: the last mark (or end) of probe `release` before the start, else the start;
- release: with a declared period, job j at `anchor + j·period` as an absolute periodic loop
  releases it (an overrun makes the next jobs late, not released later; the least late job
  has lateness 0), shifted by the periods a program that skips them skipped (`_releases`);
  without one, the wake-up (a release probe) or the start (execution only: `timing(plan)`);
- missed: its response time beyond the deadline (the declared deadline, else the period) where
  releases are known; never in execution-only timing, which has no deadline to miss.

cpu_time_ns is not measured per span (the probes read no CPU clock): it is -1, "not read", and
on-CPU time comes from the kernel trace where one was taken. The process's own record moves to
`process.parquet` (`whole_process`): available, never a job.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..plan import JobsFrom
from .files import JobLogError, write_parquet_atomic
from .probes import probe_names, read_probe_events

#: Timing of a declared application's jobs: releases known (response time, lateness,
#: deadline misses) or execution only.
TIMING_RELEASE, TIMING_EXECUTION = "release", "execution"


def timing(jf: JobsFrom | None) -> str:
    """`release` where releases are known (a declared period or a release probe, and always for
    the built-in bodies), else `execution` (the jobs' execution times only)."""
    if jf is None or jf.trace is not None or jf.period_ns is not None or jf.release is not None:
        return TIMING_RELEASE
    return TIMING_EXECUTION


def _resolve(name: str, names: dict[int, str], field: str) -> int:
    """A probe's id from a name (`probes` of the file or the program's own), or digits."""
    if name.isdigit():
        return int(name)
    for pid, n in names.items():
        if n == name:
            return pid
    known = ", ".join(sorted(set(names.values()))) or "none"
    raise JobLogError(f"jobs_from.{field}: the program recorded no probe named {name!r} (named probes: {known})")


def _spans(ev: pd.DataFrame, begin_id: int, end_id: int) -> pd.DataFrame:
    """(tid, start_ns, end_ns, cpu_start, cpu_end) of each begin of `begin_id` to the next end
    of `end_id` on the same thread (the same id: its begin/end pairs, innermost first)."""
    rows = []
    for tid, g in ev[ev.id.isin([begin_id, end_id])].groupby("tid", sort=False):
        stack = []
        for r in g.itertuples():
            if r.id == begin_id and r.kind == "begin":
                stack.append(r)
            elif r.id == end_id and r.kind == "end" and stack:
                b = stack.pop()
                if begin_id != end_id:
                    stack.clear()  # begin at one, end at another: the latest begin; earlier ones never ended
                rows.append((int(tid), b.ts_ns, r.ts_ns, b.cpu, r.cpu))
    return pd.DataFrame(rows, columns=["tid", "start_ns", "end_ns", "cpu_start", "cpu_end"]).sort_values(
        "start_ns", kind="stable").reset_index(drop=True)


def _wakeups(ev: pd.DataFrame, release_id: int, spans: pd.DataFrame) -> np.ndarray:
    """Each span's wake-up: the last release mark (else end, else begin) of its thread at or
    before its start; the start where there is none."""
    rel = ev[ev.id == release_id]
    for kind in ("mark", "end", "begin"):
        if (rel.kind == kind).any():
            rel = rel[rel.kind == kind]
            break
    out = spans.start_ns.to_numpy().copy()
    for tid, g in spans.groupby("tid", sort=False):
        marks = np.sort(rel.loc[rel.tid == tid, "ts_ns"].to_numpy())
        starts = g.start_ns.to_numpy()
        k = np.searchsorted(marks, starts, side="right") - 1
        ok = k >= 0
        vals = np.where(ok, marks[np.clip(k, 0, None)] if len(marks) else starts, starts)
        out[g.index.to_numpy()] = vals
    return out


#: A wake-up this close after the previous job's end did not sleep: the program was late and
#: its clock_nanosleep returned at once (its release had passed).
NO_SLEEP_NS = 50_000


def _releases(x: np.ndarray, period_ns: int, prev_end: np.ndarray | None = None) -> np.ndarray:
    """Releases on a grid of `period_ns` under the jobs' wake-ups (or starts) `x`, in order.

    An absolute periodic loop (`next += period`) releases job j at t0 + j·period, however late
    the one before ran: so job j's release is `anchor + (j + s_j)·period`, the anchor the
    least late of the jobs that slept (a wake-up at least NO_SLEEP_NS after the previous job's
    end, `prev_end`; that job gets lateness 0), and s_j the periods the program skipped before
    job j. A program that skips (`while (next < now) next += period`) moves every later job a
    period on for good, while a wake-up merely delayed by preemption moves only its own job:
    s_j is the least shift of the on-time jobs from j on (slept, and woke within a tenth of a
    period after a grid point). No release is after its own wake-up."""
    n = len(x)
    if not n:
        return x
    j = np.arange(n, dtype=np.int64)
    slept = np.ones(n, dtype=bool) if prev_end is None else ~(x - prev_end < NO_SLEEP_NS)
    slept[0] = True
    anchor = int((x - j * period_ns)[slept].min())
    floor = (x - anchor) // period_ns
    on_time = slept & ((x - anchor - floor * period_ns) < period_ns // 10)
    shift = np.where(on_time, floor - j, np.iinfo(np.int64).max)
    level = np.minimum.accumulate(shift[::-1])[::-1]  # least shift of the on-time jobs from j on
    level = np.where(level == np.iinfo(np.int64).max, 0, level)
    level = np.maximum.accumulate(level)  # a skip is for good
    return anchor + np.minimum(j + level, floor) * period_ns


def probe_jobs(run_dir: Path, app: str | None, jf: JobsFrom, file_names: dict[str, str],
               deadline_ns: int | None) -> pd.DataFrame:
    """The job table (read_job_log's columns, and the thread `tid`) of a command whose jobs
    are the spans of probe `jf.probe`, from its probes.bin; `deadline_ns` the declared one
    (None: the period, declared or else the median interval between wake-ups)."""
    ev = read_probe_events(run_dir, app)
    names = probe_names(run_dir, app, file_names)
    begin_id = _resolve(jf.probe, names, "probe")
    spans = _spans(ev, begin_id, _resolve(jf.end, names, "end") if jf.end else begin_id)
    start = spans.start_ns.to_numpy()
    wake = _wakeups(ev, _resolve(jf.release, names, "release"), spans) if jf.release else start.copy()
    if jf.period_ns is not None:
        prev_end = np.concatenate([[np.iinfo(np.int64).min // 2], spans.end_ns.to_numpy()[:-1]])
        release = _releases(wake, jf.period_ns, prev_end)
        period = jf.period_ns
    else:
        release = wake.copy()
        period = int(np.median(np.diff(wake))) if len(wake) > 1 else 0
    known = timing(jf) == TIMING_RELEASE
    deadline_ns = deadline_ns or period
    end = spans.end_ns.to_numpy()
    n = len(spans)
    df = pd.DataFrame({
        "job": np.arange(n, dtype=np.int64),
        "task": np.zeros(n, dtype=np.int64),
        "warmup": np.arange(n) < jf.warmup_jobs,
        "release_ns": release.astype(np.int64),
        "wakeup_ns": wake.astype(np.int64),
        "start_ns": start.astype(np.int64),
        "end_ns": end.astype(np.int64),
        "cpu_time_ns": np.full(n, -1, dtype=np.int64),
        "cpu_start": spans.cpu_start.to_numpy(dtype=np.int32),
        "cpu_end": spans.cpu_end.to_numpy(dtype=np.int32),
        "migrated": (spans.cpu_start != spans.cpu_end).to_numpy(),
        "nvcsw": np.zeros(n, dtype=np.int64),
        "nivcsw": np.zeros(n, dtype=np.int64),
    })
    df["period_ns"] = np.int64(period)
    df["deadline_ns"] = np.int64(deadline_ns if known else 0)
    df["exec_ns"] = df.end_ns - df.start_ns
    df["response_ns"] = df.end_ns - df.release_ns
    df["wakeup_latency_ns"] = df.wakeup_ns - df.release_ns
    df["missed"] = (df.response_ns > deadline_ns) if known and deadline_ns else np.zeros(n, dtype=bool)
    df["failed"] = False
    df["tid"] = spans.tid.to_numpy(dtype=np.int64)
    cols = ["job", "task", "warmup", "release_ns", "wakeup_ns", "start_ns", "end_ns", "cpu_time_ns", "cpu_start", "cpu_end",
            "migrated", "nvcsw", "nivcsw", "missed", "failed", "period_ns", "deadline_ns", "exec_ns", "response_ns",
            "wakeup_latency_ns", "tid"]
    return df[cols]


def write_process(where: Path, process: pd.DataFrame) -> None:
    """The whole process's own record (the agent's job 0) beside the derived jobs."""
    write_parquet_atomic(process.reset_index(drop=True), Path(where) / "process.parquet")


def whole_process(run_dir: Path) -> pd.DataFrame | None:
    """The victim's whole-process record of a run whose jobs come from its probes (None for
    any other run): its start, end, CPU time and context switches, as read_job_log gives them."""
    p = Path(run_dir) / "process.parquet"
    return pd.read_parquet(p) if p.exists() else None
