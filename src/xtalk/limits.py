"""Upper bounds of experiment and campaign files, checked before anything is expanded.

Every count that multiplies work (repetitions, scenarios, grid points, enemies, jobs) and
every number the agent turns into memory or time is bounded here, so that a file can never
make `plan` or `run` build millions of objects, and the host refuses what the agent would
(agent/src/bounds.rs holds them: the ones both sides check come from the agent's catalog,
src/xtalk/catalog.py). docs/experiments.md lists them.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from .catalog import limit

#: Bytes of an experiment or campaign file (a hand-written file is a few KiB).
MAX_FILE_BYTES = 1 << 20
#: Characters of a name (experiment, scenario, configuration, enemy): it becomes part of
#: directory names, which the file system limits to 255 bytes.
MAX_NAME = 64
#: Measured (and, separately, warm-up) jobs of one run: agent/src/bounds.rs MAX_JOBS.
MAX_JOBS: int = limit("max_jobs")
#: Enemies of one run: the agent's control block holds 256 (agent/src/launch/shm.rs).
MAX_ENEMIES: int = limit("max_enemies")
#: Repetitions of an experiment or a campaign.
MAX_REPETITIONS = 10_000
#: Scenarios of an experiment, configurations, and points of all grids of a campaign.
MAX_SCENARIOS = 1_000
MAX_CONFIGURATIONS = 100
MAX_GRID_POINTS = 256
#: Runs of one experiment or campaign (configurations x scenarios x repetitions).
MAX_RUNS = 100_000
#: Distinct run plans (configurations x scenarios; x applications x grid points in a
#: campaign): each is resolved and checked by the agent before anything runs, which must
#: take seconds, not minutes.
MAX_PLANS = 2_000
#: Settle time, at most one minute (the plan's settle_ms <= 60000).
MAX_SETTLE_NS = 60_000_000_000
#: Longest run and longest watchdog: agent/src/bounds.rs MAX_RUN_S, MAX_TIMEOUT_S.
MAX_RUN_S: int = int(limit("max_run_s"))
MAX_TIMEOUT_S: int = int(limit("max_timeout_s"))
#: Longest period or deadline (victim, tasks, AOCS instances): one hour.
MAX_PERIOD_NS: int = limit("max_period_ns")
#: The kernel's PID_MAX_LIMIT: pids.max refuses anything larger.
MAX_PIDS: int = limit("max_pids")
#: Highest CPU number anyone writes (the kernel's largest NR_CPUS); a range is never
#: expanded past it.
MAX_CPU = 8191
#: Bytes of a job record and of a record file's header (docs/results.md).
JOB_RECORD_BYTES = 80
HEADER_BYTES = 64


def record_bytes(victim) -> int:
    """Bytes of the record files of one run of `victim` (job log, counter log, probe
    buffer): staged in memory (tmpfs) during the run, then copied into the run directory."""
    v = victim
    jobs = v.jobs + v.warmup_jobs
    n = HEADER_BYTES + jobs * JOB_RECORD_BYTES
    if v.counters:
        n += HEADER_BYTES + jobs * (24 + 8 * len(v.counters))
    capacity = getattr(v.body, "probe_capacity", None)
    if capacity:
        n += HEADER_BYTES + capacity * 32
    return n


def check_memory(victim, available: int | None) -> str | None:
    """Why the records of a run of `victim` do not fit in half of `available` bytes of
    memory (the agent's rule), or None."""
    need = record_bytes(victim)
    if available and need > available // 2:
        field = "victim.probe_capacity" if getattr(victim.body, "kind", "") == "command" else "victim.jobs"
        return (f"{field}: the run's records need {need >> 20} MiB of memory (80 bytes per job) but the target has "
                f"{available >> 20} MiB available; lower it to fit in half of that")
    return None


def existing_parent(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (where a new directory would be made)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def results_need_bytes(plans) -> int:
    """Disk space the results of `plans` may take: each run's records twice (the raw files
    and their Parquet table) plus 1 MiB for run.json, logs and the plan."""
    return sum(2 * record_bytes(p.victim) + (1 << 20) for p in plans)


def check_results_space(base: Path, plans) -> str | None:
    """Why `base` (a results directory, made if missing) cannot hold the results of `plans`,
    or None."""
    where = existing_parent(base)
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return None
    need = results_need_bytes(plans)
    if need > free:
        return (f"results: the runs need about {math.ceil(need / 2**20)} MiB but {where} has {free >> 20} MiB free; "
                f"free space or give --results on another file system")
    return None
