"""``xtalk model …``: explore interference bounds, export UPPAAL XML, run the seed example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from xtalk.model.examples import SEED000_QUERY, seed000_platform
from xtalk.model.explorer import ExplorationLimit, ExplorationResult, explore
from xtalk.model.penalty import interference_time_ns
from xtalk.model.platform import load_platform
from xtalk.model.uppaal import to_uppaal_xml
from xtalk.sched.inputs import InputError

app = typer.Typer(help="Interference model (seed 000 ch. 4): exhaustive explorer and UPPAAL export.")
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
) -> None:
    """Maximum interferences per task × component × segment over all interleavings."""
    try:
        platform = load_platform(file)
        penalties = _parse_penalties(penalty)
        res = explore(platform)
        if as_json:
            _out.print_json(json.dumps({"states": res.states, "seconds": res.seconds, "maxima": res.rows()}))
        else:
            _print_result(res, penalties)
        if witness:
            task, comp, seg, _ = _parse_bound(witness + ":0")
            steps = res.witnesses.get((task, comp, seg))
            if steps is None:
                _out.print(f"no interference reachable for {witness}")
            for s in steps or []:
                _out.print(str(s), markup=False)
    except (InputError, ExplorationLimit) as exc:
        _fail(exc)


@app.command("uppaal")
def uppaal_cmd(
    file: Path = typer.Argument(..., help="platform TOML"),
    output: Path = typer.Option(..., "-o", "--output", help="where to write the UPPAAL XML"),
    bound: list[str] = typer.Option([], "--bound", help="extra query TASK:COMPONENT:SEGMENT:MAX; repeat"),
) -> None:
    """Export the model as UPPAAL XML with the seed's queries (and the explorer's maxima)."""
    try:
        platform = load_platform(file)
        extra = [_parse_bound(b) for b in bound]
        res = explore(platform, witnesses=False)
        observer = extra[0] if extra else None
        output.write_text(to_uppaal_xml(platform, res, observer=observer, extra_queries=extra))
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
