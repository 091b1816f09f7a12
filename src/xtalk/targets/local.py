"""Run one plan on this machine through the agent.

The agent runs in its own session (the terminal's Ctrl-C reaches only `xtalk`), with
`--exit-with-parent` so that even a SIGKILL of `xtalk` tears the run down. On SIGINT or
SIGTERM `xtalk` forwards SIGTERM and waits for the agent to stop and reap every child.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from ..plan import Plan
from ..store import read_run_json
from ..store.jobs import convert_run

#: How long the agent gets to tear a run down after SIGTERM before it is killed.
TEARDOWN_GRACE_S = 20


def _write_failed(run_dir: Path, plan: Plan, reason: str, previous: dict | None) -> dict:
    meta = dict(previous or {"run_id": plan.run_id, "plan": json.loads(plan.to_json())})
    meta["status"] = "failed"
    meta["reason"] = reason
    tmp = run_dir / "run.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    tmp.replace(run_dir / "run.json")
    return meta


def run_plan(plan: Plan, run_dir: Path, agent: Path) -> dict:
    """Execute `plan` with results in `run_dir` (created here); return run.json's content.

    KeyboardInterrupt (SIGINT, or SIGTERM mapped to it by the CLI) stops the agent cleanly,
    keeps what it recorded and propagates."""
    run_dir.mkdir(parents=True, exist_ok=False)
    plan_path = run_dir / "plan.json"
    plan_path.write_text(plan.to_json())
    cmd = [str(agent), "run", str(plan_path), "--out", str(run_dir), "--exit-with-parent"]
    with open(run_dir / "agent.log", "wb") as log:
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
            convert_run(run_dir)
            raise
    meta = read_run_json(run_dir)
    if meta is None or meta.get("status") == "running":
        text = (run_dir / "agent.log").read_text(errors="replace").strip().splitlines()
        why = text[-1] if text else f"agent exited with {rc}"
        meta = _write_failed(run_dir, plan, f"agent ended abnormally (exit {rc}): {why}", meta)
    convert_run(run_dir)
    return meta
