"""User-defined segments: per job of the victim, the time from one traced event to another
(`[[trace.segment]]`, plan.Segment), as the job-table column ``seg_<name>_ns``.

A job's window runs from its release to the next job's release (of the same task), or to its
own end where that comes later; the last job's runs to the end of the trace. A segment is a
pair of events: one that matches ``end`` and the latest before it, in trace order, that
matches ``start``, with no other ``end`` between them (so an interrupt → wake-up pair is the
interrupt that came last before the wake-up, and a wake-up → switch-in pair ends at the
switch-in that followed it, not at a later one after a preemption). A job's segment is its
first (``occurrence = "first"``) or last (``"last"``) pair that starts and ends in its window.
A job without one has no value (NA), never a zero or a pair borrowed from another job.

An end's filters: ``victim`` (the event was logged in the victim's own context: its pid is the
victim), and ``where`` (each field equals its value; the field as the event's format file
names it, ``common_pid`` the logging task, ``cpu`` the logging CPU; ``"$victim"`` the victim's pid). A field the
event's records do not carry matches nothing and is said in the notes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plan import VICTIM, Segment, SegmentEnd
from .tracedat import RENAME


def column(name: str) -> str:
    """The job-table column of segment `name`."""
    return f"seg_{name}_ns"


def _column_of(event: str, field: str) -> str:
    """The event table's column of an event's field (the text rendering's names: trace/parse.py)."""
    if field == "common_pid":
        return "pid"
    return RENAME.get(event, {}).get(field, field)


def matching(events: pd.DataFrame, end: SegmentEnd, victim: int, notes: list[str] | None = None) -> np.ndarray:
    """Row positions (ascending) of the events of ``events`` that ``end`` selects."""
    name = end.event.split(":")[-1]
    mask = (events["event"] == name).to_numpy(dtype=bool, copy=True)
    if end.victim:
        mask = mask & (pd.to_numeric(events["pid"], errors="coerce") == victim).fillna(False).to_numpy(dtype=bool)
    for field, value in end.where.items():
        col = _column_of(name, field)
        want = victim if value == VICTIM else value
        if col not in events.columns:
            if mask.any() and notes is not None:
                notes.append(f"{end.event}: its records carry no field '{field}' (a text trace carries the fields of "
                             "the sched, irq and timer events only); nothing matches")
            return np.zeros(0, dtype=np.int64)
        have = events[col]
        if isinstance(want, (int, np.integer)) and not isinstance(want, bool):
            hit = pd.to_numeric(have, errors="coerce") == want
        else:
            hit = have.astype("string") == str(want)
        mask = mask & hit.fillna(False).to_numpy(dtype=bool)
    return np.flatnonzero(mask)


def windows(jobs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) ns of each job's window, in the rows' order: its release to the next
    release of its task (``task`` where the table has one), or to its own end if later; the
    last job's window has no end (int64 max)."""
    rel = jobs["release_ns"].to_numpy(dtype=np.int64)
    end = jobs["end_ns"].to_numpy(dtype=np.int64)
    hi = np.full(len(jobs), np.iinfo(np.int64).max, dtype=np.int64)
    task = jobs["task"].to_numpy() if "task" in jobs.columns else np.zeros(len(jobs), dtype=np.int64)
    for t in np.unique(task):
        ix = np.flatnonzero(task == t)
        ix = ix[np.argsort(rel[ix], kind="stable")]
        hi[ix[:-1]] = np.maximum(rel[ix[1:]], end[ix[:-1]])
    return rel, hi


def pairs(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) row positions of the segments a trace holds: each ``end`` event with the
    latest ``start`` event before it, when no other ``end`` came between them (each start in
    one pair at most). Both inputs ascending; so are the outputs."""
    k = np.searchsorted(start, end, side="left") - 1  # the latest start before each end
    prev = np.concatenate([[-1], end[:-1]])
    ok = (k >= 0) & (start[np.maximum(k, 0)] > prev) if start.size else np.zeros(end.size, dtype=bool)
    return start[k[ok]], end[ok]


def lengths(events: pd.DataFrame, jobs: pd.DataFrame, victim: int, segments: list[Segment],
            notes: list[str] | None = None) -> pd.DataFrame:
    """One row per job of ``jobs`` (``job``, ``release_ns``, ``end_ns``, optional ``task``):
    ``job`` and one ``seg_<name>_ns`` column (Int64, NA where the job has no such pair) per
    segment. ``events``: the run's event table (trace/parse.py, sorted by time); ``victim``:
    the victim's pid (its traced thread). Fields no record carries are said in ``notes``."""
    out = pd.DataFrame({"job": jobs["job"].to_numpy()})
    lo, hi = windows(jobs)
    ts = events["ts_ns"].to_numpy(dtype=np.int64) if len(events) else np.zeros(0, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    for seg in segments:
        s_pos, e_pos = pairs(matching(events, seg.start, victim, notes) if len(events) else none,
                             matching(events, seg.end, victim, notes) if len(events) else none)
        s_ts, e_ts = ts[s_pos], ts[e_pos]
        # The job's pairs start in [lo, hi) and end before hi: [a, c] (ends ascend with starts).
        a = np.searchsorted(s_ts, lo, side="left")
        c = np.minimum(np.searchsorted(s_ts, hi, side="left"), np.searchsorted(e_ts, hi, side="left")) - 1
        ok = a <= c
        pick = np.clip(a if seg.occurrence == "first" else c, 0, max(len(s_ts) - 1, 0))
        val = (e_ts[pick] - s_ts[pick]) if len(s_ts) else np.zeros(len(jobs), dtype=np.int64)
        out[column(seg.name)] = pd.array(np.where(ok, val, 0), dtype="Int64")
        out.loc[~ok, column(seg.name)] = pd.NA
    return out
