"""`xtalk run`: an experiment from file to summary table.

Validate everything (the file, then every distinct plan through the agent) before the first
run starts; run in interleaved order with a progress bar; summarise at the end.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from . import config, output
from .version import __version__
from .config.expand import RunSpec, expand
from .config.experiment import load
from .limits import check_results_space
from .units import fraction
from .errors import UsageError, runs_exit_code
from .targets.agent import PlanRefused, check_plans, find_agent, local_facts, recover, refuse_fixture
from . import safepath
from .targets.base import LocalTarget
from .provenance import git_commit
from .campaign import estimate as _estimate

if TYPE_CHECKING:
    from rich.console import Console

#: Per-run cost beyond the measured window and the buffers' touch (fork, teardown,
#: conversion): the campaign estimate's, one rule for both (campaign/estimate.py).
RUN_OVERHEAD_S = _estimate.RUN_OVERHEAD_S["local"]
#: Cost of `xtalk run` itself beyond its runs: start-up, the agent's check of every plan,
#: recovery, the summary (`xtalk plan` alone took 1.5-2.3 s on a 2-vCPU guest; bench/estimates.py).
COMMAND_OVERHEAD_S = 2.0
#: Errors of a results file system that no later run would escape: stop, summarise, say so.
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def _create_results(out: Path, path: Path, document: dict) -> None:
    """The results directory with the experiment's copy; UsageError when it cannot be made."""
    try:
        safepath.makedirs(out / "runs", exist_ok=False)
        safepath.write_bytes(out / "experiment.toml", Path(path).read_bytes())
        safepath.write_text(out / "experiment.json", json.dumps(document, indent=2))
    except OSError as e:
        raise UsageError(f"results: cannot create {out}: {e.strerror}; give --results a writable directory") from None


def exit_code(out: Path) -> int:
    """`xtalk run`'s exit code from what its results directory holds: 0 every planned run
    completed, 4 some did not (failed, timed out, never ran, or invalid: settings drifted), 5 none did."""
    try:
        planned = len(json.loads((out / "experiment.json").read_text())["order"])
    except (OSError, ValueError, KeyError):
        return runs_exit_code(0, 1)
    from .store import run_outcome  # its models: not for `xtalk plan`

    completed = 0
    for run in (out / "runs").iterdir() if (out / "runs").is_dir() else []:
        meta = run_outcome(run)
        completed += meta is not None and meta.status == "completed" and not meta.invalid
    return runs_exit_code(completed, planned)



def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def run_count_text(runs: int, repetitions: int) -> str:
    """"6 runs (3 configuration/scenario pairs × 2 repetitions)", singular where it is one."""
    pairs = runs // max(repetitions, 1)
    return f"{_plural(runs, 'run')} ({_plural(pairs, 'configuration/scenario pair')} × {_plural(repetitions, 'repetition')})"


def declared_settings(path: Path, exp: config.experiment.Experiment, settings: Path | None = None):
    """The experiment's declared-settings file (``--settings`` first, else its `settings`, relative to
    the experiment file), checked against this machine now: UsageError (exit 2) naming the first
    setting the machine does not hold, before anything starts. None when none is declared."""
    from .targets import settings as machine_settings

    where = settings if settings is not None else (Path(path).parent / exp.settings if exp.settings else None)
    if where is None:
        return None
    declared = machine_settings.load_declared(where)
    wrong = machine_settings.violations(declared, machine_settings.snapshot_local(declared.paths()))
    if wrong:
        raise UsageError(f"{where}: {wrong[0]}" + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))
    return declared


def prepare(path: Path, skip_unavailable: bool = False, skipped: list | None = None
            ) -> tuple[config.experiment.Experiment, list[RunSpec], Path]:
    """Load, resolve and check an experiment; nothing is started. Returns its runs.

    The agent checks the first plan of each configuration and scenario. With
    `skip_unavailable`, a plan it refuses for what this machine cannot provide (a policy the
    kernel refuses, a group it cannot make: `PlanRefused.machine`) leaves out its whole
    configuration, noted in `skipped` as the expansion's own skips are, and the others are
    expanded and checked again; any other refusal is bad input and refuses the experiment."""
    exp = load(path)
    agent = find_agent()
    facts = local_facts(agent)
    refused: dict[str, str] = {}
    while True:
        found: list = []
        runs = expand(exp, facts, labels={"xtalk_version": __version__, "git_commit": git_commit()},
                      skip_unavailable=skip_unavailable, skipped=found, aocs_data=LocalTarget(agent).aocs_data, refused=refused)
        first: dict[tuple[str, str], str] = {}
        for r in runs:
            first.setdefault((r.configuration, r.scenario), r.plan.to_json())
        try:
            check_plans(list(first.values()), agent)
            break
        except PlanRefused as e:
            if not (skip_unavailable and e.machine and e.index is not None and e.index < len(first)):
                raise
            configuration, scenario = list(first)[e.index]
            # An enemy belongs to a scenario: name it, as the fix may be the scenario's.
            where = f"scenario '{scenario}': " if e.field.startswith("enemies") else ""
            refused[configuration] = f"{where}{e.field}: {e.reason}"
    if skipped is not None:
        skipped.extend(found)
    return exp, runs, agent


def estimate_seconds(exp: config.experiment.Experiment, runs: list[RunSpec], feasibility: bool = True) -> float:
    """How long the runs take, with the feasibility passes and the calibration passes of
    `victim.utilization`."""
    from .feasibility import estimated_seconds as feasibility_seconds

    total = sum(_estimate.run_seconds(r.plan) for r in runs)
    # A solo pass pays the fixed cost and the measured processes' buffers (no enemies).
    solo_pass_s = RUN_OVERHEAD_S + (_estimate.solo_touch_seconds(runs[0].plan) if runs else 0.0)
    if feasibility:
        from .enemy_alone import estimated_seconds as alone_seconds

        total += feasibility_seconds(runs, solo_pass_s) + alone_seconds(runs, RUN_OVERHEAD_S, _estimate.touch_seconds)
    if exp.victim is not None and exp.victim.utilization is not None and runs:
        from .calibrate_work import estimated_seconds

        total += estimated_seconds(runs, solo_pass_s)
    return total


def run_detail(r: RunSpec, meta) -> str:
    """One run as `xtalk -v run` says it when it ends: its status, jobs and length."""
    jobs = f", {meta.jobs_recorded}/{meta.jobs_planned} jobs" if meta.jobs_recorded is not None else ""
    took = (f", {(meta.ended_unix_ns - meta.started_unix_ns) / 1e9:.2f} s"
            if meta.started_unix_ns and meta.ended_unix_ns else "")
    return (f"run {r.run_id} ({r.configuration} / {r.scenario}, rep {r.repetition}): {meta.status}{jobs}{took}"
            + (f": {meta.reason}" if meta.reason and meta.status != "completed" else ""))


class Notices(list):
    """The run-time warnings of `xtalk run` (a failed run, a feasibility or noise warning, an
    enemy's note), printed as they come and kept in experiment.json's ``warnings``, from which
    the summary puts them into verdicts.json (report/verdicts.py): what the terminal said is
    what the document says."""

    def __init__(self, console):
        super().__init__()
        self.console = output.of(console)

    def say(self, kind: str, line: str, configuration: str | None = None, scenario: str | None = None, *,
            printer=None, style: str = "yellow", prefix: str = "", markup: bool = True) -> None:
        from rich.markup import escape

        from .report.verdicts import warning

        text = line if markup else escape(line)  # markup=False: the line's brackets are text (a path, a list)
        (printer or self.console.warning)(f"[{style}]{prefix}{text}[/]", highlight=False)  # at every level
        self.append(warning(kind, line, configuration, scenario))  # the line as printed, without its style


def _noise_after_runs(out: Path, document: dict, results, table, effect: float, repetitions: int, console,
                      notices: Notices | None = None) -> None:
    """The solo spread (noise_floor record) from the experiment's own solo runs (first configuration), recorded in
    experiment.json, and a warning only where a scenario's CI concluded nothing at `effect`."""
    from .feasibility import after_runs, noise_text

    jobs = results.jobs()
    if not len(jobs) or "scenario" not in jobs:
        return
    first = document["feasibility"][0]["configuration"]
    solo = jobs[(jobs.scenario == "solo") & (jobs.get("configuration", first) == first)]
    medians = [float(m) for m in solo.groupby("run_id").exec_ns.median()]
    if len(medians) < 2:
        return
    noise, warning = after_runs(medians, table, effect, repetitions)
    document["feasibility"][0]["noise_floor_runs"] = noise
    safepath.write_text(out / "experiment.json", json.dumps(document, indent=2))
    if warning:
        if notices is not None:
            notices.say("noise", warning, prefix="warning: ")
        else:
            output.of(console).warning(f"[yellow]warning: {warning}[/]", highlight=False)
    elif (table.scenario != "solo").any():
        console.print(f"{noise_text(noise)}; every slowdown CI concludes at min_effect", highlight=False)
    else:
        console.print(noise_text(noise), highlight=False)


def run_experiment(path: Path, results: Path | None = None, console: Console | None = None,
                   skip_unavailable: bool = False, skip_feasibility: bool = False, require_effect: bool = False,
                   settings: Path | None = None) -> Path:
    """Run every run of the experiment; return the results directory (its summary.json,
    summary.md and verdicts.json written). ``settings``: a declared-settings file (else the
    experiment's own `settings`), checked before anything starts."""
    refuse_fixture("run")
    declared = declared_settings(Path(path), load(path), settings)
    console = output.of(console) or output.Output()  # the command line's level (-q / -v)
    notices = Notices(console)
    for line in recover():
        notices.say("recovered", f"restored after an earlier run that died: {line}", markup=False)
    skipped: list = []
    exp, runs, agent = prepare(Path(path), skip_unavailable, skipped)
    target = LocalTarget(agent)  # the one door to the agent: every run holds the machine (targets/lock.py)
    if declared is not None:
        target.watch = tuple(declared.paths())  # snapshot before and after every run with the defaults
    for s in skipped:
        console.warning(f"[yellow]configuration {s['configuration']} skipped: {s['reason']}[/]")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = safepath.results_dir(results or exp.results, "--results" if results else f"{path}: results =")
    why = check_results_space(base, [r.plan for r in runs])
    if why:
        raise UsageError(why)
    out = base / f"{exp.name}-{stamp}"
    base_existed = base.exists()
    k = 1
    while out.exists():
        out = base / f"{exp.name}-{stamp}-{k}"
        k += 1
    document = {
        "experiment": json.loads(exp.model_dump_json()),
        "agent": str(agent),
        "order": [{"run_id": r.run_id, "configuration": r.configuration, "scenario": r.scenario, "repetition": r.repetition}
                  for r in runs],
        "skipped_configurations": skipped,
        "declared_settings": [vars(d) for d in declared.declared] if declared is not None else [],
        "warnings": notices,
    }
    _create_results(out, Path(path), document)
    calibration = None
    from . import pilot

    piloted = None
    if exp.victim is not None and pilot.needs_pilot(runs, exp.victim.period_declared(), exp.timeout is not None):
        runs, piloted = pilot.pilot(runs, agent, out, exp.victim.period_declared(), exp.timeout is not None,
                                    say=console.print)
        document["pilot"] = piloted
    if exp.victim is not None and exp.victim.utilization is not None:  # [[application]]s: no calibration
        from .calibrate_work import calibrate

        share = fraction(exp.victim.utilization, "victim.utilization")
        runs, calibration = calibrate(runs, share, agent, out, say=console.print)
        document["calibration"] = calibration
    if not skip_feasibility:
        from . import feasibility

        try:
            document["feasibility"] = feasibility.check(
                runs, agent, out, say=console.print, min_effect=fraction(exp.min_effect, "min_effect", high=10.0),
                require_effect=require_effect, warn=lambda line: notices.say("feasibility", line, markup=False),
                applications=[a.name for a in exp.application])
        except UsageError:
            shutil.rmtree(out)  # refused before the first run: nothing to keep
            if not base_existed:
                base.rmdir()
            raise
        from . import enemy_alone

        document["enemies_alone"] = enemy_alone.measure(runs, agent, out, say=console.print)
    safepath.write_text(out / "experiment.json", json.dumps(document, indent=2))
    def run_s(plan) -> float:  # a command runs as long as its pilot did, not one period
        life = (piloted or {}).get("life_ns")
        extra = max(0.0, life / 1e9 - plan.victim.period_ns / 1e9) if life else 0.0
        return _estimate.run_seconds(plan) + extra

    total = sum(run_s(r.plan) for r in runs)
    if calibration is not None:
        console.print(f"victim work: {calibration['knob']} = {calibration['work']} "
                      f"({calibration['achieved_utilization']:.0%} of the period solo, asked {calibration['utilization']:.0%})")
    console.print(f"[bold]{exp.name}[/]: {run_count_text(len(runs), exp.repetitions)}, about {total:.0f} s → {out}")
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    failed = 0
    disk_error: OSError | None = None
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console.console, transient=False,
                  disable=console.quiet) as bar:
        task = bar.add_task("starting", total=total, runs=f"0/{len(runs)}")
        for i, r in enumerate(runs):
            bar.update(task, description=f"{'' if r.configuration == 'default' else r.configuration + ' / '}{r.scenario} (rep {r.repetition})")
            try:
                start = target.clock()
                meta = target.run(r.plan, out / "runs" / r.run_id)  # holds the machine for the run
            except OSError as e:
                if e.errno not in _DISK_ERRNOS:
                    raise
                disk_error = e
                failed += len(runs) - i
                break
            if meta.status != "completed":
                failed += 1
                # What explains it, kept as a campaign keeps it (campaign/postmortem.py).
                from .campaign import postmortem

                postmortem.collect(out / "runs" / r.run_id, meta, target.kernel_log_since(start))
                notices.say("run_failed", f"run {r.run_id}: {meta.status}: {meta.reason} "
                            f"(post-mortem in runs/{r.run_id}/postmortem)", r.configuration, r.scenario,
                            printer=bar.console.print, markup=False)
            if meta.invalid:  # left out of every reading of the results (store); the diff said here
                hint = ("; an interrupt moved during the run: is irqbalance running? (docs/settings.md)"
                        if "/proc/irq/" in meta.invalid else "")
                notices.say("settings_drift", f"run {r.run_id} invalid, left out of verdicts: {meta.invalid}{hint}",
                            r.configuration, r.scenario, printer=bar.console.print, style="red", markup=False)
            for note in meta.notes:  # e.g. an external enemy that exited early
                notices.say("run_note", f"run {r.run_id}: {note}", r.configuration, r.scenario, printer=bar.console.print)
            console.detail(run_detail(r, meta), highlight=False, markup=False)
            bar.update(task, advance=run_s(r.plan), runs=f"{i + 1}/{len(runs)}")
    from .report.summary import write_summary  # pandas and scipy: not for `plan`
    from .report import verdicts as vdoc
    from .store import open as open_results

    table, told = None, 0
    try:
        safepath.write_text(out / "experiment.json", json.dumps(document, indent=2))  # the notices so far
        results = open_results(out)
        table = write_summary(results, console=console, recap=False)
        told = len(notices)
        if not skip_feasibility and document.get("feasibility"):
            _noise_after_runs(out, document, results, table, fraction(exp.min_effect, "min_effect", high=10.0),
                              exp.repetitions, console, notices)
    except OSError as e:
        if e.errno not in _DISK_ERRNOS:
            raise
        disk_error = disk_error or e
    if failed:
        notices.say("runs_incomplete", f"{failed} run(s) did not complete; their partial jobs are kept and counted above.")
    if disk_error is not None:
        notices.say("results_unwritable", f"results: {out} cannot be written ({disk_error.strerror}); the runs after it "
                    f"were not started. Free space and run again.", style="red", markup=False)
    if table is not None and len(notices) > told:  # what came after the summary: into both documents
        try:
            safepath.write_text(out / "experiment.json", json.dumps(document, indent=2))
            doc = table.attrs["verdicts"]
            doc["warnings"] = list(notices) + doc["warnings"][told:]  # the run's notices first, as `xtalk summary` orders them
            vdoc.write(out, doc)
        except OSError as e:
            if e.errno not in _DISK_ERRNOS:
                raise
    return out
