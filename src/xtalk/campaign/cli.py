"""`xtalk campaign ...`: schema, plan, run, status, resume (mounted by xtalk.cli)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .. import safepath
from ..command import command_wrapper
from ..errors import UsageError

app = typer.Typer(no_args_is_help=True, help="Campaigns: many experiments, unattended, journaled, resumable.")
console = Console() if sys.stdout.isatty() else Console(width=200)


def _command(fn):
    return app.command()(command_wrapper(fn))


#: `--lg-coordinator`: the labgrid coordinator of `labgrid://` targets without their own.
_LG = typer.Option(None, "--lg-coordinator", help="labgrid coordinator HOST:PORT for labgrid:// targets (else "
                   "$LG_COORDINATOR, else the environment file's coordinator_address)")


def _targets(specs: list[str], lg_coordinator: str | None = None):
    from ..targets.spec import from_spec

    if lg_coordinator:  # what labgrid itself reads, for every board and labgrid's own calls
        os.environ["LG_COORDINATOR"] = lg_coordinator

    targets = [from_spec(s) for s in (specs or ["local"])]
    names = [t.name for t in targets]
    for n in names:
        if names.count(n) > 1:
            raise UsageError(f"--target {n} is given twice; one run at a time per target, so list each target once")
    return targets


@contextlib.contextmanager
def release_boards(targets):
    """Lab boards (targets/labgrid.py) powered off and their places released at the end,
    also on failure or interrupt; what each board said (failed, taken over) printed."""
    try:
        yield
    finally:
        for t in targets:
            if hasattr(t, "release"):
                try:
                    t.close()
                except Exception as e:  # noqa: BLE001 - the other boards are released all the same
                    t.notes.append(f"{t.name}: could not release place {t.place}: {e}; "
                                   f"`labgrid-client -p {t.place} release`")
                for note in t.notes:
                    console.print(f"[yellow]lab: {note}[/]", highlight=False, soft_wrap=True)


def _first_kernel(targets, campaign_file: Path) -> None:
    """Lab boards without `kernel=` boot the campaign's first kernel for the checks before the
    runs too, so that the first batch needs no second boot."""
    boards = [t for t in targets if hasattr(t, "release") and getattr(t, "kernel", None) is None]
    if boards:
        from .schema import load

        kernels = load(campaign_file)[0].kernels
        for t in boards:
            t.kernel = kernels[0] if kernels else None


def _board_logs(targets, store: Path) -> None:
    """A lab board that fails, in the checks before the runs too, keeps its boot log in the
    campaign directory (targets/labgrid.py), and journals its place's events."""
    import functools

    from .executor import BOARDS
    from .journal import append_lines
    from .layout import JOURNAL

    for t in targets:
        if hasattr(t, "log_dir"):
            t.log_dir = store / BOARDS
        if hasattr(t, "journal"):  # its place's events (acquired, taken over, released...) journalled
            t.journal = functools.partial(append_lines, store / JOURNAL)


def _no_boards_on_a_cluster(targets, cluster) -> None:
    """--cluster with a labgrid:// target refused (exit 2): a Dask worker lives on past any run,
    so nothing would power its board off and release its place (docs/lab.md)."""
    board = next((t for t in targets if hasattr(t, "release")), None)
    if cluster and board is not None:
        raise UsageError(f"--target labgrid://{board.place}: a lab board is driven by the campaign's own executor, "
                         "not by --cluster's workers (nothing would release its place); drop --cluster")


def _take_over(targets) -> None:
    """A resume acquires its lab boards' places at once: those a killed host left held are taken
    over (journalled), and every one is released at the end, also a board given no run now.
    A coordinator that does not answer is tried again when the board is first asked."""
    from ..targets.base import TargetUnreachable

    for t in targets:
        if hasattr(t, "release"):
            with contextlib.suppress(TargetUnreachable):
                t.acquire()


def _cluster_options():
    """The options that secure a cluster connection (shared by `run` and `resume`)."""
    return {
        "tls_ca": typer.Option(None, "--tls-ca", help="the cluster's CA certificate (PEM), for a tls:// scheduler"),
        "tls_cert": typer.Option(None, "--tls-cert", help="this client's certificate (PEM), signed by that CA"),
        "tls_key": typer.Option(None, "--tls-key", help="this client's private key (PEM)"),
        "insecure_cluster": typer.Option(False, "--insecure-cluster",
                                         help="accept a plain tcp:// scheduler (loopback included): anyone reaching it "
                                              "runs code as root on every board"),
    }


_CLUSTER = _cluster_options()


def _security(cluster, tls_ca, tls_cert, tls_key, insecure_cluster):
    """Check the cluster options before anything starts; the dask Security to use."""
    if not cluster:
        if tls_ca or tls_cert or tls_key or insecure_cluster:
            raise UsageError("--tls-ca/--tls-cert/--tls-key/--insecure-cluster go with --cluster; add --cluster tls://HOST:PORT")
        return None
    from .dask import cluster_security, local_workers

    if local_workers(cluster) is not None:  # xtalk makes the scheduler and its certificates
        if tls_ca or tls_cert or tls_key or insecure_cluster:
            raise UsageError(f"--cluster {cluster} makes its own certificates; drop --tls-ca/--tls-cert/--tls-key/--insecure-cluster")
        return None
    return cluster_security(cluster, tls_ca, tls_cert, tls_key, insecure_cluster)


def _kind(targets, cluster) -> str:
    if cluster:
        return "dask"
    return "ssh" if any(t.__class__.__name__ == "SshTarget" for t in targets) else "local"


_SKIP = typer.Option(False, "--skip-feasibility",
                     help="run even if a victim cannot hold its period alone (the guards still say so); the work of "
                          "`victim.utilization` is calibrated all the same")


def _preflight_seconds(plans, skip_feasibility: bool) -> float:
    """What the pre-flight passes (calibration, feasibility) add, locally."""
    from .estimate import RUN_OVERHEAD_S, solo_touch_seconds
    from .preflight import cell_of, estimated_seconds

    by_cell: dict = {}
    for p in plans:
        by_cell.setdefault(cell_of(p.labels), []).append(p)
    overhead = RUN_OVERHEAD_S["local"] + (solo_touch_seconds(plans[0]) if plans else 0.0)
    return estimated_seconds(by_cell, skip_feasibility, overhead)


@_command
def schema():
    """Print the JSON Schema of campaign files (for editors)."""
    from .schema import schema_text

    print(schema_text())


@_command
def plan(file: Path = typer.Argument(..., help="campaign file (TOML)"),
         target: list[str] = typer.Option([], "--target", help="where it would run (default local)"),
         show_runs: bool = typer.Option(False, "--runs", help="list every run in order"),
         skip_feasibility: bool = typer.Option(False, "--skip-feasibility", help="as `campaign run --skip-feasibility`")):
    """Number of runs and estimated duration; nothing runs."""
    from ..trust import warn_untrusted
    from .estimate import campaign_seconds, human, startup_seconds
    from .prepare import prepare

    warn_untrusted(file)
    targets = _targets(target)
    p = prepare(file, targets)
    plans = [r.plan for r in p.expansion.runs]
    secs = campaign_seconds(plans, _kind(targets, None), len(targets), startup=startup_seconds()) + \
        _preflight_seconds(plans, skip_feasibility)
    cells = {(r.labels["application"], r.labels["configuration"], r.labels["variant"], r.labels["scenario"])
             for r in p.expansion.runs}
    console.print(f"{p.campaign.name}: {len(plans)} runs ({len(cells)} cells × up to {p.campaign.repetitions} repetitions), "
                  f"estimated {human(secs)} ({secs:.1f} s) on {len(targets)} target(s)")
    for labels, why in p.expansion.excluded:
        console.print(f"  excluded: {labels.get('application')}/{labels.get('configuration')}/{labels.get('two_way')} "
                      f"n={labels.get('enemies')} total={labels.get('total')}: {why}")
    if show_runs:
        for r in p.expansion.runs:
            print(r.run_id)


@_command
def run(file: Path = typer.Argument(..., help="campaign file (TOML)"),
        results: Optional[Path] = typer.Option(None, help="base directory (default: the file's `results`)"),
        target: list[str] = typer.Option([], "--target", help="local (default), ssh://user@host:port or "
                                    "labgrid://PLACE?env=FILE (docs/lab.md); repeat for a pool"),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="Dask scheduler, e.g. tls://10.0.0.1:8786, "
                                             "or local[:N]: N workers here behind a TLS scheduler xtalk starts"),
        target_wait: float = typer.Option(600.0, help="seconds to wait for a target that does not answer before stopping"),
        tls_ca: Optional[Path] = _CLUSTER["tls_ca"], tls_cert: Optional[Path] = _CLUSTER["tls_cert"],
        tls_key: Optional[Path] = _CLUSTER["tls_key"], insecure_cluster: bool = _CLUSTER["insecure_cluster"],
        skip_feasibility: bool = _SKIP,
        gate: bool = typer.Option(False, "--gate", help="then gate the campaign as `xtalk gate` does (each application's "
                                  "ε, --baseline): exit 1 when a check failed"),
        baseline: Optional[Path] = typer.Option(None, "--baseline", help="with --gate: a campaign to compare against"),
        max_regression: Optional[str] = typer.Option(None, "--max-regression", help='with --gate: allowed growth, e.g. "5%"'),
        strict: bool = typer.Option(False, "--strict", help="with --gate: inconclusive checks fail too"),
        junit: Optional[Path] = typer.Option(None, "--junit", help="with --gate: write JUnit XML to FILE"),
        lg_coordinator: Optional[str] = _LG):
    """Run a campaign: validate and check everything, calibrate and check each cell's victim
    alone, then run with a progress bar and ETA; write DIR/verdicts.json. Exit status: 0 every run
    completed (and, with --gate, no check failed), 1 a gate check failed, 2 bad input, 3 agent
    problem, 4 some runs failed, 5 all did, 130 interrupted."""
    from ..trust import require_trusted
    from ..report.gate import options as gate_options

    require_trusted(file)  # its argv, preloads and paths run as root
    from ..targets.agent import refuse_fixture

    refuse_fixture("campaign run")
    gating = gate_options(gate, baseline, max_regression, strict, junit)  # bad gate input: exit 2 before any run
    security = _security(cluster, tls_ca, tls_cert, tls_key, insecure_cluster)
    targets = _targets(target, lg_coordinator)
    _no_boards_on_a_cluster(targets, cluster)
    _first_kernel(targets, file)
    with release_boards(targets):
        _run(file, targets, cluster, results, skip_feasibility, target_wait, security, gating)


def _run(file, targets, cluster, results, skip_feasibility, target_wait, security, gating) -> None:
    from . import layout
    from .estimate import campaign_seconds
    from . import settings as declared_settings
    from .prepare import prepare
    from .schema import load as load_campaign

    # The declared settings before the agent is asked anything: a machine that differs starts nothing.
    declared = declared_settings.declared(file, load_campaign(file)[0].settings, targets, cluster)
    p = prepare(file, targets)
    kind = _kind(targets, cluster)
    meta = {"name": p.campaign.name, "kind": kind, "source": str(file),
            **(declared_settings.meta_fields(declared) if declared is not None else {}),
            "estimate_s": campaign_seconds([r.plan for r in p.expansion.runs], kind, len(targets))
            + (0.0 if cluster else _preflight_seconds([r.plan for r in p.expansion.runs], skip_feasibility)),
            "applications": [json.loads(a.model_dump_json()) for a in p.campaign.application],
            "skip_feasibility": skip_feasibility}
    base = safepath.results_dir(results or p.campaign.results, "--results" if results else f"{file}: results =")
    store = layout.create(base, p.campaign.name, p.text, p.expansion, meta)
    console.print(f"campaign directory: {store}")
    _board_logs(targets, store)
    try:
        _preflight(store, targets, cluster, skip_feasibility, target_wait)
    except UsageError:
        import shutil

        shutil.rmtree(store)  # refused before the first run: nothing to keep
        raise
    _drive(store, targets, cluster, target_wait, security, gating)


@_command
def resume(store: Path = typer.Argument(..., help="campaign directory"),
           target: list[str] = typer.Option([], "--target", help="local (default) or ssh://...; repeat for a pool"),
           cluster: Optional[str] = typer.Option(None, "--cluster", help="Dask scheduler address, e.g. tls://10.0.0.1:8786, "
                                                "or local[:N]"),
           target_wait: float = typer.Option(600.0, help="seconds to wait for a target that does not answer"),
           tls_ca: Optional[Path] = _CLUSTER["tls_ca"], tls_cert: Optional[Path] = _CLUSTER["tls_cert"],
           tls_key: Optional[Path] = _CLUSTER["tls_key"], insecure_cluster: bool = _CLUSTER["insecure_cluster"],
           skip_feasibility: bool = _SKIP, lg_coordinator: Optional[str] = _LG):
    """Finish an interrupted campaign: no run lost, none repeated (nor a finished pre-flight cell)."""
    from ..trust import require_trusted
    from .layout import CAMPAIGN_JSON

    require_trusted(Path(store) / CAMPAIGN_JSON)  # the plans it runs as root
    store = safepath.results_dir(store, "campaign directory")
    from ..targets.agent import refuse_fixture

    refuse_fixture("campaign resume")
    security = _security(cluster, tls_ca, tls_cert, tls_key, insecure_cluster)
    targets = _targets(target, lg_coordinator)
    _no_boards_on_a_cluster(targets, cluster)
    _board_logs(targets, store)
    _first_kernel(targets, Path(store) / "campaign.toml")  # the file as given, kept by layout.create
    from . import settings as declared_settings

    try:
        kept = declared_settings.from_meta(json.loads((store / CAMPAIGN_JSON).read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        kept = None  # campaign.json unreadable: the executor names it
    with release_boards(targets):
        _take_over(targets)
        if kept is not None:
            if cluster:
                raise UsageError(f"{store}: the campaign declares settings, checked on each --target; resume it with --target")
            declared_settings.hold(kept, targets, f"{store / CAMPAIGN_JSON}: declared settings")
        _preflight(store, targets, cluster, skip_feasibility, target_wait)
        _drive(store, targets, cluster, target_wait, security)


def _preflight(store: Path, targets, cluster, skip_feasibility: bool, target_wait: float) -> None:
    """Calibration and feasibility of every cell not yet done (preflight.py)."""
    if cluster:  # the passes need a board, and a Dask cluster lends one to a run only
        console.print("[yellow]--cluster: no pre-flight (calibration, feasibility); give victims their work "
                      "explicitly and check one cell with `xtalk run` on a board[/]")
        return
    from .preflight import ensure

    ensure(store, targets, say=console.print, skip_feasibility=skip_feasibility, target_wait=target_wait)


def _drive(store: Path, targets, cluster, target_wait, security=None, gating: dict | None = None) -> None:
    from .status import status as read_status

    if cluster:
        from .dask import DaskExecutor, local_cluster, local_workers

        n = local_workers(cluster)
        if n is None:
            DaskExecutor(store, cluster, console=console, security=security).run()
        else:
            with local_cluster(n, say=console.print) as (address, local_security):
                DaskExecutor(store, address, console=console, security=local_security).run()
    else:
        from .executor import Executor

        Executor(store, targets, console=console, kind=_kind(targets, None), target_wait=target_wait).run()
    st = read_status(store)
    for line in st.lines():
        console.print(line)
    # The per-cell table is `xtalk summary`'s; the verdict document is written here (seconds of
    # imports and bootstrap, after the runs) so that a pipeline has it without a second command.
    from ..report.campaign_summary import write_campaign_summary

    cells = write_campaign_summary(store, console=None)
    if "verdicts" in cells.attrs:
        doc = cells.attrs["verdicts"]
        console.print(f"verdicts: {store / 'verdicts.json'} ({doc['epsilon']['holds']} ε hold, {doc['epsilon']['violated']} "
                      f"violated, {doc['epsilon']['inconclusive']} inconclusive; {len(doc['warnings'])} warning(s))",
                      highlight=False, soft_wrap=True)
    console.print(f"per cell (slowdown, ε verdict, warnings): xtalk summary {store}; report: xtalk report {store}",
                  highlight=False, soft_wrap=True)
    code = 0
    if st.failed:  # a failed run is a result, but a script must not read the campaign as clean
        from ..errors import runs_exit_code

        code = runs_exit_code(st.done, st.total)
    if gating is not None and not code:  # failed runs (4, 5) outrank the gate: their cells are incomplete
        from ..report.gate import after as gate_after

        code = gate_after(store, gating, console)
    if code:
        raise typer.Exit(code)


@_command
def status(store: Path = typer.Argument(..., help="campaign directory")):
    """Done / failed / remaining and ETA (works while the campaign runs)."""
    from .status import status as read_status

    for line in read_status(store).lines():
        print(line)
