"""Job logs: the agent's `jobs.bin` (see docs/results.md) into a job table and Parquet.

A run's jobs.parquet holds the jobs of every measured process: the victim's (jobs.bin) and
each application's (applications/<name>/jobs.bin), told apart by the `application` column.
Only the records the victim published (the header's `count`) are read, so a log left by a
victim or agent killed mid-run reads back exactly the jobs finished before the kill.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .files import JOB_TABLE_WRITE, JobLogError, read_parquet, write_parquet_atomic  # noqa: F401 (public here too)

MAGIC = b"XTJOBS01"
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("record_size", "<u4"), ("capacity", "<u8"), ("count", "<u8"),
                   ("period_ns", "<u8"), ("deadline_ns", "<u8"), ("t0_ns", "<i8"), ("reserved", "<u8")])
RECORD = np.dtype([("job", "<u8"), ("release_ns", "<i8"), ("wakeup_ns", "<i8"), ("start_ns", "<i8"), ("end_ns", "<i8"),
                   ("cpu_time_ns", "<i8"), ("nvcsw", "<i8"), ("nivcsw", "<i8"), ("cpu_start", "<i4"), ("cpu_end", "<i4"),
                   ("flags", "<u4"), ("reserved", "<u4")])
FLAG_WARMUP, FLAG_MISSED, FLAG_MIGRATED, FLAG_FAILED = 1, 2, 4, 8
assert HEADER.itemsize == 64 and RECORD.itemsize == 80


def read_job_log(path: Path, expected: int | None = None) -> pd.DataFrame:
    """The job table of one run: raw fields plus derived exec/response/wake-up latency.
    JobLogError, naming the file and the fault, when the header disagrees with the file's
    size (a log cut short is never read as fewer jobs) or its count falls below `expected`
    (the run.json's `jobs_recorded`, when the run finished)."""
    raw = Path(path).read_bytes()
    if len(raw) < HEADER.itemsize:
        raise JobLogError(f"{path}: {len(raw)} bytes, shorter than the {HEADER.itemsize}-byte header (emptied or cut short)")
    if raw[:8] != MAGIC:
        raise JobLogError(f"{path}: not an xtalk job log (magic {bytes(raw[:8])!r}, expected {MAGIC!r})")
    h = np.frombuffer(raw, HEADER, count=1)[0]
    if h["record_size"] != RECORD.itemsize:
        raise JobLogError(f"{path}: record size {h['record_size']} not supported (expected {RECORD.itemsize})")
    fits = (len(raw) - HEADER.itemsize) // RECORD.itemsize
    count = int(h["count"])
    if count > h["capacity"]:
        raise JobLogError(f"{path}: header counts {count} records in a capacity of {h['capacity']} (corrupted header)")
    if count > fits:
        raise JobLogError(f"{path}: header counts {count} records, the file holds {fits} (cut short)")
    # Fewer is damage; more can be honest (a job published after the agent counted them).
    if expected is not None and count < expected:
        raise JobLogError(f"{path}: {count} records, but run.json records {expected} jobs")
    rec = np.frombuffer(raw, RECORD, count=count, offset=HEADER.itemsize)
    flags = rec["flags"]
    df = pd.DataFrame({
        "job": rec["job"].astype(np.int64),
        "task": rec["reserved"].astype(np.int64),  # task index of a task-set victim, else 0
        "warmup": (flags & FLAG_WARMUP) != 0,
        "release_ns": rec["release_ns"],
        "wakeup_ns": rec["wakeup_ns"],
        "start_ns": rec["start_ns"],
        "end_ns": rec["end_ns"],
        "cpu_time_ns": rec["cpu_time_ns"],
        "cpu_start": rec["cpu_start"],
        "cpu_end": rec["cpu_end"],
        "migrated": (flags & FLAG_MIGRATED) != 0,
        "nvcsw": rec["nvcsw"],
        "nivcsw": rec["nivcsw"],
        "missed": (flags & FLAG_MISSED) != 0,
        "failed": (flags & FLAG_FAILED) != 0,  # the job could not do its work (also missed)
    })
    df["period_ns"] = np.int64(h["period_ns"])
    df["deadline_ns"] = np.int64(h["deadline_ns"])
    df["exec_ns"] = df["end_ns"] - df["start_ns"]
    df["response_ns"] = df["end_ns"] - df["release_ns"]
    df["wakeup_latency_ns"] = df["wakeup_ns"] - df["release_ns"]
    return df


COUNTER_MAGIC = b"XTCNTR01"


def counter_column(event: str) -> str:
    """Column name of a counter: `ctr_` + the event with non-identifier characters as `_`."""
    return "ctr_" + "".join(ch if ch.isalnum() else "_" for ch in event).strip("_")


def read_counter_log(path: Path, events: list[str]) -> pd.DataFrame:
    """Per-job counter deltas: `job`, `ctr_enabled_ns`, `ctr_running_ns`, one `ctr_<event>`
    column per event. A value whose group never ran (running 0) is missing, not zero."""
    raw = Path(path).read_bytes()
    if len(raw) < 64 or raw[:8] != COUNTER_MAGIC:
        raise JobLogError(f"{path}: not an xtalk counter log ({len(raw)} bytes; emptied, cut short or corrupted)")
    record_size, capacity, count, n = (int(np.frombuffer(raw, "<u4", 1, 12)[0]), int(np.frombuffer(raw, "<u8", 1, 16)[0]),
                                       int(np.frombuffer(raw, "<u8", 1, 24)[0]), int(np.frombuffer(raw, "<u4", 1, 32)[0]))
    if n != len(events) or record_size != 24 + 8 * n:
        raise JobLogError(f"{path}: {n} counters recorded but run.json names {len(events)}")
    fits = (len(raw) - 64) // record_size
    if count > min(capacity, fits):
        raise JobLogError(f"{path}: header counts {count} records, the file holds {fits} of capacity {capacity} (cut short or corrupted)")
    rec = np.frombuffer(raw, "<u8", count * (3 + n), 64).reshape(count, 3 + n)
    running = rec[:, 2]
    df = pd.DataFrame({"job": rec[:, 0].astype(np.int64), "ctr_enabled_ns": rec[:, 1].astype(np.int64),
                       "ctr_running_ns": running.astype(np.int64)})
    for i, e in enumerate(events):
        df[counter_column(e)] = pd.array(np.where(running > 0, rec[:, 3 + i], 0).astype(np.int64), dtype="Int64")
        df.loc[running == 0, counter_column(e)] = pd.NA
    return df


#: The victim's name in the `application` column when the plan gives none (and for every
#: row of results from before applications).
DEFAULT_APPLICATION = "victim"


def measured_logs(run_dir: Path) -> list[tuple[str, Path, list[str]]]:
    """Every measured process of a run: (name, its directory, its counter events); the
    victim first (the run directory), then each application (`applications/<name>/`)."""
    from ..outcome import read_outcome

    meta = read_outcome(run_dir)
    name = meta.plan.victim.name if meta is not None and meta.plan is not None else DEFAULT_APPLICATION
    events = meta.counters.events if meta is not None and meta.counters is not None else []
    out = [(name, Path(run_dir), events)]
    for a in meta.applications if meta is not None else []:
        out.append((a.name, Path(run_dir) / a.dir, a.counters.events))
    return out


def _fresh(run_dir: Path, logs: list[Path]) -> bool:
    dst = run_dir / "jobs.parquet"
    return dst.exists() and all(not p.exists() or dst.stat().st_mtime >= p.stat().st_mtime for p in logs)


def needs_conversion(run_dir: Path) -> bool:
    """Whether the run has a job log without an up-to-date jobs.parquet."""
    run_dir = Path(run_dir)
    return (run_dir / "jobs.bin").exists() and not _fresh(run_dir, [w / "jobs.bin" for _, w, _ in measured_logs(run_dir)])


def with_application(df: pd.DataFrame, name: str = DEFAULT_APPLICATION) -> pd.DataFrame:
    """`df` with an `application` column: a table written before applications gets the
    victim's default name, so every reader sees the column."""
    if "application" not in df.columns:
        df.insert(df.columns.get_loc("job") + 1 if "job" in df.columns else 0, "application",
                  pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), categories=[name]))
    return df


def declared_jobs(run_dir: Path, app: str | None):
    """(the plan's JobsFrom, the command body, the declared deadline or None) of a measured
    process whose jobs are declared (`jobs_from`); None for any other."""
    proc = _process(run_dir, app)
    jf = getattr(proc.body, "jobs_from", None) if proc is not None else None
    return (jf, proc.body, proc.deadline_ns) if jf is not None else None


def _from_trace(run_dir: Path, app: str | None, source, proc, trace: pd.DataFrame | None) -> pd.DataFrame:
    """The jobs of a process declared `jobs_from = { trace = ... }` (trace/activations.py).
    JobLogError when the run has no trace, names no process, or the process no such thread."""
    from ..outcome import read_outcome
    from ..trace.activations import NoThread
    from ..trace.run import target_pid, trace_jobs

    meta = read_outcome(run_dir)
    if trace is None:
        why = meta.trace.error if meta is not None and meta.trace is not None and getattr(meta.trace, "error", None) else "its trace (trace.dat or trace.txt) is missing"
        raise JobLogError(f"{run_dir}: jobs_from.trace needs the run's kernel trace, and {why}")
    pid = target_pid(meta, app) if meta is not None else None
    if not pid:
        raise JobLogError(f"{run_dir}: jobs_from.trace: run.json names no process for {app or 'the victim'}")
    known = {int(t): n for t, n in meta.attached.threads.items()} if app is None and meta.attached is not None else {}
    try:
        # Misses need a deadline: the declared one, else the declared period (none without).
        return trace_jobs(trace, pid, source.trace, source.period_ns, proc.deadline_ns or source.period_ns or 0, known,
                          source.warmup_jobs)
    except NoThread as e:
        raise JobLogError(f"{run_dir}: {e}") from None


def _one(name: str, where: Path, events: list[str], run_dir: Path, app: str | None,
         trace: pd.DataFrame | None = None, expected: int | None = None) -> pd.DataFrame:
    """The job table of one measured process (`app`: None for the victim), counters merged,
    its probes converted beside its log. A command whose jobs come from its probes gets one
    row per probe span (store/probe_jobs.py), one whose jobs come from the kernel trace
    (`trace`, the run's parsed trace) one row per activation (trace/activations.py); its own
    record goes to process.parquet. `expected`: the records run.json counts."""
    df = read_job_log(where / "jobs.bin", expected)
    df.insert(1, "application", name)
    if events and (where / "counters.bin").exists():
        df = df.merge(read_counter_log(where / "counters.bin", events), on="job", how="left")
    declared = declared_jobs(run_dir, app)
    proc = _process(run_dir, app)
    names = getattr(proc.body, "probe_names", {}) if proc is not None else {}
    if (where / "probes.bin").exists():
        from .probes import convert_probes

        try:
            convert_probes(run_dir, app, names)
        except JobLogError:
            if declared is not None and declared[0].probe is not None:
                raise  # the jobs are the probes: no time reference, no jobs (named, not guessed)
            # the agent died before the time reference: probes.bin stays for inspection
    if declared is not None and declared[0].probe is not None:
        from .probe_jobs import probe_jobs, write_process

        if not (where / "probes.bin").exists():
            raise JobLogError(f"{where}: jobs come from probe {declared[0].probe!r} but the run left no probes.bin")
        write_process(where, df)
        jobs = probe_jobs(run_dir, app, declared[0], names, declared[2])
        jobs.insert(1, "application", name)
        df = jobs
    elif declared is not None and declared[0].trace is not None:
        from .probe_jobs import write_process

        write_process(where, df)
        jobs = _from_trace(run_dir, app, declared[0], proc, trace)
        if getattr(proc.body, "kind", None) == "attach" and len(df):
            # The trace runs from the barrier to the teardown; the window: the watcher's release
            # for `duration` (the plan's period), cut short if the process ended.
            w0 = int(df.release_ns.iloc[0])
            w1 = min(w0 + proc.period_ns, int(df.end_ns.iloc[0]))
            jobs = jobs[(jobs.release_ns >= w0) & (jobs.end_ns <= w1)].reset_index(drop=True)
            jobs["job"] = np.arange(len(jobs), dtype=np.int64)
            jobs["warmup"] = jobs.job < declared[0].warmup_jobs
        jobs.insert(1, "application", name)
        df = jobs
    return df


def _process(run_dir: Path, app: str | None):
    """The plan's victim (`app` None) or application `app`, or None (no plan in run.json)."""
    from ..outcome import read_outcome

    meta = read_outcome(Path(run_dir))
    if meta is None or meta.plan is None:
        return None
    proc = meta.plan.victim if app is None else next((a for a in meta.plan.applications if a.name == app), None)
    return proc


def _recorded(run_dir: Path) -> int | None:
    """The victim's job count run.json records (None: a run the agent did not finish, whose
    log holds what was published before it stopped)."""
    from ..outcome import read_outcome

    meta = read_outcome(run_dir)
    if meta is None or meta.status == "running":
        return None
    return meta.jobs_recorded


def convert_run(run_dir: Path) -> pd.DataFrame | None:
    """jobs.bin (the victim's and every application's) -> jobs.parquet for one run directory
    (idempotent), one table with an `application` column naming each row's process. None
    when there is no victim log."""
    run_dir = Path(run_dir)
    measured = measured_logs(run_dir)
    src, dst = run_dir / "jobs.bin", run_dir / "jobs.parquet"
    if _fresh(run_dir, [w / "jobs.bin" for _, w, _ in measured]):
        return with_application(read_parquet(dst))
    if not src.exists():
        return None
    name, _, events = measured[0]
    from ..trace.run import analyze, events_of

    trace = events_of(run_dir)
    df = _one(name, run_dir, events, run_dir, None, trace, _recorded(run_dir))
    # The trace is analysed for the victim's jobs (its culprits); applications' rows have none.
    traced = None
    if trace is not None and not df.empty:  # analyze's own test, before the outcome is read
        from ..outcome import load_outcome

        traced = analyze(run_dir, load_outcome(run_dir), df.drop(columns="application"), trace)
    if traced is not None:
        metrics, culprits = traced
        df = df.merge(metrics, on="job", how="left")
        write_parquet_atomic(culprits, run_dir / "culprits.parquet")
    parts = [df]
    for app, where, app_events in measured[1:]:
        if (where / "jobs.bin").exists():
            parts.append(_one(app, where, app_events, run_dir, app, trace))
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else df
    df["application"] = pd.Categorical(df["application"], categories=[m[0] for m in measured])
    df["cpu_end"] = df["cpu_end"].astype("Int64").mask(df["cpu_end"] < 0)  # -1: not read
    write_parquet_atomic(df, dst, **JOB_TABLE_WRITE)
    return df


def victim_jobs(run_dir: Path) -> pd.DataFrame | None:
    """The victim's rows of a run's job table (what the trace tools read: the kernel trace is
    analysed around the victim's jobs)."""
    df = convert_run(run_dir)
    if df is None:
        return None
    victim = measured_logs(Path(run_dir))[0][0]
    return df[df["application"].astype(str) == victim].reset_index(drop=True)
