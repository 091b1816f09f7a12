"""The `xtalk` command line: commands only, the work lives in the modules they call."""

from __future__ import annotations

import functools
import json
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .errors import AgentError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="xtalk: measure timing interference between applications on a multicore processor.")
# Tables stay readable when the output goes to a file or a CI log.
console = Console() if sys.stdout.isatty() else Console(width=160)


def command(fn):
    """Register a command whose failures end as one line and a documented exit code:
    2 bad input, 3 agent problem, 130 interrupted."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            print(f"xtalk: {e}", file=sys.stderr)
            raise typer.Exit(UsageError.exit_code) from None
        except AgentError as e:
            print(f"xtalk: {e}", file=sys.stderr)
            raise typer.Exit(AgentError.exit_code) from None
        except KeyboardInterrupt:
            print("xtalk: interrupted; every process stopped, partial results kept", file=sys.stderr)
            raise typer.Exit(130) from None

    return app.command()(wrapper)


@command
def run(experiment: Path = typer.Argument(..., help="experiment file (TOML)"),
        results: Optional[Path] = typer.Option(None, help="base directory for results (default: the file's `results`)")):
    """Run an experiment: the victim against each enemy scenario, interleaved, then the summary table."""
    from .runner import run_experiment

    run_experiment(experiment, results, console)


@command
def plan(experiment: Optional[Path] = typer.Argument(None, help="experiment file (TOML)"),
         schema: bool = typer.Option(False, "--schema", help="print the run plan's JSON Schema"),
         show: bool = typer.Option(False, "--show", help="print the plan of the first run of each scenario")):
    """Print the run-plan JSON Schema, or what an experiment would run (nothing is started)."""
    from .plan import json_schema

    if schema:
        print(json.dumps(json_schema(), indent=2))
        return
    if experiment is None:
        raise UsageError("plan: give an experiment file, or --schema")
    from .runner import RUN_OVERHEAD_S, prepare

    _, runs, _ = prepare(experiment)
    total = sum(r.expected_seconds() + RUN_OVERHEAD_S for r in runs)
    console.print(f"{len(runs)} runs, about {total:.0f} s; order: " + ", ".join(r.run_id for r in runs))
    if show:
        seen = set()
        for r in runs:
            if r.scenario not in seen:
                seen.add(r.scenario)
                print(r.plan.to_json())


@command
def summary(results: Path = typer.Argument(..., help="results directory of an experiment")):
    """Print (and rewrite) the summary table of a results directory."""
    from .report.summary import write_summary
    from .store import open as open_results

    try:
        r = open_results(results)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    write_summary(r, console=console)


@command
def characterize(quick: bool = typer.Option(False, "--quick", help="few enemies, short runs (under 10 minutes on 2 cores)"),
                 results: Path = typer.Option(Path("results"), help="base directory for the results"),
                 enemy: Optional[list[str]] = typer.Option(None, help="enemies to use (repeatable; default: all, or a few with --quick)"),
                 repetitions: Optional[int] = typer.Option(None, min=1, help="runs per scenario (default 5, 4 with --quick)"),
                 jobs: Optional[int] = typer.Option(None, min=5, help="measured jobs per run (default 200, 30 with --quick)")):
    """Characterise this machine: resource probes against each enemy and 1..N copies; writes a
    sensitivity matrix (Parquet, CSV), a heat map (PNG, SVG) and the channels that matter."""
    from .characterize import characterize as run_characterize

    run_characterize(results, quick, console, repetitions=repetitions, enemies=enemy, jobs=jobs)


@command
def sysinfo():
    """Print what the agent reports about this machine (JSON)."""
    from .targets.agent import local_facts

    print(json.dumps(local_facts().environment, indent=2))


def _mount_optional():
    """Sub-command groups that live in their own packages."""
    for name, module in (("model", "xtalk.model.cli"), ("sched", "xtalk.sched.cli")):
        try:
            mod = __import__(module, fromlist=["app"])
        except ImportError:
            continue
        app.add_typer(mod.app, name=name)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: one clear line and a documented exit code for every failure."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    _mount_optional()
    app()


if __name__ == "__main__":
    main()
