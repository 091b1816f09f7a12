"""`xtalk campaign status DIR`: where a campaign stands, read from its journal alone, so it
works from another terminal while the campaign runs (or after it died)."""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .estimate import eta_seconds, human
from .journal import FINAL, read, states
from .layout import JOURNAL, load


@dataclass
class Status:
    name: str
    total: int
    done: int
    failed: int
    remaining: int
    running: list[tuple[str, str, float]]  # run, target, seconds so far
    eta_s: float
    driver: str  # "running (pid N)" or "not running"
    targets: dict[str, str] = field(default_factory=dict)
    recent_failures: list[tuple[str, str]] = field(default_factory=list)
    excluded: int = 0

    def lines(self) -> list[str]:
        out = [f"{self.name}: {self.done} done, {self.failed} failed, {self.remaining} remaining of {self.total}"
               f" ({self.excluded} excluded as infeasible); driver {self.driver}"]
        if self.remaining:
            out.append(f"ETA {human(self.eta_s)}" + ("" if self.driver.startswith("running") else
                                                      " once resumed (`xtalk campaign resume DIR`)"))
        live = self.driver.startswith("running")
        for run, target, secs in self.running:
            # Without a driver a `running` line is an attempt a kill interrupted: resume redoes it.
            out.append(f"  running on {target}: {run} for {secs:.1f} s" if live else
                       f"  interrupted on {target}: {run} (re-run on resume)")
        for name, state in sorted(self.targets.items()):
            out.append(f"  target {name}: {state}")
        for run, why in self.recent_failures:
            out.append(f"  failed {run}: {why}")
        return out


def driver_state(store: Path) -> str:
    """Whether an xtalk process holds the campaign lock (without disturbing it)."""
    p = Path(store) / ".lock"
    if not p.exists():
        return "not running"
    fd = os.open(p, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = p.read_text().strip()
            return f"running (pid {pid})"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return "not running"
    finally:
        os.close(fd)


def status(store: Path) -> Status:
    doc, runs = load(store)
    events = read(Path(store) / JOURNAL)
    last = states(events)
    now = time.time()
    by_id = {r.run_id: r for r in runs}
    finished = [e for e in last.values() if e.get("state") in FINAL]
    running = [(rid, e.get("target", "?"), now - e["t"]) for rid, e in last.items() if e.get("state") == "running"]
    remaining = [by_id[rid].plan for rid, e in last.items() if e.get("state") not in FINAL and rid in by_id]
    targets: dict[str, str] = {}
    for e in events:  # the latest word on every target
        t = e.get("target")
        if not t:
            continue
        if e.get("state") == "requeued" and "unreachable" in str(e.get("reason", "")):
            targets[t] = f"not answering since {time.strftime('%H:%M:%S', time.localtime(e['t']))}: {e['reason']}"
        elif e.get("state") in ("running", "done", "failed"):
            targets[t] = "answering"
    n_targets = max(1, len({e.get("target") for e in events if e.get("state") == "running"}))
    kind = doc.get("kind", "local")
    return Status(
        name=doc["name"], total=len(runs),
        done=sum(e["state"] == "done" for e in finished), failed=sum(e["state"] == "failed" for e in finished),
        remaining=len(remaining), running=running,
        eta_s=eta_seconds(remaining, finished, kind, n_targets), driver=driver_state(store), targets=targets,
        recent_failures=[(e["run"], f"{e.get('status')}: {e.get('reason')}") for e in finished if e["state"] == "failed"][-5:],
        excluded=len(doc.get("excluded", [])))
