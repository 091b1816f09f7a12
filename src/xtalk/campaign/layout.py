"""A campaign's directory in the results store, and how it comes into being atomically.

    RESULTS/<name>-<stamp>/
      campaign.toml          the file as given
      campaign.json          the resolved campaign: every run's id, labels and plan, in order
      journal.jsonl          every run's state changes (journal.py)
      runs/<run_id>/         finished runs (completed, failed or timed out), renamed in whole
      staging/<run_id>/      the run in progress on a target; queries never look here
      attempts/<run_id>.<k>/ what an interrupted attempt left, moved aside before the re-run
      .lock                  held (flock) by the one process driving the campaign

The directory is built under a hidden temporary name and renamed once campaign.json and the
journal's `planned` lines are on disk, so a kill during creation leaves no half campaign.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import shutil
from pathlib import Path

from .. import safepath
from ..errors import UsageError
from ..plan import Plan
from .grid import CampaignRun, Expansion
from .journal import Journal

CAMPAIGN_JSON = "campaign.json"
JOURNAL = "journal.jsonl"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    safepath.write_text(path, text, fsync=True)


CREATING = ".creating-"


def _remove_abandoned(base: Path) -> None:
    """Remove what creations killed midway left (their pid is in the name and dead): never a
    campaign, it was not renamed yet; a live creator's own directory is left alone."""
    for d in base.glob(f".*{CREATING}*"):
        pid = d.name.rsplit(CREATING, 1)[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def create(base: Path, name: str, text: str, expansion: Expansion, meta: dict) -> Path:
    """Create the campaign directory with its plan and journal; return its path. Built under
    a name of this process's own (two drivers started in the same second, or one started
    again after a kill during creation, never meet) and renamed to the first free name."""
    base = Path(base)
    safepath.makedirs(base)
    _remove_abandoned(base)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    tmp = base / f".{name}-{stamp}{CREATING}{os.getpid()}"
    safepath.mkdir(tmp)
    safepath.mkdir(tmp / "runs")
    safepath.write_text(tmp / "campaign.toml", text)
    doc = {**meta, "runs": [{"run_id": r.run_id, "labels": r.labels, "plan": json.loads(r.plan.to_json())}
                            for r in expansion.runs],
           "excluded": [{"labels": lb, "reason": why} for lb, why in expansion.excluded]}
    write_atomic(tmp / CAMPAIGN_JSON, json.dumps(doc, indent=1))
    with Journal(tmp / JOURNAL) as j:
        j.append_many([{"run": r.run_id, "state": "planned"} for r in expansion.runs])
    fsync_dir(tmp)
    for k in range(10_000):
        final = base / (f"{name}-{stamp}" if k == 0 else f"{name}-{stamp}-{k}")
        if final.exists():
            continue
        try:
            safepath.rename(tmp, final)  # refused onto a campaign made since (not empty): try the next name
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue
        fsync_dir(base)
        return final
    raise UsageError(f"{base}: 10000 campaigns named {name} created in the second {stamp}; give another --results")


def is_campaign(path: Path) -> bool:
    return (Path(path) / CAMPAIGN_JSON).is_file() and (Path(path) / JOURNAL).is_file()


def load(path: Path) -> tuple[dict, list[CampaignRun]]:
    """campaign.json and its runs, in execution order."""
    path = Path(path)
    if not is_campaign(path):
        raise UsageError(f"{path}: not a campaign directory (no {CAMPAIGN_JSON} or {JOURNAL}); "
                         "give the directory `xtalk campaign run` printed")
    doc = json.loads((path / CAMPAIGN_JSON).read_text())
    runs = [CampaignRun(r["run_id"], r["labels"], Plan.model_validate(r["plan"])) for r in doc["runs"]]
    return doc, runs


class CampaignLock:
    """An exclusive flock on DIR/.lock: one driver per campaign. A killed holder releases it
    with its file descriptors, so a crash never leaves the campaign locked."""

    def __init__(self, path: Path):
        self.path = Path(path) / ".lock"
        self.fd = -1

    def __enter__(self):
        self.fd = safepath.open_fd(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip()
            os.close(self.fd)
            raise UsageError(f"{self.path.parent}: this campaign is being run by another xtalk (pid {holder or '?'}); "
                             "watch it with `xtalk campaign status`") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
