"""The `xtalk` command line: commands only, the work lives in the modules they call."""

from __future__ import annotations

import json
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from . import output
from .command import command_wrapper, say_left_out_runs
from .errors import UsageError
from .output import stdout_console as _console

# Help as plain text: Rich markup ate "[trace]" from help texts, and flags read `--csv <bool>`.
app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help="xtalk: measure timing interference between applications on a multicore processor.")
say_left_out_runs()  # a damaged run a reader leaves out: one line on stderr (store/check.py)


def _version(value: bool) -> None:
    """`--version`: this xtalk, the commit it runs from (in a checkout), the agent it would use."""
    if not value:
        return
    import subprocess

    from .errors import AgentError
    from .provenance import git_commit
    from .targets.agent import find_agent
    from .version import __version__

    commit = git_commit()
    print(f"xtalk {__version__}" + (f" (commit {commit})" if commit != "unknown" else ""))
    try:
        agent = find_agent()
        said = subprocess.run([str(agent), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        print(f"{said or 'xtalk-agent: no version'} ({agent})")
    except (AgentError, OSError, subprocess.SubprocessError) as e:
        print(f"xtalk-agent: {e}")
    raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                          help="print the versions of xtalk and of its agent, and exit"),
             quiet: bool = typer.Option(False, "-q", "--quiet", help="run, summary: print only the results path, "
                                        "verdict lines, warnings and errors (no tables, no progress)"),
             verbose: bool = typer.Option(False, "-v", "--verbose", help="run: add each run's status, jobs and length as it ends")):
    """xtalk: measure timing interference between applications on a multicore processor."""
    if quiet and verbose:
        raise typer.BadParameter("give one of -q (quiet) and -v (verbose)", param_hint="-q/-v")
    output.set_level(output.QUIET if quiet else output.VERBOSE if verbose else output.NORMAL)


def command(fn):
    """Register a command whose failures end as one line and a documented exit code:
    2 bad input, 3 agent problem, 4 / 5 some / all runs failed (`run`), 130 interrupted."""

    return app.command()(command_wrapper(fn))


@command
def run(experiment: Path = typer.Argument(..., help="experiment file (TOML)"),
        results: Optional[Path] = typer.Option(None, help="base directory for results (default: the file's `results`)"),
        skip_unavailable: bool = typer.Option(False, "--skip-unavailable",
                                              help="run the configurations this kernel offers; mark the others skipped"),
        skip_feasibility: bool = typer.Option(False, "--skip-feasibility",
                                              help="run even if the victim cannot hold its period alone (the guards still say so); "
                                                   "skips the solo spread and the enemies-alone passes too"),
        require_effect: bool = typer.Option(False, "--require-effect",
                                            help="refuse when the repetitions cannot resolve the experiment's min_effect "
                                                 "against the solo spread (default: a warning)"),
        gate: bool = typer.Option(False, "--gate", help="then gate the results as `xtalk gate` does (the stored ε, "
                                  "--baseline): exit 1 when a check failed"),
        baseline: Optional[Path] = typer.Option(None, "--baseline", help="with --gate: results to compare against"),
        max_regression: Optional[str] = typer.Option(None, "--max-regression", help='with --gate: allowed growth, e.g. "5%"'),
        strict: bool = typer.Option(False, "--strict", help="with --gate: inconclusive checks fail too"),
        junit: Optional[Path] = typer.Option(None, "--junit", help="with --gate: write JUnit XML to FILE"),
        settings: Optional[Path] = typer.Option(None, "--settings", help="declared-settings file (TOML): refuse to run "
                                                "when the machine differs (default: the experiment's `settings`)")):
    """Run an experiment: the victim against each enemy scenario, interleaved, then the summary table
    and RESULTS/verdicts.json. Exit status: 0 every run completed (and, with --gate, no check
    failed), 1 a gate check failed, 2 bad input, 3 agent problem, 4 some runs failed, 5 all did,
    130 interrupted."""
    from .campaign.detect import is_campaign_file
    from .runner import exit_code, run_experiment
    from .trust import require_trusted

    if is_campaign_file(experiment):
        raise UsageError(f"{experiment}: a campaign file (it has [[application]]); run it with `xtalk campaign run {experiment}`")
    require_trusted(experiment)  # its argv, preloads and paths run as root
    from .targets.agent import refuse_fixture

    refuse_fixture("run")  # before anything is recovered, created or started
    from .report.gate import after as gate_after, options as gate_options

    gating = gate_options(gate, baseline, max_regression, strict, junit)  # bad gate input: exit 2 before any run
    if gating is not None and baseline is None:
        from .config.experiment import load

        exp = load(experiment)
        if not ((exp.victim is not None and exp.victim.epsilon) or any(a.epsilon for a in exp.application)):
            raise UsageError("--gate: the experiment declares no ε (victim.epsilon, or an application's epsilon) and "
                             "no --baseline was given: nothing to gate; declare one or give --baseline OLD")
    out = run_experiment(experiment, results, _console(), skip_unavailable, skip_feasibility, require_effect, settings)
    code = exit_code(out)
    if gating is not None:  # failed runs (4, 5) outrank the gate: their cells are incomplete
        code = code or gate_after(out, gating, _console())
    if code:
        raise typer.Exit(code)


def _plan_settings(experiment: Path, settings: Optional[Path], fixture: bool) -> str:
    """`xtalk plan`'s check of the declared settings: on this machine as `run` checks them
    (UsageError naming the first that does not hold); for a machine fixture the file is read and
    checked for form only (a fixture records no settings). The line to print, "" when none is
    declared."""
    from .config.experiment import load
    from .runner import declared_settings
    from .targets import settings as machine_settings

    exp = load(experiment)
    where = settings if settings is not None else (Path(experiment).parent / exp.settings if exp.settings else None)
    if where is None:
        return ""
    if fixture:
        n = len(machine_settings.load_declared(where).declared)
        return f"declared settings: {n} in {where}, checked on the machine when it runs (a fixture records none)"
    declared = declared_settings(Path(experiment), exp, settings)
    return f"declared settings: the {len(declared.declared)} in {where} hold on this machine"


@command
def plan(experiment: Optional[Path] = typer.Argument(None, help="experiment file (TOML); after --schema: plan, experiment or campaign"),
         schema: bool = typer.Option(False, "--schema", help="print a JSON Schema: the run plan's, or `--schema experiment` / `--schema campaign` for those files"),
         show: bool = typer.Option(False, "--show", help="print the plan of the first run of each scenario"),
         skip_unavailable: bool = typer.Option(False, "--skip-unavailable", help="leave out configurations this kernel cannot provide"),
         machine: Optional[Path] = typer.Option(None, "--machine", help="plan for a recorded machine fixture (as $XTALK_MACHINE)"),
         settings: Optional[Path] = typer.Option(None, "--settings", help="declared-settings file (TOML) checked against "
                                                 "this machine as `run` checks it (default: the experiment's `settings`)")):
    """Print the run-plan JSON Schema, or what an experiment would run (nothing is started)."""
    from .targets.agent import use_machine

    use_machine(machine)

    if schema:
        print(json.dumps(_schema_named(str(experiment or "plan")), indent=2))
        return
    if experiment is None:
        raise UsageError("plan: give an experiment file, or --schema")
    from .campaign.detect import is_campaign_file
    from .trust import warn_untrusted

    warn_untrusted(experiment)
    if is_campaign_file(experiment):  # the same question for a campaign: runs and duration
        from .campaign.cli import plan as campaign_plan

        return campaign_plan(experiment, [], False, False)
    from .runner import COMMAND_OVERHEAD_S, estimate_seconds, prepare
    from .targets.agent import machine_fixture

    fixture = machine_fixture()
    declared = _plan_settings(experiment, settings, fixture is not None)  # refused as `run` would: exit 2 first
    skipped: list = []
    exp, runs, _ = prepare(experiment, skip_unavailable, skipped)
    if declared:
        print(declared)
    if fixture is not None:
        print(f"machine: {_machine_line(fixture)}")
    for s in skipped:
        print(f"configuration {s['configuration']} skipped: {s['reason']}")
    from .limits import check_results_space

    why = check_results_space(Path(exp.results), [r.plan for r in runs])
    if why:  # `run --results` may point elsewhere: a warning here, a refusal there
        print(f"warning: {why}")
    total = COMMAND_OVERHEAD_S + estimate_seconds(exp, runs)
    if exp.victim is not None and exp.victim.utilization is not None:
        where = "on the target at run time (a fixture calibrates nothing; the estimate counts the passes)" if fixture else "on this machine"
        print(f"victim work: calibrated {where} before the runs, for {exp.victim.utilization} of the period")
    from .pilot import needs_pilot

    if exp.victim is not None and needs_pilot(runs, exp.victim.period_declared(), exp.timeout is not None):
        print("victim: a command runs as long as its program: `xtalk run` measures that in a pilot run first; "
                      "this estimate counts each run at its period")
    # The order in full up to a few hundred runs; beyond, its start (rich would spend
    # seconds laying out a line of a hundred thousand names).
    shown = ", ".join(r.run_id for r in runs[:200]) + (f", ... ({len(runs) - 200} more)" if len(runs) > 200 else "")
    print(f"{len(runs)} runs, about {total:.0f} s; order: {shown}")
    if show:
        seen = set()
        for r in runs:
            if (r.configuration, r.scenario) not in seen:
                seen.add((r.configuration, r.scenario))
                print(r.plan.to_json())


def _schema_named(name: str) -> dict:
    """The JSON Schema `plan --schema NAME` prints: the run plan's, or an input file's."""
    if name in ("plan", "run-plan"):
        from .plan import json_schema

        return json_schema()
    if name == "experiment":
        from .config.experiment import json_schema

        return json_schema()
    if name == "campaign":
        from .campaign.schema import json_schema

        return json_schema()
    raise UsageError(f"plan --schema: no schema named '{name}'; give plan, experiment or campaign")


def _machine_line(fixture: Path) -> str:
    """The fixture planned for, and where its facts came from."""
    from .targets.agent import local_facts

    env = local_facts().environment
    cpu, origin = env.get("cpu", {}), env.get("fixture", {})
    made = "hand-made (see its `fixture` field)" if origin.get("hand_made") else f"recorded {origin.get('recorded', '')}".strip()
    return f"fixture {fixture} ({cpu.get('model')} × {cpu.get('count')}; {made})"


#: `xtalk summary --view NAME`: the views of one kind of results, each a table (report/NAME.py's
#: `show`) that also writes its files (docs/report.md, "Views").
VIEWS = ("latency", "tasks", "overheads", "containment")


@command
def summary(results: Optional[Path] = typer.Argument(None, help="results directory of an experiment or a campaign"),
            as_json: bool = typer.Option(False, "--json", help="print the verdict document (verdicts.json) on standard "
                                                               "output instead of the table; with --view, the view's "
                                                               "table (numbers with their unit as fields)"),
            schema: bool = typer.Option(False, "--schema", help="print the verdict document's JSON Schema"),
            view: Optional[str] = typer.Option(None, "--view", metavar="VIEW", help="instead of the summary, the view "
                                               "of one kind of results: latency (a `latency` victim), tasks (a `taskset` "
                                               "victim), overheads (a run with [trace]) or containment (fault scenarios)"),
            tolerance: Optional[float] = typer.Option(None, "--tolerance", min=1.0, metavar="X", help="--view containment: "
                                                      "the p99 response allowed, as a multiple of solo's (default 1.5)")):
    """Print (and rewrite) the summary table of a results directory (per cell for a campaign), and
    rewrite its summary.md, summary.json and verdicts.json (the verdict document, docs/report.md);
    or, with --view, the view of a latency, task-set, traced or fault experiment."""
    if tolerance is not None and view != "containment":
        raise UsageError("--tolerance goes with --view containment" + (f", not --view {view}" if view else ""))
    if view is not None:
        if view not in VIEWS:
            from .config.suggest import did_you_mean

            hint = did_you_mean(view, VIEWS)
            raise UsageError(f"--view: '{view}' is not a view; " + (hint or "give latency, tasks, overheads or containment"))
        if schema or results is None:
            raise UsageError(f"summary --view {view}: give a results directory (--schema is the verdict document's)")
        return _view(view, results, as_json, tolerance)
    if schema:
        from .report.verdicts import schema as verdicts_schema

        print(json.dumps(verdicts_schema(), indent=2, ensure_ascii=False))
        return
    if results is None:
        raise UsageError("summary: give a results directory, or --schema")
    results = _results_dir(results)
    from .results.campaign_cells import is_campaign
    from .report.summary import write_summary
    from .store import open as open_results

    shown = None if as_json else _console()
    if is_campaign(results):
        from .report.campaign_summary import write_campaign_summary

        doc = write_campaign_summary(results, console=shown).attrs.get("verdicts")
    else:
        try:
            r = open_results(results)
        except FileNotFoundError as e:
            raise UsageError(str(e)) from None
        doc = write_summary(r, console=shown).attrs["verdicts"]
    if as_json:
        if doc is None:
            raise UsageError(f"{results}: no finished run with jobs yet: no verdict document")
        print(json.dumps(doc, indent=2, ensure_ascii=False))


@command
def characterize(quick: bool = typer.Option(False, "--quick", help="few enemies, short runs (under 10 minutes on 2 cores)"),
                 results: Path = typer.Option(Path("results"), help="base directory for the results"),
                 enemy: Optional[list[str]] = typer.Option(None, help="enemies to use (repeatable; default: all, or a few with --quick)"),
                 repetitions: Optional[int] = typer.Option(None, min=1, help="runs per scenario (default 5, 4 with --quick)"),
                 jobs: Optional[int] = typer.Option(None, min=5, help="measured jobs per run (default 200, 30 with --quick)"),
                 plan_only: bool = typer.Option(False, "--plan", help="print each probe's runs and the estimate; start nothing"),
                 machine: Optional[Path] = typer.Option(None, "--machine", help="with --plan: a recorded machine fixture (as $XTALK_MACHINE)"),
                 peaks: bool = typer.Option(False, "--peaks", help="the channel peaks (read, write, copy bandwidth, cache "
                                                                   "rates, per-level latency), measured once per machine with the "
                                                                   "enemies and saved; printed when already saved"),
                 remeasure: bool = typer.Option(False, "--remeasure", help="with --peaks: measure again and replace the saved peaks"),
                 peak_jobs: int = typer.Option(30, "--peak-jobs", min=5, max=1000, help="with --peaks: 10 ms steps per measuring pass"),
                 as_json: bool = typer.Option(False, "--json", help="print the matrix as JSON on standard output (the verdict "
                                                                    "document's shapes); the progress goes to standard error")):
    """Characterise this machine: resource probes against each enemy and 1..N copies; writes a
    sensitivity matrix (Parquet, CSV), a heat map (PNG, SVG), the channels that matter and each
    enemy's share of its channel's peak (the peaks: `--peaks`)."""
    from .characterize import characterize as run_characterize
    from .targets.agent import refuse_fixture, use_machine

    use_machine(machine)
    if as_json and (peaks or plan_only):
        raise UsageError(f"--json: prints the matrix of a characterisation; leave it out with {'--peaks' if peaks else '--plan'}")
    if remeasure and not peaks:
        raise UsageError("characterize: --remeasure re-measures the peaks; add --peaks")
    if peaks:
        from .peaks_measure import run as run_peaks

        refuse_fixture("characterize --peaks")
        run_peaks(results, _console(), remeasure=remeasure, jobs=peak_jobs)
        return
    if plan_only:
        from .characterize import plan as plan_characterize

        plan_characterize(quick, _console(), repetitions=repetitions, enemies=enemy, jobs=jobs)
        return
    refuse_fixture("characterize")
    from rich.console import Console

    out = run_characterize(results, quick, Console(stderr=True) if as_json else _console(), repetitions=repetitions,
                           enemies=enemy, jobs=jobs)
    if as_json:
        from .characterize import json_document

        print(json.dumps(json_document(out), indent=2, ensure_ascii=False, default=str))


@command
def worst(experiment: Optional[Path] = typer.Argument(None, help="experiment file whose victim is the application (its scenarios are ignored)"),
          victim: Optional[str] = typer.Option(None, "--victim", help='the victim instead of a file: its keys (\'body = "chase", bytes = "llc/2", '
                                                                     'accesses = 20000, jobs = 50\') or a command line'),
          budget: str = typer.Option("10m", "--budget", help="time for the whole search and its confirmation (10m, 90s, 1h)"),
          statistic: str = typer.Option("p99", "--statistic", help="what to maximise: p99, median or max"),
          metric: str = typer.Option("exec", "--metric", help="exec (execution) or response time"),
          out: Path = typer.Option(Path("worst"), "--out", help="output directory (new or empty)"),
          kind: Optional[list[str]] = typer.Option(None, "--kind", help="search only these enemy kinds (repeatable; default: the catalog's)"),
          stress_ng: bool = typer.Option(True, "--stress-ng/--no-stress-ng", help="confirm against stress-ng's stressors when installed"),
          seed: int = typer.Option(0, "--seed", min=0, help="seed of the candidates and the run order"),
          margin: str = typer.Option("10%", "--margin", help="stopping rule: how much worse than the best an untried candidate "
                                                              "must be to matter (10% or 0.1)"),
          confidence: str = typer.Option("90%", "--confidence", help="stopping rule: its confidence, and 1 - it the share "
                                                                      "of untried candidates it may leave above the margin"),
          as_json: bool = typer.Option(False, "--json", help="print the worst combination and the runner-ups as JSON on "
                                                             "standard output (the verdict document's shapes); the "
                                                             "progress goes to standard error")):
    """Search the catalog's enemies for the combination that slows the victim most, within a budget;
    confirm it against solo and stress-ng; write it as an experiment file, with the search trace."""
    from .worst.inputs import request

    req = request(experiment, victim, budget, statistic, metric, out, kind, stress_ng, seed, margin,
                  confidence)  # exit 2 before anything starts
    if experiment is not None:
        from .trust import require_trusted

        require_trusted(experiment)  # its argv and paths run as root
    from .worst.driver import run as run_worst

    from rich.console import Console

    out = run_worst(req, Console(stderr=True) if as_json else _console())
    if as_json:
        from .worst.output import json_document

        print(json.dumps(json_document(out), indent=2, ensure_ascii=False, default=str))


@command
def report(results: Path = typer.Argument(..., help="results directory of an experiment or a campaign"),
           epsilon: list[str] = typer.Option([], "--epsilon", "-e",
                                             help="ε bound METRIC:STATISTIC:BOUND, e.g. exec:max:1.2x or response:p99:12ms (repeatable)"),
           out: Optional[Path] = typer.Option(None, "-o", "--out", help="output directory (default RESULTS/report)"),
           csv: bool = typer.Option(True, "--csv/--no-csv", help="export jobs.csv and probes.csv"),
           cell_figures: bool = typer.Option(False, "--cell-figures",
                                             help="campaigns: also one figure per cell on the group pages (tables only by default)"),
           map_stat: Optional[str] = typer.Option(None, "--map", metavar="STAT",
                                                  help="campaigns: the statistic the maps show: exec-median, exec-p99, "
                                                       "response-median, response-p99 or epsilon (default: the one with "
                                                       "the strongest concluded effect)"),
           svg: bool = typer.Option(False, "--svg", help="also write every figure as SVG beside its PNG (a draw more each; "
                                                         "index.html embeds the PNGs)")):
    """Write the HTML report (self-contained), figures, Markdown summary and CSV files of an experiment
    (of a campaign: verdicts per cell, two-way views, worst cells, one page per group)."""
    results, out = _results_dir(results), (_checked(out, "--out") if out is not None else None)
    with _imports_frozen():
        from .report.build import build
        from .store.frames import reuse_freed_memory

    reuse_freed_memory()  # the report's arrays of every job: freed memory reused, not faulted in afresh
    build(results, out, epsilon, csv=csv, console=_console(), cell_figures=cell_figures, map_stat=map_stat, svg=svg)


@command
def compare(results: list[Path] = typer.Argument(..., help="two results directories or more: the same experiment or campaign "
                                                           "measured on several machines or kernels"),
            label: list[str] = typer.Option([], "--label", help="a name per RESULTS, in order (repeatable; default: "
                                                                  "rt/stock and the kernel release each run recorded)"),
            out: Optional[Path] = typer.Option(None, "-o", "--out", help="output directory (default ./compare-<labels>)"),
            as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON on standard output "
                                                                "(cells, each label's numbers, each change with its CI)")):
    """Put the same experiment or campaign, measured on several machines or kernels, side by side:
    the cells common to all (runs, jobs, response median/p99/max, misses, slowdown; latency victims
    p50/p99/max µs), each label's change against the first (median and p99 ratio with its CI from
    the runs of both sides, significant or not), the cells only some have; compare.md/.csv/.html."""
    results = [_checked(r) for r in results]  # reading converts job logs there
    out = _checked(out, "--out") if out is not None else None
    from .report.compare import run as run_compare  # after the paths are checked, as in `report`

    run_compare(results, label, out, _console(), as_json=as_json)


@command
def gate(results: Path = typer.Argument(..., help="results directory of an experiment or a campaign"),
         baseline: Optional[Path] = typer.Option(None, "--baseline", help="results of the same experiment to compare "
                                                                          "against (median and p99 per cell)"),
         max_regression: Optional[str] = typer.Option(None, "--max-regression", help='allowed growth against the '
                                                      'baseline, e.g. "5%" (default 0%: any significant growth fails)'),
         epsilon: list[str] = typer.Option([], "--epsilon", "-e", help="ε bound METRIC:STATISTIC:BOUND, e.g. "
                                           "response:p99:1.5x or exec:max:12ms (repeatable; added to the stored ones)"),
         strict: bool = typer.Option(False, "--strict", help="inconclusive checks fail too"),
         junit: Optional[Path] = typer.Option(None, "--junit", help="write JUnit XML to FILE (one test case per check)"),
         as_json: bool = typer.Option(False, "--json", help="print the checks as JSON on standard output")):
    """Pass or fail results for a CI pipeline: exit 0 when every ε holds and nothing regressed
    significantly beyond --max-regression against --baseline, 1 when a check failed (one line each,
    with the CI), 2 on bad input; inconclusive checks fail only with --strict."""
    from .report.gate import run as run_gate

    results = _checked(results)  # reading converts job logs there
    baseline = _checked(baseline, "--baseline") if baseline is not None else None
    junit = _output(junit, "--junit")
    code = run_gate(results, baseline=baseline, max_regression=max_regression, epsilons=epsilon, strict=strict,
                    junit_path=junit, as_json=as_json, console=_console())
    raise typer.Exit(code)


@command
def sysinfo(as_json: bool = typer.Option(False, "--json", help="the agent's whole environment document"),
            record: Optional[Path] = typer.Option(None, "--record", help="write this machine's facts to FILE: a machine fixture "
                                                                         "for `plan --machine FILE` / XTALK_MACHINE=FILE"),
            machine: Optional[Path] = typer.Option(None, "--machine", help="show a recorded machine fixture (as $XTALK_MACHINE)")):
    """What this machine offers: kernel, caches, PMU and events, tracefs, cgroups, policies."""
    from .report.sysinfo import show
    from .targets.agent import local_facts, use_machine

    use_machine(machine)
    if record is not None:
        from .report.sysinfo import record as record_fixture

        record = _output(record, "--record")
        path = record_fixture(record)
        _console().print(f"wrote {path}: plan with `xtalk plan --machine {path} FILE` (or XTALK_MACHINE={path})")
        return
    env = local_facts().environment
    if as_json:
        print(json.dumps(env, indent=2))
    else:
        show(env, _console())


@command
def calibrate(pairs: int = typer.Option(180_000, help="back-to-back pairs per instrument"),
              cpu: Optional[int] = typer.Option(None, help="CPU to measure on (default: the last)"),
              drift: str = typer.Option("1s", help="window for clock drift"),
              results: Path = typer.Option(Path("results"), help="base directory for results"),
              intrusiveness: bool = typer.Option(False, "--intrusiveness",
                                                 help="also measure the victim with timestamps only, counters, trace"),
              experiment: Optional[Path] = typer.Option(None, help="victim for --intrusiveness (default: the installed examples' quickstart.toml)"),
              repetitions: int = typer.Option(3, min=1), jobs: int = typer.Option(300, min=10)):
    """Cost of every time source and counter read, clock resolution, offsets and drift."""
    from .calibrate import calibrate as run_calibration
    from .units import duration_ns
    from .targets.agent import refuse_fixture

    refuse_fixture("calibrate")

    try:
        drift_ms = max(1, duration_ns(drift, "--drift") // 1_000_000)
    except ValueError as e:
        raise UsageError(str(e)) from None
    run_calibration(pairs, cpu, drift_ms, results, _console())
    if intrusiveness:
        from .installed import examples_dir
        from .intrusiveness import run as run_intrusiveness

        # The shipped examples, where a pip install keeps them (not the source checkout's).
        run_intrusiveness(experiment or examples_dir() / "quickstart.toml", repetitions, jobs, results, _console())


def _run_dir(run: Path) -> Path:
    if not (run / "run.json").exists():
        raise UsageError(f"{run}: not a run directory (no run.json); give RESULTS/runs/<run>")
    from .outcome import load_outcome
    from .store.check import check_table

    # A run.json cut short or of the wrong shape, a job log or table damaged: one line, exit 2.
    if why := check_table(run, load_outcome(run)):
        raise UsageError(f"{run}: {why}")
    return run


@command
def blame(run: Path = typer.Argument(..., help="a run directory (RESULTS/runs/<run>) recorded with [trace]"),
          top: int = typer.Option(10, help="culprits to list"),
          as_json: bool = typer.Option(False, "--json", help="print the rankings as JSON on standard output (times "
                                                             "as {value, unit} fields)")):
    """Name what slowed the victim's spike jobs (kernel trace): culprits ranked by the time they took
    from them, those over-represented in spikes first, with each one's period; then who woke the
    victim and how late it ran, and who held it off its CPU (preempted it, ran before it after its
    wake-up, interrupted it), by that time, overall and in the slowest jobs."""
    import io

    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    from .store.files import read_parquet
    from .store.jobs import victim_jobs
    from .trace.culprits import rank
    from .trace.parse import trace_file

    run = _run_dir(run)
    jobs = victim_jobs(run)
    if jobs is None:
        raise UsageError(f"{run}: no job log (jobs.bin) nor job table (jobs.parquet); give a run the agent finished")
    if not (run / "culprits.parquet").exists():
        raise UsageError(f"{run}: no kernel trace; add a [trace] table to the experiment and run it as root")
    culprits = read_parquet(run / "culprits.parquet")
    shown, found = (Console(file=io.StringIO()) if as_json else _console()), {}  # with --json: the tables' rows, not the tables
    measured = jobs[~jobs.warmup]
    if trace_file(run) is not None and len(measured) >= 3:
        from .analysis.spikes import culprit_periods
        from .report.culprits import period_lines
        from .results.tables import attribute, run_intervals

        iv, names = run_intervals(run)
        a = attribute(measured, iv, names)
        t = Table(title=f"culprits of the {a.n_spikes} spike jobs (median + 5 MAD) against the {a.n_normal} others, "
                        "by the time they took beyond an ordinary job's share; over-represented ones (Fisher, "
                        "Bonferroni) first")
        for h in ("#", "kind", "name", "in spikes", "in others", "excess ms", "lift", "Fisher p", "associated"):
            t.add_column(h, justify="left" if h in ("kind", "name") else "right")
        for r in a.ranking.head(top).itertuples():
            lift = "–" if pd.isna(r.lift) else ("only in spikes" if r.lift == float("inf") else f"{r.lift:.1f}")
            t.add_row(str(r.rank), r.kind, str(r.name), f"{r.spikes_with}/{a.n_spikes}", f"{r.normal_with}/{a.n_normal}",
                      f"{r.excess_ns / 1e6:.3f}", lift, f"{r.fisher_p:.2g}", "yes" if r.associated else "")
        shown.print(t)
        found["spikes"] = a.ranking.head(top)
        for line in period_lines(culprit_periods(a, iv)):
            shown.print(f"period: {line}", markup=False, highlight=False)
    if "trace_waker" in measured:
        from .trace.wakers import wakers

        w = wakers(measured)
        t = Table(title=f"who woke the victim ({int((measured.trace_waker.astype(str) != '').sum())} of "
                        f"{len(measured)} jobs began with a wake-up), and its wake-up latency (waking → on its CPU)")
        for h in ("waker", "kind", "jobs", "median µs", "max µs"):
            t.add_column(h, justify="left" if h in ("waker", "kind") else "right")
        for r in w.head(top).itertuples():
            t.add_row(str(r.waker), r.kind, str(r.jobs), f"{r.median_wakeup_ns / 1e3:.1f}", f"{r.max_wakeup_ns / 1e3:.1f}")
        shown.print(t)
        found["wakers"] = w.head(top)
    slow = measured[measured.exec_ns >= measured.exec_ns.quantile(0.99)].job
    for key, title, c in (("all_jobs", "all jobs", culprits),
                          ("slowest_jobs", f"slowest 1 % of jobs ({len(slow)})", culprits[culprits.job.isin(slow)])):
        t = Table(title=f"who held the victim off its CPU (preempted it, ran before it after its wake-up, "
                        f"interrupted it), by that time: {title}")
        for h in ("kind", "name", "jobs", "blocked ms", "preempted ms", "ran before ms", "interrupted ms",
                  "max µs", "present ms"):
            t.add_column(h, justify="left" if h in ("kind", "name") else "right")
        ranked = rank(c)
        for r in ranked.head(top).itertuples():
            t.add_row(r.kind, str(r.name), str(r.jobs_blocked), f"{r.blocked_ns / 1e6:.3f}", f"{r.preempted_ns / 1e6:.3f}",
                      f"{r.before_ns / 1e6:.3f}", f"{r.interrupted_ns / 1e6:.3f}", f"{r.max_blocked_ns / 1e3:.1f}",
                      f"{r.total_ns / 1e6:.3f}")
        shown.print(t)
        found[key] = ranked.head(top)
    if "trace_preemptions" in measured:
        shown.print(f"{len(measured)} jobs: {int(measured.trace_preemptions.sum())} preemptions, "
                      f"{measured.trace_runnable_ns.sum() / 1e6:.3f} ms runnable but not running, "
                      f"{int(measured.trace_migrations.sum())} migrations, "
                      f"{measured.trace_irq_ns.sum() / 1e6:.3f} ms in hard IRQs, {measured.trace_softirq_ns.sum() / 1e6:.3f} ms in softirqs")
    if as_json:
        from .report.verdicts import rows_with_units, table_document

        extra = {k: rows_with_units(v) for k, v in found.items() if k != "all_jobs"}
        print(json.dumps(table_document("blame", run, found["all_jobs"], extra), indent=2, ensure_ascii=False, default=str))


@command
def perfetto(run: Path = typer.Argument(..., help="a run directory recorded with [trace]"),
             out: Optional[Path] = typer.Option(None, "-o", "--out",
                                                help="output file (default RUN/trace.pftrace, or RUN/trace.perfetto.json with --format json)"),
             fmt: str = typer.Option("proto", "--format",
                                     help="proto: Perfetto's trace format (kernel sched events, thread states, job tracks); "
                                          "json: the Chrome JSON trace-event format")):
    """Export a run as a trace that ui.perfetto.dev opens: the kernel's scheduling events, every
    task named, the victim's jobs with releases, deadlines, execution time and lateness."""
    from .outcome import load_outcome
    from .store.jobs import victim_jobs
    from .trace.parse import parse_file, trace_file
    from .trace.run import labels, target_pid, thread_groups

    if fmt not in ("proto", "json"):
        raise UsageError(f"--format: '{fmt}' is not a trace format; write proto (Perfetto's, the default) or json (Chrome JSON)")
    run = _run_dir(run)
    out = _output(out, "--out")
    if trace_file(run) is None:
        raise UsageError(f"{run}: no kernel trace (trace.dat or trace.txt); add a [trace] table to the experiment")
    jobs = victim_jobs(run)
    meta = load_outcome(run)
    events = parse_file(trace_file(run))
    if fmt == "json":
        from .trace import chrome_json

        path = chrome_json.write(events, jobs, labels(meta), out or run / "trace.perfetto.json")
    else:
        from .trace import perfetto as pf

        path = pf.write(events, jobs, labels(meta), out or run / "trace.pftrace", victim=target_pid(meta),
                        threads_of=thread_groups(meta, events))
    _console().print(f"wrote {path}: open it at https://ui.perfetto.dev")


@command
def query(results: Path = typer.Argument(..., help="a campaign or experiment directory"),
          sql: str = typer.Argument(..., help="SQL over the views `jobs`, `runs`, `probes`, `culprits`, `cells` and `segments`"),
          csv: bool = typer.Option(False, "--csv", help="CSV instead of a table"),
          allow_writes: bool = typer.Option(False, "--allow-writes",
                                            help="run any SQL (COPY TO, ATTACH, other files...), not only reading "
                                                 "statements over these results; for results you own")):
    """Run SQL (DuckDB) over a campaign's or an experiment's jobs, runs, probes (every probe
    sample, named), culprits (per traced job, each task and interrupt with the time it held the
    victim off its CPU), cells (one row per configuration × scenario, or per campaign cell: the
    numbers `xtalk summary` and the report show) and segments (the trace segments' statistics per
    configuration × scenario; each job's are the jobs view's seg_<name>_ns columns). Read-only: only reading statements run, and
    DuckDB reads only these results' own files (docs/results.md, "Querying safely")."""
    import re

    import duckdb

    from . import open as open_results
    from .store import sandbox

    results = _checked(results)  # reading converts job logs there
    try:
        store = open_results(results)
        con = store.connect()
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    if not allow_writes:
        sandbox.check_reading(con, sql)
    if re.search(r"\bcells\b", sql, re.IGNORECASE):  # computed only when asked: it bootstraps every slowdown CI
        con.register("cells", _cells(results))
    if re.search(r"\bsegments\b", sql, re.IGNORECASE):  # the same: bootstrapped CIs
        from .analysis.segments import segment_cells

        con.register("segments", segment_cells(store.jobs(), store.runs()))
    if not allow_writes:
        sandbox.lock(con, store.parquet_files)
    try:
        df = con.execute(sql).df()
    except duckdb.Error as e:
        raise UsageError(f"query: {str(e).splitlines()[0]}") from None
    if csv:
        print(df.to_csv(index=False), end="")
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", 200, "display.width", 200, "display.max_columns", 50):
            print(df.to_string(index=False))


def _cells(path: Path):
    """The cells the summary and the report read: an experiment's (results/tables.cells) or a
    campaign's (results/campaign_cells.cell_table), without the guards' list column."""
    from .results import campaign_cells as cc
    from .results import tables as tb

    if cc.is_campaign(path):
        return cc.cell_table(cc.load_campaign(path)).drop(columns=["warnings"], errors="ignore")
    return tb.cells(tb.load(path))


@contextmanager
def _imports_frozen():
    """The analysis stack's imports (pandas, SciPy, Matplotlib, the models) with the garbage
    collector off, then frozen: each full collection during the imports walked every object
    loaded so far (three of them, ~0.15 s CPU), and each one after walked them all again
    (60-80 ms each, in the report's forked child too, whose walk also wrote to the pages it
    shares with the parent). What the imports leave (~300 000 objects, the cycles they dropped
    included; the report's peak memory measured the same) stays out of every later
    collection, as Python's docs advise before a fork (gc.freeze); collection resumes for
    what the command makes after. Nothing is done where pandas is loaded already (a caller
    in-process, a test session): a freeze there would keep whatever garbage the caller's
    objects have left uncollected."""
    import gc

    if "pandas" in sys.modules or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
    gc.freeze()


def _checked(path: Path, what: str = "RESULTS") -> Path:
    """`path`, a directory this command writes in (files it makes, job logs it converts),
    resolved; as root, refused like an experiment file someone else could write."""
    from .safepath import results_dir

    return results_dir(path, what)


def _results_dir(path: Path) -> Path:
    """`path` checked like `_checked`, and refused unless it holds runs/ (an experiment's or a
    campaign's results): said before the report stack's imports (~1.5 s CPU) are paid."""
    path = _checked(path)
    if not (path / "runs").is_dir():
        raise UsageError(f"{path}: not an xtalk results directory (no runs/); give the directory "
                         "`xtalk run` printed, RESULTS/<experiment>-<date>")
    return path


def _output(path: Path | None, what: str) -> Path | None:
    """`path`, a single file this command writes (`--junit`, `--out FILE`...), resolved and
    checked before anything runs (safepath.output_file: another user's link or directory is
    refused, exit 2); None stays None."""
    from .safepath import output_file

    return output_file(path, what) if path is not None else None


def _results(path: Path):
    from .store import open as open_results

    try:
        return open_results(_checked(path))
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None


def _view(name: str, results: Path, as_json: bool, tolerance: Optional[float] = None) -> None:
    """`xtalk summary RESULTS --view NAME`: the view's table, printed, or with ``as_json`` its
    JSON on standard output (report/verdicts.table_document); its files written either way.
    Overheads' coverage comes as a second table."""
    import importlib
    import io

    from rich.console import Console

    show = importlib.import_module(f".report.{name}", __package__).show
    extra = (1.5 if tolerance is None else tolerance,) if name == "containment" else ()
    try:
        r = _results(results)
        got = show(r, Console(file=io.StringIO()) if as_json else _console(), *extra)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if as_json:
        from .report.verdicts import rows_with_units, table_document

        table, more = (got[0], {"coverage": rows_with_units(got[1])}) if isinstance(got, tuple) else (got, None)
        print(json.dumps(table_document(name, r.path, table, more), indent=2, ensure_ascii=False, default=str))


def _old_view(name: str, results: Path, as_json: bool, tolerance: Optional[float] = None) -> None:
    """A view's old verb: the view, after one deprecation line on standard error (the
    style of config/deprecations.py: the old spelling and the new)."""
    said = f"xtalk summary RESULTS --view {name}" + (" --tolerance X" if name == "containment" else "")
    print(f"xtalk: deprecated: `xtalk {name} RESULTS` is now `{said}`", file=sys.stderr)
    _view(name, results, as_json, tolerance)


_JSON_HELP = "print the table as JSON on standard output (the verdict document's shapes: numbers with their unit as fields)"


@app.command(hidden=True)
@command_wrapper
def latency(results: Path = typer.Argument(..., help="results directory of a `latency` victim experiment"),
            as_json: bool = typer.Option(False, "--json", help=_JSON_HELP)):
    """Deprecated: `xtalk summary RESULTS --view latency`."""
    _old_view("latency", results, as_json)


@app.command(hidden=True)
@command_wrapper
def overheads(results: Path = typer.Argument(..., help="results directory of an experiment run with [trace]"),
              as_json: bool = typer.Option(False, "--json", help=_JSON_HELP)):
    """Deprecated: `xtalk summary RESULTS --view overheads`."""
    _old_view("overheads", results, as_json)


@app.command(hidden=True)
@command_wrapper
def tasks(results: Path = typer.Argument(..., help="results directory of a `taskset` victim experiment"),
          as_json: bool = typer.Option(False, "--json", help=_JSON_HELP)):
    """Deprecated: `xtalk summary RESULTS --view tasks`."""
    _old_view("tasks", results, as_json)


@app.command(hidden=True)
@command_wrapper
def containment(results: Path = typer.Argument(..., help="results directory of an experiment with fault scenarios"),
                tolerance: float = typer.Option(1.5, min=1.0, help="p99 response allowed, as a multiple of solo's"),
                as_json: bool = typer.Option(False, "--json", help=_JSON_HELP)):
    """Deprecated: `xtalk summary RESULTS --view containment`."""
    _old_view("containment", results, as_json, tolerance)


@command
def evidence(args: list[str] = typer.Argument(..., metavar="RESULTS... | verify BUNDLE | replay BUNDLE",
                                             help="results directories (experiments, campaigns); or `verify BUNDLE`; "
                                                  "or `replay BUNDLE`"),
             out: Optional[Path] = typer.Option(None, "--out", help="the bundle directory to write (new or empty); "
                                                "replay: the directory of its results (default ./replay-BUNDLE-DATE)"),
             key: Optional[Path] = typer.Option(None, "--key", help="SSH private key that signs manifest.json (e.g. ~/.ssh/id_ed25519)"),
             signer_key: Optional[Path] = typer.Option(None, "--signer-key",
                                                       help="verify: the public key the signature must be made by"),
             n_boot: int = typer.Option(2000, "--n-boot", min=100, help="bootstrap resamples of the CIs"),
             no_pdf: bool = typer.Option(False, "--no-pdf", help="write index.html only (no headless Chromium)"),
             ecss_margin: list[str] = typer.Option([], "--ecss-margin", metavar="REVIEW=SHARE",
                                                    help="the CPU margin a review asks in the ECSS view, e.g. CDR=35% "
                                                         "(repeatable; defaults PDR=50%, CDR=35%, QR=25%)"),
             target: str = typer.Option("local", "--target", help="replay: where to run the plans (local, ssh://...)"),
             tolerance: str = typer.Option("20%", "--tolerance", help="replay: the change of a cell's median response "
                                           "time that still reproduces (95 % CI within ±this)"),
             other_machine: bool = typer.Option(False, "--other-machine", help="replay: run even on another kind of "
                                                "machine (CPU model, CPUs, architecture) than the recorded one"),
             as_json: bool = typer.Option(False, "--json", help="replay: print replay.json on standard output")):
    """An objective-indexed, signed evidence bundle from results; `xtalk evidence verify BUNDLE` checks one;
    `xtalk evidence replay BUNDLE` re-runs its plans and says per cell whether the recorded result reproduces
    (exit 0 all reproduced, 1 some not or inconclusive, 2 bad input or a damaged bundle)."""
    if ecss_margin and args[0] in ("verify", "replay"):
        raise UsageError("--ecss-margin goes with making a bundle (xtalk evidence RESULTS... --out BUNDLE)")
    if args[0] != "replay" and (target != "local" or tolerance != "20%" or other_machine or as_json):
        raise UsageError("--target, --tolerance, --other-machine and --json go with `xtalk evidence replay BUNDLE`")
    if args[0] == "replay":
        if len(args) != 2 or key is not None or signer_key is not None:
            raise UsageError("xtalk evidence replay: give one bundle directory (and --out, --target, --tolerance)")
        code = _replay(Path(args[1]), out, target, tolerance, other_machine, as_json, n_boot)
        raise typer.Exit(code)
    if args[0] == "verify":
        from .evidence.manifest import signed_by, verify

        if len(args) != 2 or out is not None or key is not None:
            raise UsageError("xtalk evidence verify: give one bundle directory (and --signer-key PUB to check who signed)")
        problems = verify(Path(args[1]), signer_key)
        for line in problems:
            _console().print(f"[red]{line}[/]", highlight=False, soft_wrap=True)
        if problems:
            raise typer.Exit(1)
        _console().print(f"{args[1]}: intact, " + signed_by(Path(args[1]), signer_key), highlight=False, soft_wrap=True)
        return
    if out is None:
        raise UsageError("xtalk evidence: --out BUNDLE is required (the directory to write the bundle to)")
    if signer_key is not None:
        raise UsageError("--signer-key checks a bundle: use it with `xtalk evidence verify BUNDLE`; to sign, give --key")
    from .evidence.bundle import build
    from .evidence.views import ecss_margins

    margins = ecss_margins(ecss_margin)  # bad input: exit 2 before any work
    build([Path(a) for a in args], out, key, n_boot=n_boot, pdf=not no_pdf, ecss_margins=margins,
          say=lambda s: _console().print(s, highlight=False, soft_wrap=True, markup=False))  # "[[application]]" is text


def _replay(bundle: Path, out: Optional[Path], target: str, tolerance: str, other_machine: bool, as_json: bool,
            n_boot: int) -> int:
    """`xtalk evidence replay`: progress on stderr with --json (stdout holds the document)."""
    import json
    import sys

    from rich.console import Console

    from .evidence.replay import replay, summary_line
    from .units import fraction

    try:
        tol = fraction(tolerance, "--tolerance", high=10.0)
    except ValueError as e:
        raise UsageError(str(e)) from None
    say_to = Console(stderr=True) if as_json else _console()
    r = replay(bundle, _checked(out, "--out") if out is not None else None, target, tol, other_machine, n_boot,
               say=lambda s: say_to.print(s, highlight=False, soft_wrap=True, markup=False))
    if as_json:
        json.dump(r.to_dict(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for c in r.cells:
            style = "green" if c.verdict == "reproduced" else "red" if c.verdict == "not reproduced" else "yellow"
            _console().print(f"[{style}]{c.verdict}[/]: {c.name}: median {c.line().split(': median ', 1)[1]}",
                          highlight=False, soft_wrap=True)
    say_to.print(f"{summary_line(r)}; {r.out / 'replay.md'}", highlight=False, soft_wrap=True, markup=False)
    return r.exit_code


@command
def probe(cflags: bool = typer.Option(False, "--cflags", help="compiler flags for #include <xtalk/probe.h>"),
          libs: bool = typer.Option(False, "--libs", help="linker flags"),
          preload: bool = typer.Option(False, "--preload", help="the syscall-probe library (a command victim's `preload`)"),
          pkg_config_path: bool = typer.Option(False, "--pkg-config-path", help="the directory of xtalk-probe.pc (PKG_CONFIG_PATH)")):
    """Where the installed probe files are, for a build system: cc $(xtalk probe --cflags) app.c $(xtalk probe --libs)."""
    from . import installed

    chosen = [f for on, f in ((cflags, installed.cflags), (libs, installed.libs), (preload, installed.preload_library),
                              (pkg_config_path, installed.pkgconfig_dir)) if on]
    if not chosen:
        raise UsageError("xtalk probe: say what to print: --cflags, --libs, --preload or --pkg-config-path")
    print(" ".join(str(f()) for f in chosen))


@command
def examples():
    """The directory of the examples shipped with xtalk (copy it: cp -r "$(xtalk examples)" my-examples)."""
    from . import installed

    print(installed.examples_dir())


#: The sub-command groups that live in their own packages: name, module, the group's help
#: (its app's own; tests/test_cli_startup.py keeps the two equal).
GROUPS = (("model", "xtalk.model.cli", "Interference model (seed 000, chapter 4): exhaustive explorer and UPPAAL export."),
          ("sched", "xtalk.sched.cli", "Schedulability (seed 001): RTA, EDF, PRM, VM budgets, SCHED_DEADLINE, simulation."),
          ("campaign", "xtalk.campaign.cli", "Campaigns: many experiments, unattended, journaled, resumable."))


def _mount_optional(argv: list[str] | None = None, placeholders: bool = False):
    """Sub-command groups that live in their own packages: the one the command line names,
    or all of them when it names none (help, completion). Importing them all cost every
    command a second and more (`sched` brings pandas and scipy along). With `placeholders`,
    a command line that names none (`xtalk --help`) gets each group as its help line only,
    nothing imported."""
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    groups = {name: module for name, module, _ in GROUPS}
    named = words[0] if words and (words[0] in app_commands() or words[0] in groups) else None
    for name, module, help_text in GROUPS:
        if named is not None and named != name:
            continue
        if named is None and placeholders:
            app.add_typer(typer.Typer(help=help_text), name=name)
            continue
        try:
            mod = __import__(module, fromlist=["app"])
        except ImportError:
            continue
        app.add_typer(mod.app, name=name)


def _only_the_named_command(argv: list[str] | None = None) -> None:
    """When the command line names a top-level command, keep that one registered only: typer
    builds every registered command's options on each start, and `xtalk plan` needs its own.
    A line that names none, or a misspelled one, keeps them all (help, "no such command")."""
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    if words and words[0] in app_commands():
        app.registered_commands[:] = [c for c in app.registered_commands
                                      if (c.name or c.callback.__name__.replace("_", "-")) == words[0]]


def _completing() -> bool:
    """Whether the shell asks for completions (typer's _XTALK_COMPLETE): every group is
    mounted then, whatever the words typed so far."""
    import os

    return any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)


def app_commands() -> set[str]:
    """The names of the top-level commands (not the sub-command groups)."""
    return {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: one clear line and a documented exit code for every failure (the
    command line's own errors too: an unknown option or a value of the wrong type is one
    line naming the command and the option, exit 2, not click's framed block)."""
    try:
        _main()
    finally:
        # What the command leaves (modules, models, schemas) lives until the process exits:
        # frozen, the interpreter's last garbage collections at exit do not walk it all
        # again (about 65 ms of `xtalk plan`'s 350 ms CPU on a 2-vCPU guest).
        import gc

        gc.freeze()


def _main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    _mount_optional(placeholders=not _completing())
    if not _completing():
        _only_the_named_command()
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        print("xtalk: interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as e:  # click's errors (typer's copy of click): usage, bad values
        ctx = getattr(e, "ctx", None)
        names = []
        while ctx is not None and ctx.parent is not None:  # the root's name is how Python was called
            names.insert(0, ctx.info_name)
            ctx = ctx.parent
        where = " ".join(["xtalk", *names])
        message = " ".join(e.format_message().split()).rstrip(".")
        print(f"{where}: {message}; see `{where} --help`", file=sys.stderr)
        sys.exit(getattr(e, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
