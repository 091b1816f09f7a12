"""``xtalk model …``: explore interference bounds, export UPPAAL XML, run the seed example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from xtalk.model import native
from xtalk.model.estimate import DEFAULT_BUDGET, Estimate, check_budget
from xtalk.model.examples import SEED000_QUERY, seed000_platform
from xtalk.model.explorer import ExplorationLimit, ExplorationResult, explore
from xtalk.model.semantics import compile_platform
from xtalk.model.penalty import interference_time_ns
from xtalk.model.platform import load_platform
from xtalk.model.uppaal import to_uppaal_xml
from xtalk.sched.inputs import InputError

from .. import safepath
from ..errors import UsageError

app = typer.Typer(help="Interference model (seed 000, chapter 4): exhaustive explorer and UPPAAL export.")
_out = Console()


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def _parse_penalties(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError("--penalty", f"cannot read {item!r}", "write COMPONENT=NS, e.g. --penalty AHB=40") from None
    return out


def _parse_bound(item: str) -> tuple[str, str, int, int]:
    parts = item.split(":")
    try:
        if len(parts) != 4:
            raise ValueError
        return parts[0], parts[1], int(parts[2]), int(parts[3])
    except ValueError:
        raise InputError("--bound", f"cannot read {item!r}", "write TASK:COMPONENT:SEGMENT:MAX, e.g. SP0:L2:0:3") from None


def statistics(res: ExplorationResult) -> dict:
    """UPPAAL-style statistics of an exploration (verifyta -u prints the same quantities)."""
    return {
        "engine": res.engine,
        "states_explored": res.states,
        "states_stored": res.stored,
        "transitions": res.transitions,
        "seconds": round(res.seconds, 4),
        "cpu_seconds": round(res.cpu_seconds, 4),
        "states_per_second": round(res.states / res.cpu_seconds) if res.cpu_seconds > 0 else None,
        "memory_kib": res.memory_kb,
    }


def _print_statistics(res: ExplorationResult, est: Estimate | None) -> None:
    st = statistics(res)
    rate = f", {st['states_per_second']} states/s of CPU" if st["states_per_second"] else ""
    kept = "peak; a layer is freed once expanded" if res.engine == "native" else "all kept"
    if est is not None:
        typer.echo(f"-- Estimated before starting : {est.describe()}")
    typer.echo(f"-- States explored : {res.states} states")
    typer.echo(f"-- States stored : {res.stored} states ({kept})")
    typer.echo(f"-- Transitions : {res.transitions}")
    typer.echo(f"-- Time used : {res.seconds:.3f} s wall, {res.cpu_seconds:.3f} s CPU ({res.engine} explorer{rate})")
    typer.echo(f"-- Resident memory used : {res.memory_kb} KiB (peak, {'explorer core' if res.engine == 'native' else 'whole process'})")


def _print_result(res: ExplorationResult, penalties: dict[str, float]) -> None:
    table = Table(title=f"max interferences ({res.states} states, {res.transitions} transitions, {res.seconds:.3f} s)")
    for col in ("task", "segment", "component", "max"):
        table.add_column(col)
    for row in res.rows():
        table.add_row(row["task"], row["segment_name"], row["component"], str(row["max"]))
    _out.print(table)
    if penalties:
        for task in res.compiled.task_names:
            ns = interference_time_ns(res, penalties, task)
            _out.print(f"{task}: interference bound {ns:.0f} ns")


@app.command("explore")
def explore_cmd(
    file: Path = typer.Argument(..., help="platform TOML (see examples/models/seed000-example.toml)"),
    penalty: list[str] = typer.Option([], "--penalty", help="COMPONENT=NS per interference; repeat"),
    witness: Optional[str] = typer.Option(None, help="print the witness of TASK:COMPONENT:SEGMENT"),
    as_json: bool = typer.Option(False, "--json", help="print the maxima as JSON"),
    max_states: Optional[int] = typer.Option(
        None, "--max-states", help="state budget (default 50 M native, 2 M Python); beyond it the model is refused"
    ),
    force: bool = typer.Option(False, "--force", help="explore even when the estimate exceeds the budget"),
    engine: str = typer.Option("auto", help="auto (native when built), native or python"),
) -> None:
    """Maximum interferences per task × component × segment over all interleavings."""
    try:
        platform = load_platform(file)
        penalties = _parse_penalties(penalty)
        if engine not in ("auto", "native", "python"):
            raise InputError("--engine", f"unknown engine {engine!r}", "use auto, native or python")
        if engine == "native" and not native.available():
            raise InputError("--engine", "the native explorer is not built", "run make setup (needs cargo) or --engine python")
        if engine == "auto" and not native.available():
            native.warn_slow_path()
            engine = "python"
        cm = compile_platform(platform)
        budget = max_states or DEFAULT_BUDGET["python" if engine == "python" else "native"]
        est = None if force else check_budget(cm, budget, engine)
        wanted = [] if witness is None else [_parse_bound(witness + ":0")[:3]]
        res = explore(cm, witnesses=wanted, max_states=None if force else budget, engine=engine)
        if as_json:
            _out.print_json(json.dumps({**statistics(res), "states": res.states, "maxima": res.rows()}))
        else:
            _print_result(res, penalties)
            _print_statistics(res, est)
        if witness:
            task, comp, seg, _ = _parse_bound(witness + ":0")
            steps = res.witnesses.get((task, comp, seg))
            if steps is None:
                _out.print(f"no interference reachable for {witness}")
            for s in steps or []:
                _out.print(str(s), markup=False)
    except ExplorationLimit as exc:
        _fail(InputError("model", f"{exc} (the estimate was lower)", "--force to explore anyway"))
    except InputError as exc:
        _fail(exc)


@app.command("uppaal")
def uppaal_cmd(
    file: Path = typer.Argument(..., help="platform TOML"),
    output: Path = typer.Option(..., "-o", "--output", help="where to write the UPPAAL XML"),
    bound: list[str] = typer.Option([], "--bound", help="extra query TASK:COMPONENT:SEGMENT:MAX; repeat"),
) -> None:
    """Export the model as UPPAAL XML with the seed's queries (and the explorer's maxima)."""
    try:
        output = safepath.output_file(output, "--output")
    except UsageError as exc:
        _fail(exc)
    try:
        platform = load_platform(file)
        extra = [_parse_bound(b) for b in bound]
        res = explore(platform, witnesses=False)
        observer = extra[0] if extra else None
        safepath.write_text(output, to_uppaal_xml(platform, res, observer=observer, extra_queries=extra))
        _out.print(f"wrote {output}")
    except (InputError, ExplorationLimit) as exc:
        _fail(exc)


@app.command("example")
def example_cmd(
    cold: bool = typer.Option(False, help="cold private views instead of the warm default"),
) -> None:
    """Seed 000 §4.2–4.4 example: SP0/SP1, AHB, L2, bank B; checks the seed's L2 bound."""
    platform = seed000_platform(warm_start=not cold)
    res = explore(platform)
    _print_result(res, {})
    task, comp, seg, bound = SEED000_QUERY
    verdict = "holds" if res.holds(task, comp, seg, bound) else "FAILS"
    _out.print(
        f"A[] not (nb_interferences_{comp}[{seg}][{task}] > {bound}) {verdict}: "
        f"max = {res.max(task, comp, seg)} (seed 000 §4.4 proves the bound {bound})"
    )
    for s in res.witnesses.get((task, comp, seg), []):
        _out.print("  " + str(s), markup=False)
