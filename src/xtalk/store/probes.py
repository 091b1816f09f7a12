"""User probes (include/xtalk/probe.h): probes.bin into samples on the job time base.

A sample is one begin/end pair of a probe id on one thread: its name, begin_ns, end_ns,
duration_ns, the CPU at each end. Besides begins and ends a program records marks (points in
time, e.g. its wake-up) and names (XTALK_PROBE_NAME); an experiment file names probes too. Only complete records are read (seq = slot + 1); the conversion from
processor ticks to CLOCK_MONOTONIC uses the reference pairs the agent took at both ends of
the run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..outcome import read_outcome
from .files import JobLogError

MAGIC = b"XTPROBE1"
RECORD = np.dtype([("seq", "<u8"), ("ticks", "<u8"), ("id", "<u4"), ("kind", "<u4"), ("cpu", "<u4"), ("tid", "<u4")])
#: Probe ids of the preload library (preload/xtalk_preload.c), by name.
PRELOAD_IDS = {1000: "read", 1001: "write", 1002: "pread", 1003: "pwrite", 1004: "open", 1005: "openat", 1006: "close",
               1007: "ioctl", 1008: "nanosleep", 1009: "clock_nanosleep", 1010: "usleep", 1011: "poll",
               1012: "pthread_mutex_lock", 1013: "pthread_cond_wait", 1014: "sem_wait"}


def _probes_of(run_dir: Path, app: str | None):
    """(directory of probes.bin, its time reference from run.json) of the victim (`app`
    None) or of application `app`."""
    meta = read_outcome(Path(run_dir))
    if app is None:
        return Path(run_dir), meta.probes if meta is not None else None
    entry = next((a for a in meta.applications if a.name == app), None) if meta is not None else None
    if entry is None:
        raise JobLogError(f"{run_dir}: run.json has no application named {app!r}")
    return Path(run_dir) / entry.dir, entry.probes


KINDS = np.array(["begin", "end", "mark", "name"])
KIND_NAME = 3


def _records(run_dir: Path, app: str | None):
    """The published records of probes.bin and the run's probe time reference."""
    where, probes = _probes_of(run_dir, app)
    raw = (where / "probes.bin").read_bytes()
    if len(raw) < 64 or raw[:8] != MAGIC:
        raise JobLogError(f"{where}/probes.bin: not an xtalk probe buffer")
    capacity, claimed = (int(x) for x in np.frombuffer(raw, "<u8", 2, 16)[[0, 1]])
    n = min(capacity, claimed, (len(raw) - 64) // RECORD.itemsize)
    rec = np.frombuffer(raw, RECORD, n, 64)
    return rec[rec["seq"] == np.arange(1, n + 1, dtype=np.uint64)], probes  # published records only


def read_probe_events(run_dir: Path, app: str | None = None) -> pd.DataFrame:
    """Every complete probe record of the victim (or of application `app`): ts_ns, id, kind
    (begin, end or mark), cpu, tid. Name records (XTALK_PROBE_NAME) are `read_probe_names`'."""
    rec, probes = _records(run_dir, app)
    rec = rec[rec["kind"] != KIND_NAME]
    if probes is None or probes.reference_end.ticks == probes.reference_start.ticks:
        raise JobLogError(f"{run_dir}: run.json has no probe time reference (the agent did not finish the run)")
    a, z = probes.reference_start, probes.reference_end
    ticks_per_ns = (z.ticks - a.ticks) / (z.mono_ns - a.mono_ns)
    ts = a.mono_ns + (rec["ticks"].astype(np.int64) - np.int64(a.ticks)) / ticks_per_ns
    return pd.DataFrame({"ts_ns": ts.round().astype(np.int64), "id": rec["id"].astype(np.int64),
                         "kind": KINDS[np.minimum(rec["kind"], 2)], "cpu": rec["cpu"].astype(np.int64),
                         "tid": rec["tid"].astype(np.int64)}).sort_values("ts_ns", kind="stable").reset_index(drop=True)


def read_probe_names(run_dir: Path, app: str | None = None) -> dict[int, str]:
    """The names the program gave its probes (XTALK_PROBE_NAME: 8 bytes of the name per
    record, at byte offset `cpu`); a damaged name is left out, never guessed."""
    rec, _ = _records(run_dir, app)
    rec = rec[rec["kind"] == KIND_NAME]
    parts: dict[int, dict[int, bytes]] = {}
    for r in rec:
        parts.setdefault(int(r["id"]), {})[int(r["cpu"])] = int(r["ticks"]).to_bytes(8, "little")
    out = {}
    for pid, chunks in parts.items():
        if sorted(chunks) != list(range(0, 8 * len(chunks), 8)):
            continue  # a chunk missing (a full buffer dropped it)
        try:
            name = b"".join(chunks[k] for k in sorted(chunks)).rstrip(b"\0").decode()
        except UnicodeDecodeError:
            continue
        if name:
            out[pid] = name
    return out


def probe_names(run_dir: Path, app: str | None, file_names: dict[str, str]) -> dict[int, str]:
    """Every probe id's name: the preload library's system calls, then the program's own
    names, then the experiment file's `probes` (which win)."""
    names = dict(PRELOAD_IDS)
    names.update(read_probe_names(run_dir, app))
    names.update({int(k): v for k, v in file_names.items()})
    return names


def probe_samples(events: pd.DataFrame, names: dict[int, str] | None = None) -> pd.DataFrame:
    """Pair begins and ends per (thread, probe id), innermost first (nesting allowed); `name`
    from `names` (id -> name; the preload library's by default), "" where unnamed."""
    names = PRELOAD_IDS if names is None else names
    rows = []
    for (tid, pid), g in events[events.kind != "mark"].groupby(["tid", "id"], sort=False):
        stack = []
        for r in g.itertuples():
            if r.kind == "begin":
                stack.append(r)
            elif stack:
                b = stack.pop()
                rows.append((int(pid), names.get(int(pid), ""), int(tid), b.cpu, r.cpu, b.ts_ns, r.ts_ns))
    df = pd.DataFrame(rows, columns=["probe", "name", "tid", "cpu_begin", "cpu_end", "begin_ns", "end_ns"])
    df["duration_ns"] = df.end_ns - df.begin_ns
    df["migrated"] = df.cpu_begin != df.cpu_end
    return df.sort_values("begin_ns").reset_index(drop=True)


def convert_probes(run_dir: Path, app: str | None = None, file_names: dict[str, str] | None = None) -> pd.DataFrame | None:
    """probes.bin -> probes.parquet (samples, named) for a run that has probes: the victim's
    in the run directory, application `app`'s in its own (applications/<app>/)."""
    from .files import write_parquet_atomic

    where = Path(run_dir) if app is None else _probes_of(run_dir, app)[0]
    if not (where / "probes.bin").exists():
        return None
    samples = probe_samples(read_probe_events(run_dir, app), probe_names(run_dir, app, file_names or {}))
    write_parquet_atomic(samples, where / "probes.parquet")
    return samples
