"""Export a run as a Chrome JSON trace (trace-event format; `xtalk perfetto --format json`), which
ui.perfetto.dev and chrome://tracing open: one track per CPU (tasks and interrupts drawn as slices),
one track per process, and the victim's jobs as slices. Enemies and the victim carry their xtalk
names. The default export is Perfetto's own protobuf format (trace/perfetto.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import safepath
from .timeline import interrupts, occupancy

CPU_PID_BASE = 1_000_000  # synthetic "process" ids for the CPU tracks
JOBS_PID = 999_999


def _us(ns: int, base: int) -> float:
    return (ns - base) / 1000.0


def build(events: pd.DataFrame, jobs: pd.DataFrame, labels: dict[int, str]) -> dict:
    """The trace as a dict (see `write`)."""
    occ = occupancy(events)
    ints = interrupts(events)
    starts = [s for s in (events.ts_ns.min() if len(events) else None, jobs.release_ns.min() if len(jobs) else None) if s is not None]
    base = int(min(starts)) if starts else 0
    out = [{"ph": "M", "name": "process_name", "pid": JOBS_PID, "args": {"name": "victim jobs"}}]
    for cpu in sorted(set(occ.cpu) | set(ints.cpu)):
        out.append({"ph": "M", "name": "process_name", "pid": CPU_PID_BASE + int(cpu), "args": {"name": f"CPU {cpu}"}})
        out.append({"ph": "M", "name": "thread_name", "pid": CPU_PID_BASE + int(cpu), "tid": 1, "args": {"name": "tasks"}})
        out.append({"ph": "M", "name": "thread_name", "pid": CPU_PID_BASE + int(cpu), "tid": 2, "args": {"name": "interrupts"}})
    for pid, name in labels.items():
        out.append({"ph": "M", "name": "process_name", "pid": int(pid), "args": {"name": name}})
    for r in occ[occ.pid != 0].itertuples():
        name = labels.get(int(r.pid), f"{r.name} ({r.pid})")
        args = {"pid": int(r.pid), "cpu": int(r.cpu)}
        out.append({"ph": "X", "name": name, "cat": "sched", "pid": CPU_PID_BASE + int(r.cpu), "tid": 1,
                    "ts": _us(r.start_ns, base), "dur": (r.end_ns - r.start_ns) / 1000.0, "args": args})
        out.append({"ph": "X", "name": f"on CPU {r.cpu}", "cat": "sched", "pid": int(r.pid), "tid": int(r.pid),
                    "ts": _us(r.start_ns, base), "dur": (r.end_ns - r.start_ns) / 1000.0, "args": args})
    for r in ints.itertuples():
        out.append({"ph": "X", "name": f"{r.kind}: {r.name}", "cat": r.kind, "pid": CPU_PID_BASE + int(r.cpu), "tid": 2,
                    "ts": _us(r.start_ns, base), "dur": (r.end_ns - r.start_ns) / 1000.0})
    for j in jobs.itertuples():
        out.append({"ph": "X", "name": f"job {j.job}", "cat": "job", "pid": JOBS_PID, "tid": 1,
                    "ts": _us(j.start_ns, base), "dur": (j.end_ns - j.start_ns) / 1000.0,
                    "args": {"exec_ns": int(j.exec_ns), "response_ns": int(j.response_ns), "missed": bool(j.missed),
                             "cpu": int(j.cpu_start)}})
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": {"clock": "CLOCK_MONOTONIC", "base_ns": base}}


def write(events: pd.DataFrame, jobs: pd.DataFrame, labels: dict[int, str], path: Path) -> Path:
    safepath.write_text(path, json.dumps(build(events, jobs, labels)))
    return Path(path)
