"""The campaign run loop: a queue of runs, one worker thread per target, one run at a time
per target, every state change in the journal before and after it happens.

A target that does not answer gets its run back in the queue (journal `requeued`) and is
retried with a growing back-off while the other targets take the work (fail-over). When
every target has been down for `target_wait` seconds the campaign stops, says so, and can be
resumed later; nothing is lost.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import AgentError
from ..targets.base import TargetOut, TargetUnreachable
from .estimate import eta_seconds, human
from .execute import Interrupted, convert_published, execute_one, recover
from .grid import CampaignRun
from .journal import FINAL, Journal, states
from .layout import JOURNAL, CampaignLock, load

BACKOFF_S = (2, 5, 15, 30, 60)
#: Where lab boards keep what they said when they failed (targets/labgrid.py).
BOARDS = "boards"


@dataclass
class TargetState:
    """What one target is doing, for the progress display and `status`."""

    name: str
    doing: str = "idle"
    run: str | None = None
    since: float = field(default_factory=time.monotonic)
    down_since: float | None = None
    failures: int = 0
    retry_at: float = 0.0
    out: bool = False  # out of the campaign for good (targets.base.TargetOut)

    def line(self) -> str:
        if self.out:
            return f"{self.name}: OUT ({self.doing})"
        if self.down_since is not None:
            return f"{self.name}: DOWN ({self.doing}), retry in {max(0.0, self.retry_at - time.monotonic()):.0f} s"
        if self.run:
            return f"{self.name}: {self.run} ({time.monotonic() - self.since:.1f} s)"
        return f"{self.name}: {self.doing}"


class Executor:
    """Drive a campaign directory to its end on a list of targets."""

    def __init__(self, store: Path, targets: list, console: Console | None = None, kind: str = "local",
                 target_wait: float = 600.0, show_progress: bool = True):
        self.store = Path(store)
        self.targets = targets
        self.console = console or Console()
        self.kind = kind
        self.target_wait = target_wait
        self.show_progress = show_progress
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.queue: collections.deque[CampaignRun] = collections.deque()
        self.state = {t.name: TargetState(t.name) for t in targets}
        self.finished: list[dict] = []
        self.failed = 0
        self.error: BaseException | None = None
        self.gave_up: str | None = None
        self._running_plans: dict = {}

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> dict:
        """Run every run not yet finished; return the journal's final counts."""
        doc, runs = load(self.store)
        with CampaignLock(self.store), Journal(self.store / JOURNAL) as journal:
            self.journal = journal
            for note in recover(self.store, runs, journal):
                self.console.print(f"[dim]resume: {note}[/]")
            last = states(journal.events())
            self.finished = [e for e in last.values() if e.get("state") in FINAL]
            self.queue.extend(r for r in runs if last.get(r.run_id, {}).get("state") not in FINAL)
            total = len(runs)
            for t in self.targets:  # not between two runs: after the last one (convert_published)
                t.convert_after_run = False
                if hasattr(t, "log_dir"):  # a lab board keeps its boot log here when it fails
                    t.log_dir = self.store / BOARDS
            if not self.queue:
                convert_published(self.store)
                self.console.print(f"{self.store}: all {total} runs finished")
                return self._counts()
            self.console.print(f"[bold]{doc['name']}[/]: {len(self.queue)} of {total} runs to go, about "
                               f"{human(eta_seconds([r.plan for r in self.queue], self.finished, self.kind, len(self.targets)))}"
                               f" on {len(self.targets)} target(s) → {self.store}")
            workers = [threading.Thread(target=self._worker, args=(t,), name=f"target-{t.name}", daemon=True)
                       for t in self.targets]
            for w in workers:
                w.start()
            try:
                self._supervise(workers, total)
            except BaseException:
                self.stop.set()
                for t in self.targets:
                    interrupt = getattr(t, "interrupt", None)
                    if interrupt:
                        interrupt()
                for w in workers:
                    w.join(timeout=30)
                raise
            convert_published(self.store)
            if self.error:
                raise self.error
            if self.queue and not self.gave_up and all(s.out for s in self.state.values()):
                self.gave_up = "every target is out of the campaign"
            if self.gave_up:
                self.console.print(f"[red]{self.gave_up}[/]")
                raise AgentError(f"{self.gave_up}; {len(self.queue)} run(s) remain: "
                                 f"`xtalk campaign resume {self.store}` when a target answers")
            return self._counts()

    def _counts(self) -> dict:
        last = states(self.journal.events())
        c = collections.Counter(e["state"] for e in last.values())
        return {"done": c.get("done", 0), "failed": c.get("failed", 0),
                "remaining": sum(v for k, v in c.items() if k not in FINAL)}

    def _supervise(self, workers: list[threading.Thread], total: int) -> None:
        cols = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"), TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"), TextColumn("{task.fields[targets]}")]
        with Progress(*cols, console=self.console, disable=not self.show_progress, transient=False) as bar:
            task = bar.add_task("campaign", total=total, runs="", eta="?", targets="")
            while any(w.is_alive() for w in workers):
                with self.lock:
                    done = len(self.finished)
                    remaining = [r.plan for r in self.queue] + [self._plan_of(s.run) for s in self.state.values() if s.run]
                    eta = eta_seconds([p for p in remaining if p], self.finished, self.kind, len(self.targets))
                    lines = " | ".join(s.line() for s in self.state.values())
                    down = [s for s in self.state.values() if s.down_since is not None]
                    if self.queue and len(down) == len(self.state) and \
                            min(time.monotonic() - s.down_since for s in down) > self.target_wait:
                        self.gave_up = "no target answered for " + human(self.target_wait) + ": " + \
                                       "; ".join(f"{s.name}: {s.doing}" for s in down)
                        self.stop.set()
                bar.update(task, completed=done, runs=f"{done}/{total} ({self.failed} failed)", eta=human(eta), targets=lines)
                for w in workers:
                    w.join(timeout=0.2)
            bar.update(task, completed=len(self.finished), eta="0 s", targets="")

    def _plan_of(self, run_id):
        return self._running_plans.get(run_id)

    # -- one worker per target -----------------------------------------------------------
    def _take(self, target) -> CampaignRun:
        """The next run for ``target``: a lab board takes the runs of the kernel it booted
        first (a batch per boot, targets/labgrid.py), the queue's head otherwise. Call with
        the lock held."""
        wants = getattr(target, "wants", None)
        if wants is not None:
            for i, r in enumerate(self.queue):
                if wants(r.labels):
                    del self.queue[i]
                    return r
        return self.queue.popleft()

    def _in_flight_elsewhere(self, st: TargetState) -> bool:
        """Another target holds a run that may yet come back to the queue (its target may
        not answer). Call with the lock held."""
        return any(s.run for s in self.state.values() if s is not st)

    def _worker(self, target) -> None:
        st = self.state[target.name]
        while not self.stop.is_set():
            now = time.monotonic()
            if st.down_since is not None and now < st.retry_at:
                with self.lock:
                    if not self.queue and not self._in_flight_elsewhere(st):  # the others finished the work
                        return
                time.sleep(min(0.2, st.retry_at - now))
                continue
            with self.lock:
                if not self.queue:
                    # Done only when no run is out on another target: a target that does not
                    # answer puts its run back, and a worker gone by then would leave it to
                    # the dead target's back-off until target_wait gave up.
                    if not self._in_flight_elsewhere(st):
                        st.doing, st.run = "finished", None
                        return
                    run = None
                else:
                    run = self._take(target)
                    st.run, st.since, st.doing = run.run_id, time.monotonic(), "running"
                    self._running_plans[run.run_id] = run.plan
            if run is None:
                time.sleep(0.05)
                continue
            self.journal.append(run.run_id, "running", target=target.name)
            try:
                end = execute_one(self.store, run, target, self.kind)
            except TargetUnreachable as e:
                self.journal.append(run.run_id, "requeued", target=target.name, reason=f"target unreachable: {e}")
                with self.lock:
                    self.queue.appendleft(run)
                    st.failures += 1
                    st.down_since = st.down_since or time.monotonic()
                    st.retry_at = time.monotonic() + BACKOFF_S[min(st.failures - 1, len(BACKOFF_S) - 1)]
                    st.doing, st.run = str(e), None
                    self._running_plans.pop(run.run_id, None)
                    st.out = isinstance(e, TargetOut)
                if st.out:  # taking runs only to hand them back would hold them from the others
                    self.console.print(f"[yellow]target {target.name} is out of the campaign ({e}); "
                                       f"{run.run_id} back in the queue[/]")
                    return
                self.console.print(f"[yellow]target {target.name} does not answer ({e}); {run.run_id} back in the queue[/]")
                continue
            except Interrupted:
                with self.lock:
                    st.run = None
                return
            except BaseException as e:  # an internal error: stop cleanly, the journal stays coherent
                with self.lock:
                    self.error = e
                    self.stop.set()
                return
            self.journal.append(run.run_id, end.pop("state"), target=target.name, **end)
            with self.lock:
                self.finished.append({**end, "run": run.run_id})
                self._running_plans.pop(run.run_id, None)
                if end["status"] != "completed":
                    self.failed += 1
                    self.console.print(f"[yellow]run {run.run_id}: {end['status']}: {end['reason']} "
                                       f"(post-mortem in runs/{run.run_id}/postmortem)[/]")
                st.run, st.doing, st.down_since, st.failures = None, "idle", None, 0
