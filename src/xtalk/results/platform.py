"""The machine a results directory was measured on: kernel (release, PREEMPT_RT or not),
hypervisor, hardware PMU, the counters asked for and those the agent skipped, and how many
jobs migrated between CPUs (report/platform.py renders them).

Everything comes from each run's outcome (run.json as the loaded ReportData holds it: the
agent's environment document and its `counters` block) and from the job table
(``cpu_start`` / ``cpu_end``). A migrated job's counter deltas mix two CPUs' per-core
counters and are meaningless (SPEC §2, seed 000 §6.7.2), so the counter statistics exclude
them with :func:`exclude_migrated`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.cells import label_codes
from ..analysis.runorder import stretch_starts
from ..outcome import Environment, Kernel, RunOutcome, Virtualization
from ..store.frames import ReportData

#: Units of the counters the agent reads in software (perf software events) and of the usual
#: hardware events; anything else is a count of events per job.
COUNTER_UNITS = {"task_clock": "ns", "cpu_clock": "ns", "context_switches": "switches", "cpu_migrations": "migrations",
                 "page_faults": "faults", "minor_faults": "faults", "major_faults": "faults",
                 "alignment_faults": "faults", "emulation_faults": "faults", "cycles": "cycles",
                 "cpu_cycles": "cycles", "instructions": "instructions"}


def counter_unit(column: str) -> str:
    """The unit of a ``ctr_*`` column's per-job delta ("ns", "faults", ... or "events")."""
    return COUNTER_UNITS.get(column.removeprefix("ctr_"), "events")


def migrated(jobs: pd.DataFrame) -> np.ndarray:
    """Boolean mask of jobs that ended on another CPU than they started on (a job whose end
    CPU was not read, or that never ran, is not counted as migrated)."""
    if "cpu_start" not in jobs or "cpu_end" not in jobs:
        return np.zeros(len(jobs), dtype=bool)
    a, b = (_cpus(jobs[c]) for c in ("cpu_start", "cpu_end"))
    return (a >= 0) & (b >= 0) & (a != b)


def _cpus(column: pd.Series) -> np.ndarray:
    """A CPU column as numbers: integer columns as they are (the loader's: no float copy of
    10^7 values), others coerced (a missing or unreadable CPU is NaN: never >= 0)."""
    values = column.to_numpy()
    if values.dtype.kind in "iu":
        return values
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)


def exclude_migrated(jobs: pd.DataFrame) -> pd.DataFrame:
    """``jobs`` without the migrated ones (for counter statistics)."""
    m = migrated(jobs)
    return jobs[~m] if m.any() else jobs


def run_metas(data: ReportData) -> list[RunOutcome]:
    """The outcome (run.json) of every run that has one, in run order (read once, when the
    ReportData was loaded)."""
    return data.metas()


def migration_table(data: ReportData) -> pd.DataFrame:
    """Per scenario and configuration (in order of first appearance): measured jobs, migrated
    jobs, their share. Counted on the labels' codes and kept per ReportData (the section, the
    facts and the Markdown summary all ask): turning 10^7 categorical labels into strings
    to group them cost about ten seconds each time."""
    if "_migrations" not in data.memo:
        data.memo["_migrations"] = _migration_table(data.measured)
    return data.memo["_migrations"].copy()


def _migration_table(j: pd.DataFrame) -> pd.DataFrame:
    if j.empty:
        return pd.DataFrame(columns=["scenario", "configuration", "jobs", "migrated", "migrated_pct"])
    sc_codes, sc = label_codes(j["scenario"])
    cf_codes, cf = label_codes(j["configuration"])
    moved = migrated(j)
    if (sc_codes >= 0).all() and (cf_codes >= 0).all():
        # Jobs come in runs: count per stretch of one (scenario, configuration), not per job
        # (no 10^7 keys, no bincount of them); a table whose labels change often is counted
        # per job below. The same counts, the same order of first appearance.
        starts = np.flatnonzero(np.concatenate([[True], (sc_codes[1:] != sc_codes[:-1]) | (cf_codes[1:] != cf_codes[:-1])]))
        if starts.size <= max(64, sc_codes.size // 64):
            skey = sc_codes[starts].astype(np.int64) * len(cf) + cf_codes[starts]
            sizes = np.diff(np.append(starts, sc_codes.size))
            n = np.bincount(skey, weights=sizes, minlength=len(sc) * len(cf)).astype(np.int64)
            k = np.bincount(skey, weights=np.add.reduceat(moved, starts, dtype=np.int64),
                            minlength=len(sc) * len(cf)).astype(np.int64)
            return _migration_rows(sc, cf, n, k, skey)
    key = sc_codes.astype(np.int64) * len(cf) + cf_codes
    labelled = (sc_codes >= 0) & (cf_codes >= 0)  # a job without a label is in no row
    if not labelled.all():
        key, moved = key[labelled], moved[labelled]
    n = np.bincount(key, minlength=len(sc) * len(cf))
    k = np.bincount(key, weights=moved, minlength=len(sc) * len(cf)).astype(np.int64)
    return _migration_rows(sc, cf, n, k, key[stretch_starts(key)])


def _migration_rows(sc, cf, n: np.ndarray, k: np.ndarray, stretch_keys: np.ndarray) -> pd.DataFrame:
    """The table's rows from the jobs (``n``) and migrated jobs (``k``) per key, in order of
    first appearance: a key's first stretch (jobs come in runs: a few places, not a sort of
    every job's key)."""
    uniq, first = np.unique(stretch_keys, return_index=True)
    rows = [{"scenario": str(sc[uniq[i] // len(cf)]), "configuration": str(cf[uniq[i] % len(cf)]), "jobs": int(n[uniq[i]]),
             "migrated": int(k[uniq[i]]), "migrated_pct": 100.0 * k[uniq[i]] / n[uniq[i]]} for i in np.argsort(first, kind="stable")]
    return pd.DataFrame(rows)


def _kernel(k: Kernel) -> str:
    rt = "PREEMPT_RT" if k.preempt_rt else "not PREEMPT_RT"
    parts = [f"{k.release} {k.machine}".strip(), f"({rt}, HZ={k.hz or '?'})"]
    if k.version:
        parts.append(f"— uname -v: {k.version}")
    return " ".join(parts)


def _virt(v: Virtualization) -> str:
    s = f"yes: hypervisor {v.vendor or '?'}" if v.hypervisor else "no hypervisor detected (bare metal)"
    s += ", inside a container" if v.container else ""
    return s + (f"; emulated: {v.emulated} (timings prove function, not performance)" if v.emulated else "")


def facts(data: ReportData) -> dict:
    """The platform facts of the results: kernel, virtualization, PMU, counters requested,
    read and skipped (with the agent's reason), migrated jobs. Keys are stable (tests and
    the Markdown summary read them)."""
    metas = run_metas(data)
    env: Environment | None = next((m.environment for m in metas if m.environment), None)
    requested, skipped, core_pmu = [], {}, None
    for m in metas:
        if m.counters is None:
            continue
        for name in m.counters.events:
            if name not in requested:
                requested.append(name)
        for s in m.counters.skipped:
            skipped.setdefault(s.event, s.reason)
        core_pmu = core_pmu or m.counters.core_pmu
    core_pmu = core_pmu or (env.capabilities.pmu.core_pmu if env else None)
    mt = migration_table(data)
    unknown = "unknown (no environment in run.json)"
    return {
        "kernel": _kernel(env.kernel) if env else unknown,
        "preempt_rt": env.kernel.preempt_rt if env else None,
        "virtualization": _virt(env.virtualization) if env else unknown,
        "hypervisor": env.virtualization.hypervisor if env else None,
        "cpu": f"{env.cpu.model or '?'} × {env.cpu.count}" if env else "unknown",
        "clocksource": (env.clocksource.current if env else None) or "unknown",
        "pmu": core_pmu,
        "pmu_line": (f"hardware PMU {core_pmu}" if core_pmu else
                     "no hardware PMU: hardware counters (cache misses, bus accesses…) cannot be read here; "
                     "only the kernel's software events are counted") if env or core_pmu else "unknown",
        "counters_requested": [n for n in requested if n],
        "counters_read": list(data.counters),
        "counters_skipped": skipped,
        "jobs": int(mt["jobs"].sum()) if len(mt) else 0,
        "migrated": int(mt["migrated"].sum()) if len(mt) else 0,
    }
