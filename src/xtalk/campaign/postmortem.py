"""Post-mortem of a run that failed or timed out: keep what explains it.

The run directory already holds the partial job log (jobs.bin / jobs.parquet) and the agent's
log. Added under `postmortem/`: the kernel log lines since the run's start (OOM kills, RCU
stalls, throttling), the tail of the kernel trace when the run had one, the tail of the
agent's log, and why the run ended (from run.json).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

from ..outcome import RunOutcome

TRACE_TAIL_LINES = 500
LOG_TAIL_LINES = 100


def _tail(path: Path, n: int) -> list[str]:
    with open(path, errors="replace") as f:
        return list(deque(f, maxlen=n))


def collect(run_dir: Path, meta: RunOutcome, kernel_lines: list[str]) -> Path:
    """Write the post-mortem files into `run_dir/postmortem` and return that directory."""
    pm = Path(run_dir) / "postmortem"
    pm.mkdir(exist_ok=True)
    (pm / "dmesg.txt").write_text("\n".join(kernel_lines) + ("\n" if kernel_lines else ""))
    trace = Path(run_dir) / "trace.txt"
    if trace.exists():
        (pm / "trace-tail.txt").write_text("".join(_tail(trace, TRACE_TAIL_LINES)))
    log = Path(run_dir) / "agent.log"
    if log.exists():
        (pm / "agent-log-tail.txt").write_text("".join(_tail(log, LOG_TAIL_LINES)))
    why = {"run_id": meta.run_id, "status": meta.status, "reason": meta.reason, "jobs_recorded": meta.jobs_recorded,
           "jobs_planned": meta.jobs_planned}
    (pm / "why.json").write_text(json.dumps(why, indent=2))
    return pm
