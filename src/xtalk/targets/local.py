"""Run one plan on this machine through the agent.

The agent runs in its own session (the terminal's Ctrl-C reaches only `xtalk`), with
`--exit-with-parent` so that even a SIGKILL of `xtalk` tears the run down. On SIGINT or
SIGTERM `xtalk` forwards SIGTERM and waits for the agent to stop and reap every child.

Every run holds the machine-wide target lock (`lock.target_lock`), whichever command started
it, so two experiments on one machine take turns run by run and never overlap. An agent that
did not finish its own teardown (killed by a signal, or ending without a final run.json) has
left its changes on the machine: the host runs `xtalk-agent recover` at once, while it still
holds the lock, and says what was restored.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import safepath
from ..plan import Plan
from .agent import recover
from .lock import target_lock
from . import settings as machine_settings

if TYPE_CHECKING:  # the outcome's models: built at the first run, not by `xtalk plan`
    from ..outcome import RunOutcome

#: How long the agent gets to tear a run down after SIGTERM before it is killed.
TEARDOWN_GRACE_S = 20


def _write_failed(run_dir: Path, plan: Plan, reason: str, previous: RunOutcome | None, restored: list[str]) -> RunOutcome:
    """Mark a run the agent did not finish failed, keeping what it wrote, with what recovery
    restored."""
    from ..outcome import parse_outcome, write_outcome

    base = previous or parse_outcome({"run_id": plan.run_id, "plan": json.loads(plan.to_json()), "status": "failed"})
    return write_outcome(run_dir, base.model_copy(update={"status": "failed", "reason": reason, "restored": restored}))


def _say(line: str) -> None:
    print(f"xtalk: {line}", file=sys.stderr, flush=True)


def restore_after_dead_agent(agent: Path, run_id: str, say: Callable[[str], None] = _say) -> list[str]:
    """Undo what a dead agent left on the machine (its journal); say and return each
    restored change as `restored: ...`."""
    lines = [f"restored: {line}" for line in recover(agent)]
    if not lines:
        lines = ["agent recovery ran: nothing was left to restore"]
    for line in lines:
        say(f"run {run_id}: {line}")
    return lines


def convert_run(run_dir: Path):
    """store/jobs.py's `convert_run`, imported when a run has ended: it brings pandas, which
    a command that only plans, or has not yet started its first run, does not need."""
    from ..store.jobs import convert_run as convert

    return convert(run_dir)


def with_settings(run_dir: Path, meta: RunOutcome, before: dict[str, str], after: dict[str, str]) -> RunOutcome:
    """The run's outcome with its settings snapshots written into run.json; a run whose settings
    drifted is marked invalid with the drift as its reason (targets/settings.py)."""
    from ..outcome import parse_outcome, write_outcome

    drift = machine_settings.diff(before, after)
    update: dict = {"settings": {"before": before, "after": after, "drift": drift}}
    if drift:
        update["invalid"] = machine_settings.drift_reason(drift)
    return write_outcome(run_dir, parse_outcome({**meta.to_dict(), **update}))


def run_plan(plan: Plan, run_dir: Path, agent: Path, say: Callable[[str], None] = _say, convert: bool = True,
             watch: list[str] | tuple[str, ...] = ()) -> RunOutcome:
    """Execute `plan` with results in `run_dir` (created here) while holding the machine;
    return the run's outcome (its run.json). ``convert``: write jobs.parquet before returning
    (a campaign converts its runs after the last one instead).

    KeyboardInterrupt (SIGINT, or SIGTERM mapped to it by the CLI) stops the agent cleanly,
    keeps what it recorded and propagates. The settings are read before and after, under the lock
    (``watch``: user-listed files besides the defaults); drift marks the run invalid."""
    with target_lock(say=say):
        before = machine_settings.snapshot_local(watch)
        meta = _run_locked(plan, run_dir, agent, say, convert)
        return with_settings(run_dir, meta, before, machine_settings.snapshot_local(watch))


def _run_locked(plan: Plan, run_dir: Path, agent: Path, say: Callable[[str], None], convert: bool = True) -> RunOutcome:
    from ..outcome import write_outcome  # before the agent starts: nothing to import on a signal
    from ..store import run_outcome

    safepath.makedirs(run_dir, exist_ok=False)
    plan_path = run_dir / "plan.json"
    safepath.write_text(plan_path, plan.to_json())
    cmd = [str(agent), "run", str(plan_path), "--out", str(run_dir), "--exit-with-parent"]
    with safepath.open_new(run_dir / "agent.log") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=TEARDOWN_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                restore_after_dead_agent(agent, plan.run_id, say)
            convert_run(run_dir)
            raise
    meta = run_outcome(run_dir)
    unfinished = meta is None or meta.status == "running"
    if rc < 0 or unfinished:
        restored = restore_after_dead_agent(agent, plan.run_id, say)
        if unfinished:
            text = (run_dir / "agent.log").read_text(errors="replace").strip().splitlines()
            how = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
            why = text[-1] if text else f"agent exited with {rc}"
            meta = _write_failed(run_dir, plan, f"agent ended abnormally ({how}): {why}", meta, restored)
        else:
            meta = write_outcome(run_dir, meta.model_copy(update={"restored": restored}))
    if convert:
        convert_run(run_dir)
    return meta


def agents_writing(staging: Path) -> list[int]:
    """Pids of agents (on this host) still writing into `staging`: whoever must stop or wait
    for a run (an interrupt, a campaign resuming after a crash) finds its agent here."""
    needle = str(Path(staging).resolve()).encode()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmd and b"xtalk-agent" in cmd.split(b"\0", 1)[0]:
            pids.append(int(d.name))
    return pids
