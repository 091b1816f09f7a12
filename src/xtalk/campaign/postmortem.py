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

from .. import safepath
from ..outcome import RunOutcome

TRACE_TAIL_LINES = 500
LOG_TAIL_LINES = 100


def _dat_tail(path: Path, n: int) -> str:
    """The last `n` events of a trace.dat, one line each, after any damage read around."""
    import warnings

    from ..trace.parse import parse_file

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        tail = parse_file(path).tail(n).to_string(index=False)
    return "".join(f"{w.message}\n" for w in said) + tail + "\n"


def _tail(path: Path, n: int) -> list[str]:
    with open(path, errors="replace") as f:
        return list(deque(f, maxlen=n))


def collect(run_dir: Path, meta: RunOutcome, kernel_lines: list[str]) -> Path:
    """Write the post-mortem files into `run_dir/postmortem` and return that directory."""
    pm = Path(run_dir) / "postmortem"
    safepath.makedirs(pm)
    safepath.write_text(pm / "dmesg.txt", "\n".join(kernel_lines) + ("\n" if kernel_lines else ""))
    trace = Path(run_dir) / "trace.txt"
    if trace.exists():
        safepath.write_text(pm / "trace-tail.txt", "".join(_tail(trace, TRACE_TAIL_LINES)))
    elif (Path(run_dir) / "trace.dat").exists():
        safepath.write_text(pm / "trace-tail.txt", _dat_tail(Path(run_dir) / "trace.dat", TRACE_TAIL_LINES))
    log = Path(run_dir) / "agent.log"
    if log.exists():
        safepath.write_text(pm / "agent-log-tail.txt", "".join(_tail(log, LOG_TAIL_LINES)))
    why = {"run_id": meta.run_id, "status": meta.status, "reason": meta.reason, "jobs_recorded": meta.jobs_recorded,
           "jobs_planned": meta.jobs_planned}
    safepath.write_text(pm / "why.json", json.dumps(why, indent=2))
    return pm
