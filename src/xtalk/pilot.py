"""The pilot run of a command victim: how long the program runs, measured, not guessed.

A command runs once per run, for as long as the program takes; expansion cannot know that.
Before the runs, `pilot` runs the first solo plan once (no enemies) with a generous timeout (or
the file's `timeout`) and reads the program's life from its record; a file that declares both
`period` and `timeout` needs none. Every run then gets a timeout of twice that plus
30 s (unless the experiment gives `timeout`), and a command whose period the file does not
declare gets the measured life as its period (its one job's period: the estimate and the
deadline of the whole process follow). `xtalk plan` runs nothing, so before a pilot a command
is counted at its placeholder period (config/experiment.py `VictimSpec.COMMAND_PERIOD`).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

from .calibrate_work import run_on
from .config.expand import RunSpec
from .errors import UsageError
from .limits import MAX_PERIOD_NS
from . import catalog

#: The longest a pilot may run before it is called a program that does not end.
PILOT_TIMEOUT_S = 600.0
#: Timeout of every run: this many times the pilot's length, plus SLACK_S.
TIMEOUT_FACTOR, SLACK_S = 2.0, 30.0


def needs_pilot(runs: list[RunSpec], period_declared: bool, timeout_declared: bool) -> bool:
    """Whether the victim is a command (its length is the program's) and the file leaves
    something to measure: its runs' timeout or its period. With both declared nothing runs
    before the runs (a program with side effects runs exactly as often as asked)."""
    return bool(runs) and catalog.body(runs[0].plan.victim.body.kind).probes is not None and not (period_declared and timeout_declared)


def pilot(runs: list[RunSpec], agent, out: Path, period_declared: bool, timeout_declared: bool,
          say=print) -> tuple[list[RunSpec], dict]:
    """Run the first solo plan once; return the runs with timeouts (and, where the period is
    not declared, the period) from the program's measured life, and the record of it."""
    solo = next((r for r in runs if r.scenario == "solo"), runs[0])
    plan = solo.plan.model_copy(deep=True)
    plan.enemies = []
    plan.run_id = "pilot"
    plan.timeout_s = max(plan.timeout_s, PILOT_TIMEOUT_S) if not timeout_declared else plan.timeout_s
    d = out / "pilot"
    if d.exists():
        shutil.rmtree(d)
    meta = run_on(agent, plan, d)
    from .store.jobs import read_job_log  # pandas, once the pilot has run

    log = read_job_log(d / "jobs.bin") if (d / "jobs.bin").exists() else None
    if meta.status != "completed" or log is None or log.empty:
        if timeout_declared:  # the runs keep the file's timeout: they will say how they end
            say(f"[yellow]pilot: the program did not complete ({meta.status}: {meta.reason}); the runs keep "
                f"timeout = {plan.timeout_s:g} s[/]")
            return runs, {"life_ns": None, "status": meta.status, "reason": meta.reason}
        raise UsageError(f"victim.argv: the pilot run of the program did not complete ({meta.status}: {meta.reason}); "
                         f"run it by hand to see why, or give a longer 'timeout' (the pilot waits {plan.timeout_s:.0f} s)")
    life_ns = int(log.end_ns.iloc[0] - log.start_ns.iloc[0])
    record = {"life_ns": life_ns, "cpu_time_ns": int(log.cpu_time_ns.iloc[0]), "configuration": solo.configuration}
    period_ns = min(MAX_PERIOD_NS, max(10_000, math.ceil(life_ns * 1.2)))
    out_runs = []
    for r in runs:
        p = r.plan.model_copy(deep=True)
        if not period_declared:
            p.victim.period_ns = period_ns
        if not timeout_declared:
            p.timeout_s = TIMEOUT_FACTOR * (p.settle_ms / 1e3 + life_ns / 1e9) + SLACK_S
        out_runs.append(dataclasses.replace(r, plan=p))
    say(f"pilot: the program ran {life_ns / 1e9:.3g} s alone (CPU {record['cpu_time_ns'] / 1e9:.3g} s); "
        f"each run's timeout {out_runs[0].plan.timeout_s:.0f} s")
    return out_runs, record
