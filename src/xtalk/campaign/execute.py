"""One run of a campaign, from staging to its final place in the store.

The run is written under `staging/<id>` and renamed to `runs/<id>` only once it has ended
(completed, failed or timed out), so `runs/` only ever holds whole runs. Its job log
(jobs.bin, readable as it is) is converted to jobs.parquet after the campaign's last run
(`convert_published`), not between two runs; a reader of the store converts what is left. `recover` puts a campaign back in order after a kill at any instant.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from .. import safepath
from ..store import run_outcome
from ..targets.local import agents_writing
from . import postmortem
from .estimate import run_seconds
from .grid import CampaignRun
from .journal import FINAL, Journal, states
from .layout import fsync_dir

FINAL_STATUS = {"completed": "done", "failed": "failed", "timeout": "failed"}


class Interrupted(Exception):
    """The run was stopped before its end (interrupt, shutdown); it will be run again."""


def attempt(staging: Path, run: CampaignRun, target, kind: str = "local") -> dict:
    """Run `run` on `target` into `staging` (created here), with a post-mortem when it did
    not complete; return the journal fields of its end. Raises TargetUnreachable (nothing
    ran) or Interrupted (the attempt stays where it is; `recover` moves it aside)."""
    start_wall, start_target = time.monotonic(), target.clock()
    started = time.time()
    meta = target.run(run.plan, staging)
    seconds = time.monotonic() - start_wall
    status = meta.status
    if status not in FINAL_STATUS:
        raise Interrupted(f"{run.run_id}: {status}: {meta.reason}")
    if status != "completed":
        postmortem.collect(staging, meta, target.kernel_log_since(start_target))
    return {"state": FINAL_STATUS[status], "status": status, "reason": meta.reason, "jobs": meta.jobs_recorded,
            "seconds": round(seconds, 3), "expected": round(run_seconds(run.plan, kind), 3),
            "started": round(started, 3), "ended": round(time.time(), 3)}


def publish(store: Path, staging: Path, run_id: str) -> Path:
    """Rename a finished attempt to runs/<id>: the run appears whole or not at all."""
    final = Path(store) / "runs" / run_id
    if final.exists():  # a previous attempt's whole run: keep it aside rather than merge
        move_aside(store, final)
    fsync_dir(staging)
    safepath.rename(staging, final)
    fsync_dir(final.parent)
    return final


def execute_one(store: Path, run: CampaignRun, target, kind: str = "local") -> dict:
    """Attempt `run` under staging/<id> on `target`, then publish it in runs/."""
    store = Path(store)
    staging = store / "staging" / run.run_id
    safepath.makedirs(staging.parent)
    if staging.exists():
        move_aside(store, staging)
    end = attempt(staging, run, target, kind)
    publish(store, staging, run.run_id)
    return end


def convert_published(store: Path) -> int:
    """Write jobs.parquet for every run in runs/ whose job log has none yet (or a newer one):
    the campaign's runs are converted after the last run, not between two of them. A log that
    cannot be read is left as it is (readers list the run without jobs). Returns the runs
    converted."""
    from ..store.files import JobLogError
    from ..store.jobs import convert_run, needs_conversion

    n = 0
    runs = Path(store) / "runs"
    for d in sorted(runs.iterdir()) if runs.is_dir() else ():
        if not needs_conversion(d):
            continue
        try:
            convert_run(d)
            n += 1
        except JobLogError:
            pass
    return n


def move_aside(store: Path, path: Path) -> Path:
    """Rename a half-written run directory to attempts/<id>.<k> (kept for inspection)."""
    attempts = Path(store) / "attempts"
    safepath.makedirs(attempts)
    k = 0
    while (attempts / f"{path.name}.{k}").exists():
        k += 1
    dest = attempts / f"{path.name}.{k}"
    safepath.rename(path, dest)
    return dest


def wait_for_agents(staging: Path, timeout: float = 30.0) -> None:
    """A killed xtalk's agent stops on its own (parent-death signal); wait for it so two runs
    never overlap on the target, and kill it if it lingers."""
    end = time.monotonic() + timeout
    while agents_writing(staging) and time.monotonic() < end:
        time.sleep(0.05)
    for pid in agents_writing(staging):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while agents_writing(staging) and time.monotonic() < end + 5:
        time.sleep(0.05)


def recover(store: Path, runs: list[CampaignRun], journal: Journal) -> list[str]:
    """Reconcile the journal, runs/ and staging/ after an interruption; return what was done.

    - a run renamed into runs/ whose end the journal missed is recorded (not re-run);
    - anything left in staging/ is moved to attempts/ and its run goes back to the queue."""
    store = Path(store)
    notes = []
    last = states(journal.events())
    staging = store / "staging"
    if staging.is_dir():
        wait_for_agents(staging)
        for d in sorted(staging.iterdir()):
            dest = move_aside(store, d)
            notes.append(f"{d.name}: interrupted attempt moved to {dest.relative_to(store)}")
            rid = d.name.split("@", 1)[0]  # cluster attempts are named <id>@<session>
            if last.get(rid, {}).get("state") == "running":
                journal.append(rid, "requeued", reason="interrupted attempt")
    for r in runs:
        state = last.get(r.run_id, {}).get("state")
        if state in FINAL:
            continue
        final = store / "runs" / r.run_id
        meta = run_outcome(final) if final.is_dir() else None
        if meta and meta.status in FINAL_STATUS:
            journal.append(r.run_id, FINAL_STATUS[meta.status], status=meta.status, reason=meta.reason,
                           jobs=meta.jobs_recorded, recovered=True)
            notes.append(f"{r.run_id}: finished before the interruption; recorded")
        elif final.exists():
            dest = move_aside(store, final)
            notes.append(f"{r.run_id}: unfinished directory moved to {dest.relative_to(store)}")
    return notes
