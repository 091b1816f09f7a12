"""A run's kernel trace as an event table: `trace.dat` (the raw ring-buffer pages, trace/tracedat.py,
ns stamps) or, where the run fell back to it, the tracefs text rendering `trace.txt` parsed here.

Times are CLOCK_MONOTONIC ns, as in the job table (the text format carries microseconds,
rounded to the nearest; some events carry ns fields of their own: hrtimer `now`, `expires`).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from ..errors import Damaged
from . import tracedat

_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<sec>\d+)\.(?P<frac>\d+):\s+(?P<event>\w+):\s?(?P<args>.*)$")
_ARGS = {
    "sched_switch": re.compile(r"prev_comm=(?P<prev_comm>.*) prev_pid=(?P<prev_pid>\d+) prev_prio=(?P<prev_prio>-?\d+) "
                               r"prev_state=(?P<prev_state>\S+) ==> next_comm=(?P<next_comm>.*) next_pid=(?P<next_pid>\d+) "
                               r"next_prio=(?P<next_prio>-?\d+)"),
    "sched_wakeup": re.compile(r"comm=(?P<target_comm>.*) pid=(?P<target_pid>\d+) prio=(?P<prio>-?\d+) target_cpu=(?P<target_cpu>\d+)"),
    # sched_waking: the same fields, logged by the waker when it starts the wake-up.
    "sched_waking": re.compile(r"comm=(?P<target_comm>.*) pid=(?P<target_pid>\d+) prio=(?P<prio>-?\d+) target_cpu=(?P<target_cpu>\d+)"),
    "sched_migrate_task": re.compile(r"comm=(?P<target_comm>.*) pid=(?P<target_pid>\d+) prio=(?P<prio>-?\d+) "
                                     r"orig_cpu=(?P<orig_cpu>\d+) dest_cpu=(?P<dest_cpu>\d+)"),
    "sched_process_fork": re.compile(r"comm=(?P<parent_comm>.*) pid=(?P<parent_pid>\d+) child_comm=(?P<child_comm>.*) "
                                     r"child_pid=(?P<child_pid>\d+)"),
    "irq_handler_entry": re.compile(r"irq=(?P<irq>\d+) name=(?P<name>.*)"),
    "irq_handler_exit": re.compile(r"irq=(?P<irq>\d+) ret=(?P<ret>\w+)"),
    "softirq_entry": re.compile(r"vec=(?P<vec>\d+) \[action=(?P<name>\w+)\]"),
    "softirq_exit": re.compile(r"vec=(?P<vec>\d+) \[action=(?P<name>\w+)\]"),
    # `now` (kernels since 2.6.28) is the hrtimer base's clock when the interrupt began, in
    # ns: for a CLOCK_MONOTONIC timer, the mono clock at ns resolution (the line's own stamp
    # is in µs).
    "hrtimer_expire_entry": re.compile(r"hrtimer=(?P<hrtimer>\S+) function=(?P<name>\S+)(?: now=(?P<now>\d+))?"),
    # `softexpires`: the time asked for in ns (for an absolute sleep, the release itself);
    # `expires` adds the task's timer slack (none for real-time tasks).
    "hrtimer_start": re.compile(r"hrtimer=(?P<hrtimer>\S+) function=(?P<name>\S+) expires=(?P<expires>\d+)"
                                r"(?: softexpires=(?P<softexpires>\d+))?"),
    "hrtimer_expire_exit": re.compile(r"hrtimer=(?P<hrtimer>\S+)"),
}


FILES = ("trace.dat", "trace.txt")  # the raw capture, else the text fallback
TEXT_RESOLUTION_NS = 1000  # the text rendering's stamps: µs, rounded to the nearest


def trace_file(run_dir: Path) -> Path | None:
    """The run's kernel trace file (trace.dat preferred), or None when it has none."""
    return next((p for p in (Path(run_dir) / f for f in FILES) if p.exists()), None)


def table(rows, resolution_ns: int) -> pd.DataFrame:
    """Event rows (dicts) -> the event table, numeric fields as Int64, sorted by time;
    `attrs["resolution_ns"]`: its stamps' resolution (1 for trace.dat, 1000 for text)."""
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["ts_ns", "cpu", "comm", "pid", "event"])
        df.attrs["resolution_ns"] = resolution_ns
        return df
    for col in ("prev_pid", "next_pid", "target_pid", "parent_pid", "child_pid", "orig_cpu", "dest_cpu", "irq", "vec", "target_cpu", "now", "expires",
                "prev_prio", "next_prio", "prio",
                "softexpires"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    df = df.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    df.attrs["resolution_ns"] = resolution_ns
    return df


def parse_lines(lines) -> pd.DataFrame:
    """One row per event of a text trace: ts_ns, cpu, comm, pid, event, and the event's own fields."""
    rows = []
    for line in lines:
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        ev = m["event"]
        row = {"ts_ns": int(m["sec"]) * 1_000_000_000 + int(m["frac"].ljust(9, "0")[:9]), "cpu": int(m["cpu"]),
               "comm": m["comm"], "pid": int(m["pid"]), "event": ev}
        rx = _ARGS.get(ev)
        if rx is not None:
            a = rx.match(m["args"])
            if a:
                row.update(a.groupdict())
        rows.append(row)
    return table(rows, TEXT_RESOLUTION_NS)


def _dat(path: Path) -> pd.DataFrame:
    """A trace.dat's table; damage read around is said (`Damaged`), never raised: a header that
    cannot be read gives a table with no events, as an emptied text trace does."""
    try:
        td = tracedat.read(path)
    except tracedat.TraceDatError as e:
        warnings.warn(f"{e}; read as a trace with no events", Damaged, stacklevel=3)
        return table([], 1)
    df = table(list(tracedat.rows(td)), 1)
    lines = list(dict.fromkeys(td.damage))
    for line in lines[:3]:
        warnings.warn(line, Damaged, stacklevel=3)
    if len(lines) > 3:
        warnings.warn(f"{path}: {len(lines) - 3} more damaged events or pages left out", Damaged, stacklevel=3)
    return df


def parse_file(path: Path) -> pd.DataFrame:
    """The event table of a trace file: trace.dat (binary, by its magic) or a text trace."""
    path = Path(path)
    with open(path, "rb") as f:
        binary = f.read(len(tracedat.MAGIC)) == tracedat.MAGIC
    if binary:
        return _dat(path)
    if path.suffix == ".dat":
        warnings.warn(f"{path}: not a trace-cmd trace.dat (no magic: emptied or overwritten); read as a trace with no events",
                      Damaged, stacklevel=2)
        return table([], 1)
    with open(path, errors="replace") as f:
        return parse_lines(f)
