"""The trace of one run directory, with the run's own names for its processes."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from ..outcome import RunOutcome
from .activations import NoThread, activations, select
from .culprits import per_job
from .parse import parse_file, trace_file
from .segments import lengths


def labels(meta: RunOutcome) -> dict[int, str]:
    """pid -> xtalk name ("victim", "enemy read@0") from the run's outcome."""
    out = {}
    if meta.pids is None:
        return out
    if meta.pids.victim:
        out[meta.pids.victim] = "victim"
    for name, pid in meta.pids.enemies.items():
        out[pid] = f"enemy {name}"
    return out


def target_pid(meta: RunOutcome, app: str | None = None) -> int | None:
    """The process measured as the victim (`app` None) or application `app`: the attached
    process of an `attach` victim, else the process the agent started."""
    if app is not None:
        return next((a.pid for a in meta.applications or [] if a.name == app), None)
    body = meta.plan.victim.body if meta.plan is not None else None
    if getattr(body, "kind", None) == "attach":
        return body.pid
    return meta.pids.victim if meta.pids is not None else None


def traced_thread(meta: RunOutcome) -> str | None:
    """The thread whose activations are the victim's jobs (`jobs_from = { trace = ... }`), or None."""
    body = meta.plan.victim.body if meta.plan is not None else None
    source = getattr(body, "jobs_from", None)
    return getattr(source, "trace", None)


def thread_groups(meta: RunOutcome, events: pd.DataFrame) -> dict[int, int]:
    """tid -> tgid for the threads known to be the victim's: an attached process's threads, and
    the measured thread(s) where the jobs come from the trace. Other tasks' groups are unknown
    (the sched events do not say which clone is a thread)."""
    out = {}
    if meta.attached is not None:
        out.update({int(t): meta.attached.pid for t in meta.attached.threads})
    victim, which = target_pid(meta), traced_thread(meta)
    if victim and which is not None:
        known = {int(t): n for t, n in meta.attached.threads.items()} if meta.attached is not None else None
        try:
            out.update({t: int(victim) for t in select(events, victim, which, known)})
        except NoThread:
            pass  # the export still names every thread; `xtalk blame` says which is missing
    return out


def events_of(run_dir: Path) -> pd.DataFrame | None:
    """The run's trace as an event table, None when it has none."""
    path = trace_file(run_dir)
    return parse_file(path) if path is not None else None


def trace_jobs(events: pd.DataFrame, pid: int, which: str, period_ns: int | None, deadline_ns: int,
               known: dict[int, str] | None = None, warmup_jobs: int = 0) -> pd.DataFrame:
    """The job table of thread(s) `which` of process `pid` from a run's trace (trace/activations.py)."""
    return activations(events, pid, which, period_ns, deadline_ns, known, warmup_jobs)


def analyze(run_dir: Path, meta: RunOutcome, jobs: pd.DataFrame, events: pd.DataFrame | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(per-job trace metrics, culprits) for a run that has a trace, else None. The victim is
    the traced thread where its jobs come from the trace, else its process. `meta`: the run's
    outcome (the store reads run.json); `events`: the trace already parsed."""
    if jobs.empty or trace_file(run_dir) is None:
        return None
    victim = target_pid(meta)
    if not victim:
        return None
    events = events if events is not None else events_of(run_dir)
    which = traced_thread(meta)
    if which is not None:
        known = {int(t): n for t, n in meta.attached.threads.items()} if meta.attached is not None else None
        victim = select(events, victim, which, known)[0]
    metrics, culprits = per_job(events, jobs, victim, labels(meta))
    segments = meta.plan.trace.segments if meta.plan is not None and meta.plan.trace is not None else []
    if segments:
        notes: list[str] = []
        metrics = metrics.merge(lengths(events, jobs, victim, segments, notes), on="job", how="left")
        for note in dict.fromkeys(notes):
            warnings.warn(f"{run_dir}: trace segments: {note}", stacklevel=2)
    return metrics, culprits
