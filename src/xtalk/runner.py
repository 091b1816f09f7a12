"""`xtalk run`: an experiment from file to summary table.

Validate everything (the file, then every distinct plan through the agent) before the first
run starts; run in interleaved order with a progress bar; summarise at the end.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from . import __version__, config
from .config.expand import RunSpec, expand
from .config.experiment import load
from .config.units import fraction
from .errors import UsageError
from .report.summary import write_summary
from .store import open as open_results
from .targets.agent import check_plan, find_agent, local_facts, recover, refuse_fixture
from .targets.local import run_plan
from .provenance import git_commit

#: Per-run cost beyond the measured window (fork, buffer set-up, teardown, conversion).
RUN_OVERHEAD_S = 0.6




def prepare(path: Path, skip_unavailable: bool = False, skipped: list | None = None
            ) -> tuple[config.experiment.Experiment, list[RunSpec], Path]:
    """Load, resolve and check an experiment; nothing is started. Returns its runs."""
    exp = load(path)
    agent = find_agent()
    facts = local_facts(agent)
    runs = expand(exp, facts, labels={"xtalk_version": __version__, "git_commit": git_commit()},
                  skip_unavailable=skip_unavailable, skipped=skipped)
    seen = set()
    for r in runs:
        if (r.configuration, r.scenario) not in seen:
            seen.add((r.configuration, r.scenario))
            check_plan(r.plan.to_json(), agent)
    return exp, runs, agent


def estimate_seconds(exp: config.experiment.Experiment, runs: list[RunSpec], feasibility: bool = True) -> float:
    """How long the runs take, with the feasibility passes and the calibration passes of
    `victim.utilization`."""
    from .feasibility import estimated_seconds as feasibility_seconds

    total = sum(r.expected_seconds() + RUN_OVERHEAD_S for r in runs)
    if feasibility:
        total += feasibility_seconds(runs, RUN_OVERHEAD_S)
    if exp.victim.utilization is not None and runs:
        from .calibrate_work import estimated_seconds

        total += estimated_seconds(runs, RUN_OVERHEAD_S)
    return total


def run_experiment(path: Path, results: Path | None = None, console: Console | None = None,
                   skip_unavailable: bool = False, skip_feasibility: bool = False) -> Path:
    """Run every run of the experiment; return the results directory."""
    refuse_fixture("run")
    console = console or Console()
    for line in recover():
        console.print(f"[yellow]restored after an earlier run that died: {line}[/]")
    skipped: list = []
    exp, runs, agent = prepare(Path(path), skip_unavailable, skipped)
    for s in skipped:
        console.print(f"[yellow]configuration {s['configuration']} skipped: {s['reason']}[/]")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(results) if results else Path(exp.results)
    out = base / f"{exp.name}-{stamp}"
    base_existed = base.exists()
    k = 1
    while out.exists():
        out = base / f"{exp.name}-{stamp}-{k}"
        k += 1
    (out / "runs").mkdir(parents=True)
    shutil.copy(path, out / "experiment.toml")
    calibration = None
    if exp.victim.utilization is not None:
        from .calibrate_work import calibrate

        share = fraction(exp.victim.utilization, "victim.utilization")
        runs, calibration = calibrate(runs, share, agent, out, say=console.print)
    feasible = None
    if not skip_feasibility:
        from . import feasibility

        try:
            feasible = feasibility.check(runs, agent, out, say=console.print)
        except UsageError:
            shutil.rmtree(out)  # refused before the first run: nothing to keep
            if not base_existed:
                base.rmdir()
            raise
    (out / "experiment.json").write_text(json.dumps({
        "experiment": json.loads(exp.model_dump_json()),
        "agent": str(agent),
        "order": [{"run_id": r.run_id, "configuration": r.configuration, "scenario": r.scenario, "repetition": r.repetition}
                  for r in runs],
        "skipped_configurations": skipped,
        "calibration": calibration,
        "feasibility": feasible,
    }, indent=2))
    total = sum(r.expected_seconds() + RUN_OVERHEAD_S for r in runs)
    if calibration is not None:
        console.print(f"victim work: {calibration['knob']} = {calibration['work']} "
                      f"({calibration['achieved_utilization']:.0%} of the period solo, asked {calibration['utilization']:.0%})")
    console.print(f"[bold]{exp.name}[/]: {len(runs)} runs ({len(runs) // exp.repetitions} configuration × scenario pairs × "
                  f"{exp.repetitions}), about {total:.0f} s → {out}")
    failed = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("starting", total=total, runs=f"0/{len(runs)}")
        for i, r in enumerate(runs):
            bar.update(task, description=f"{'' if r.configuration == 'default' else r.configuration + ' / '}{r.scenario} (rep {r.repetition})")
            meta = run_plan(r.plan, out / "runs" / r.run_id, agent)
            if meta.get("status") != "completed":
                failed += 1
                bar.console.print(f"[yellow]run {r.run_id}: {meta.get('status')}: {meta.get('reason')}[/]")
            for note in meta.get("notes") or []:  # e.g. an external enemy that exited early
                bar.console.print(f"[yellow]run {r.run_id}: {note}[/]", markup=True, highlight=False)
            bar.update(task, advance=r.expected_seconds() + RUN_OVERHEAD_S, runs=f"{i + 1}/{len(runs)}")
    write_summary(open_results(out), console=console)
    if failed:
        console.print(f"[yellow]{failed} run(s) did not complete; their partial jobs are kept and counted above.[/]")
    return out
