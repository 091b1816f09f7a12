"""`xtalk characterize`: which interference channels matter on this machine.

Resource probes (victims that each depend on one resource) run against each enemy and
against 1…N copies of it on the CPUs the probe does not use. The result is a sensitivity
matrix — slowdown of the probe's median (with its 95 % CI, `analysis.slowdown.slowdown`)
per probe × enemy × copies — stored as a dataset (Parquet and CSV), drawn as a heat map
(PNG and SVG) and summarised in a few lines naming the channels that matter.

Each probe is one ordinary experiment (a generated TOML file, run with `xtalk run`'s
machinery: checked before anything starts, interleaved, stored as usual), so every number
in the matrix can be traced back to its runs.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console

from . import safepath
from .analysis.slowdown import SOLO, slowdown
from .errors import UsageError
from .store import open as open_results
from .targets.agent import local_facts


@dataclass(frozen=True)
class Probe:
    """A victim that measures one resource; `metric` is the job column compared."""

    name: str
    resource: str
    victim: dict
    metric: str = "exec_ns"


#: Footprints come from the caches, the work per job from time: each probe's job takes 30 % of
#: its period alone on whatever machine it runs (calibrate_work.py), never a whole pass over a
#: buffer that takes 4 ms here and 185 ms on a 300 MiB L3.
WORK = {"utilization": "30%"}
PROBES = [
    Probe("l2-chase", "L2 (private or cluster-shared)", {"body": "chase", "bytes": "l2", **WORK}),
    Probe("llc-chase", "last-level cache", {"body": "chase", "bytes": "llc/2", **WORK}),
    # A linear chase over 4 × LLC is prefetched: a stream, bound by memory bandwidth.
    Probe("dram-stream", "memory bandwidth", {"body": "chase", "bytes": "4*llc", "order": "linear", **WORK}),
    Probe("dram-latency", "memory latency", {"body": "chase", "bytes": "4*llc", **WORK}),
    Probe("syscall", "kernel entry / exit", {"body": "syscall", **WORK}),
    Probe("wakeup", "timer and scheduler wake-up", {"body": "pi", "iterations": 1000}, metric="wakeup_latency_ns"),
]

#: Enemies as experiment-file tables (docs/enemies.md). `quick` keeps one per channel.
ENEMIES = {
    "l2": {"kind": "l2"},
    "llc": {"kind": "llc"},
    "read": {"kind": "read", "bytes": "4*llc"},
    "write": {"kind": "write", "bytes": "4*llc"},
    "ntstore": {"kind": "ntstore", "bytes": "4*llc"},
    "chase-mlp": {"kind": "chase", "bytes": "4*llc", "chains": 8},
    "tlb": {"kind": "tlb", "pages": 16384},
    "icache": {"kind": "icache"},
    "pingpong": {"kind": "pingpong"},
    "syscall": {"kind": "syscall"},
    "fileio": {"kind": "fileio", "bytes": "64MiB", "shared": True},
    "fork": {"kind": "fork", "exec": True},
    "pagefault": {"kind": "pagefault", "bytes": "4MiB"},
    "net-tcp": {"kind": "net", "proto": "tcp"},
    "timer": {"kind": "timer", "interval": "20us"},
    "pi": {"kind": "pi"},
}
#: The control: CPU only, no memory traffic. A channel it slows as much is a co-runner or
#: hypervisor effect (on a 2-vCPU guest, syscall and timer enemies gave the same 1.7–2.6× as
#: the memory ones), so every characterisation runs it.
CONTROL = "pi"
QUICK_ENEMIES = ["llc", "read", "chase-mlp", "syscall", "timer", CONTROL]

#: A channel "matters" when the CI's lower bound is at least this slowdown.
MATTERS = 1.05


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def experiment_text(probe: Probe, enemies: list[str], counts: list[int], victim_cpu: int, others: list[int],
                    repetitions: int, jobs: int, period: str) -> str:
    """The experiment file of one probe: solo plus one scenario per enemy × copies."""
    lines = [
        f'name = "characterize-{probe.name}"',
        f'description = "probe {probe.name} ({probe.resource}) against each enemy, 1..N copies"',
        f"repetitions = {repetitions}",
        'settle = "50ms"',
        "",
        "[victim]",
        *(f"{k} = {_toml_value(v)}" for k, v in probe.victim.items()),
        f'period = "{period}"',
        f"jobs = {jobs}",
        "warmup_jobs = 5",
        f"cpus = [{victim_cpu}]",
    ]
    for name in enemies:
        table = ENEMIES[name]
        for n in counts:
            spec = {**table, "name": name, "cpus": others[:n], "per_cpu": True}
            if table["kind"] == "pingpong":
                # One two-sided enemy per pair of CPUs; on one CPU both sides share it.
                spec = {**table, "name": name, "cpus": others[:n]}
            lines += ["", "[[scenario]]", f'name = "{name}.x{n}"', f"enemies = [{_toml_value(spec)}]"]
    return "\n".join(lines) + "\n"


def matrix(results: dict[str, Path], probes: dict[str, Probe], n_boot: int = 1000) -> pd.DataFrame:
    """Slowdown (ratio of medians, 95 % CI) of each probe per scenario against its solo."""
    rows = []
    for pname, path in results.items():
        probe = probes[pname]
        r = open_results(path)
        jobs = r.jobs()
        jobs = jobs[~jobs.warmup]
        groups = {s: [g[probe.metric].to_numpy() for _, g in d.groupby("run_id")] for s, d in jobs.groupby("scenario")}
        for scen, g in groups.items():
            if scen == SOLO:
                continue
            enemy, _, n = scen.rpartition(".x")
            point, lo, hi = slowdown(g, groups.get(SOLO, []), "median", n_boot=n_boot)
            rows.append({"probe": pname, "resource": probe.resource, "metric": probe.metric, "enemy": enemy,
                         "copies": int(n), "slowdown": point, "lo": lo, "hi": hi,
                         "solo_median_ns": float(np.median(np.concatenate(groups[SOLO]))) if SOLO in groups else np.nan,
                         "runs": len(g), "jobs": int(sum(len(x) for x in g))})
    return pd.DataFrame(rows, columns=["probe", "resource", "metric", "enemy", "copies", "slowdown", "lo", "hi",
                                       "solo_median_ns", "runs", "jobs"])


def heatmap(m: pd.DataFrame, out: Path) -> list[Path]:
    """Probe × (enemy, copies) heat map of the slowdown, on a log colour scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    m = m.assign(column=m.enemy + " ×" + m.copies.astype(str))
    grid = m.pivot_table(index="probe", columns="column", values="slowdown", sort=False)
    fig, ax = plt.subplots(figsize=(max(6.0, 2.5 + 0.75 * grid.shape[1]), 1.8 + 0.5 * grid.shape[0]), layout="constrained")
    vmax = max(2.0, float(np.nanmax(grid.to_numpy())) if grid.size else 2.0)
    im = ax.imshow(grid.to_numpy(), cmap="magma_r", norm=LogNorm(vmin=1.0 / 1.1, vmax=vmax), aspect="auto")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index)
    for (i, j), v in np.ndenumerate(grid.to_numpy()):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v > vmax ** 0.6 else "black")
    from matplotlib.ticker import FuncFormatter

    bar = fig.colorbar(im, ax=ax, label="slowdown (median / solo)")
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    bar.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    # Its own layout engine: the report's style (report/figures.py) may have set constrained
    # layout as the default, and tight_layout after a colorbar refuses to switch engines.
    ax.set_title("Probe slowdown per enemy × copies")
    paths = [out / "heatmap.png", out / "heatmap.svg"]
    for p in paths:
        safepath.save_figure(fig, p, dpi=120)
    plt.close(fig)
    return paths


def channels_text(m: pd.DataFrame, machine: str) -> str:
    """A few lines: which enemy hurts which resource, strongest first."""
    lines = [f"# Interference channels on {machine}", ""]
    control = m[m.enemy == CONTROL].set_index(["probe", "copies"])
    m = m[m.enemy != CONTROL]
    hit = m[m.lo >= MATTERS].sort_values("slowdown", ascending=False)
    # A hit whose CI reaches down into the control's is not told apart from a CPU-only co-runner.
    mimicked = [i for i, r in hit.iterrows() if (r.probe, r.copies) in control.index and r.lo <= control.loc[(r.probe, r.copies), "hi"]]
    if len(control):
        loud = control[control.lo >= MATTERS]
        if len(loud):
            lines.append(f"The CPU-only control ({CONTROL}, no memory traffic) slows " + ", ".join(
                f"{p} ×{n} {r.slowdown:.2f}×" for (p, n), r in loud.iterrows()) + ": co-running itself costs on this "
                "machine (hypervisor, SMT, frequency), whatever the channel.")
            lines.append("")
    if mimicked:
        lines.append("Not told apart from the control (their CI reaches the control's): " + "; ".join(
            f"{hit.loc[i].probe} × {hit.loc[i].enemy} ×{hit.loc[i].copies} {hit.loc[i].slowdown:.2f}×" for i in mimicked) + ".")
        lines.append("")
        hit = hit.drop(index=mimicked)
    if hit.empty:
        lines.append("No channel stands out beyond the control at these run lengths." if mimicked else
                     f"No enemy slowed any probe by {MATTERS:.2f}× or more (CI lower bound): no channel stands out "
                     "at these run lengths.")
        top = m.sort_values("slowdown", ascending=False).head(3)
        if len(top):
            lines.append("Largest point estimates, not significant (more repetitions would tell): " + "; ".join(
                f"{r.probe} × {r.enemy} ×{r.copies} {r.slowdown:.2f}× [{r.lo:.2f}, {r.hi:.2f}]" for r in top.itertuples()) + ".")
        return "\n".join(lines) + "\n"
    lines.append(f"Channels that matter (95 % CI lower bound ≥ {MATTERS:.2f}×), strongest first:")
    lines.append("")
    for probe, g in hit.groupby("probe", sort=False):
        top = g.iloc[0]
        others = ", ".join(f"{r.enemy} ×{r.copies} {r.slowdown:.2f}×" for r in g.iloc[1:4].itertuples())
        lines.append(f"- **{probe}** ({top.resource}): {top.enemy} ×{top.copies} → {top.slowdown:.2f}× "
                     f"[{top.lo:.2f}, {top.hi:.2f}]" + (f"; also {others}" if others else ""))
    quiet = sorted(set(m.probe) - set(hit.probe))
    if quiet:
        lines += ["", "Probes no enemy disturbed measurably: " + ", ".join(quiet) + "."]
    return "\n".join(lines) + "\n"


def enemy_loads(results: dict[str, Path], env: dict) -> pd.DataFrame:
    """Each enemy × copies: its mean achieved rate per copy over the probes' windows (every
    probe's runs pooled) and that rate's share of its channel's measured peak (peaks.py;
    NaN without saved peaks or without a peak for its channel)."""
    from . import catalog, peaks as pk
    from .store import run_outcome

    saved, caches = pk.load(env), pk.caches_of(env)
    acc: dict[tuple[str, int], dict] = {}
    for path in results.values():
        runs = open_results(path).runs()
        for scen, d, enemies in zip(runs.scenario, runs.dir, runs.enemies):
            if scen == SOLO or not enemies:
                continue
            name, _, n = scen.rpartition(".x")
            got = [e for e in enemies if e.get("window_rate") is not None]
            if not got:
                continue
            row = acc.setdefault((name, int(n)), {"kind": got[0]["kind"], "unit": got[0]["unit"], "rates": [],
                                                  "copies": len(got), "footprint": None, "params": None,
                                                  "signatures": []})
            row["rates"] += [e["window_rate"] for e in got]
            row["signatures"] += [sig for e in got if (sig := pk.signature(e, env)) is not None]
            if row["params"] is None:
                meta = run_outcome(d)
                k = catalog.current().kinds.get(row["kind"])
                if meta is not None and meta.plan and meta.plan.enemies:
                    row["params"] = meta.plan.enemies[0].load.model_dump()
                    if k is not None and k.footprint_params:
                        row["footprint"] = k.footprint(row["params"])
    out = []
    for (name, n), r in acc.items():
        rate = float(np.mean(r["rates"]))
        sh = pk.share(r["kind"], rate, saved, r["unit"], r["copies"], r["footprint"], caches, r["params"])
        out.append({"enemy": name, "copies": n, "kind": r["kind"], "channel": pk.channel_of(r["kind"]), "unit": r["unit"],
                    "rate_per_copy": rate, "percent_of_peak": sh.percent if sh else np.nan,
                    "basis": sh.basis if sh else "", "signature": pk.signature_text(r["signatures"][0], env) if r["signatures"] else ""})
    return pd.DataFrame(out, columns=["enemy", "copies", "kind", "channel", "unit", "rate_per_copy", "percent_of_peak",
                                      "basis", "signature"])


def loads_text(loads: pd.DataFrame, env: dict) -> str:
    """What each enemy loads, in Markdown: its rate per copy and its share of its channel's
    peak; one line instead when no peaks are saved, one when there is no PMU."""
    from . import peaks as pk
    from .units import rate_text

    lines = ["## What each enemy loads", ""]
    if pk.load(env) is None:
        lines += [f"No peaks saved for this machine: run `{pk.COMMAND}` first to set each enemy's rate against "
                  "its channel's peak.", ""]
    for r in loads.itertuples():
        share = f": {r.percent_of_peak:.0f} % of the {r.channel} peak ({r.basis})" if np.isfinite(r.percent_of_peak) else (
            f" ({r.channel}: no peak measured in {r.unit})" if r.channel else "")
        lines.append(f"- {r.enemy} ×{r.copies}: {rate_text(r.rate_per_copy, r.unit)} per copy{share}")
        if r.signature:
            lines.append(f"  - counters: {r.signature}")
    if not pk.has_pmu(env):
        lines += ["", pk.NO_PMU + "."]
    return "\n".join(lines) + "\n"


def experiment_texts(quick: bool, repetitions: int | None = None, enemies: list[str] | None = None,
                     jobs: int | None = None) -> dict[str, str]:
    """The experiment file of every probe, for the target's CPUs (live or a machine fixture)."""
    cpus = local_facts().online_cpus
    if len(cpus) < 2:
        raise UsageError("characterize: needs at least two online CPUs (probe and enemies apart)")
    names = enemies or (QUICK_ENEMIES if quick else list(ENEMIES))
    unknown = [n for n in names if n not in ENEMIES]
    names = names if CONTROL in names else [*names, CONTROL]
    if unknown:
        raise UsageError(f"characterize: --enemy: unknown enemy '{unknown[0]}'; choose from {', '.join(ENEMIES)}")
    victim_cpu, others = cpus[-1], cpus[:-1]
    counts = list(range(1, len(others) + 1))
    if quick and len(counts) > 2:
        counts = [1, len(others)]
    # Between-run variance dominates on a busy machine: more short runs beat fewer long ones.
    reps = repetitions or (4 if quick else 5)
    njobs = jobs or (30 if quick else 200)
    return {p.name: experiment_text(p, names, counts, victim_cpu, others, reps, njobs, "4ms") for p in PROBES}


#: A probe's cost beyond its runs and calibration inside the one `characterize` process (the
#: agent's check of its plans, its summary and analysis): 1.0-1.7 s measured per probe of 28
#: runs on a 2-vCPU guest (2026-11-27, bench/estimates.py).
PROBE_OVERHEAD_S = 1.0


def plan(quick: bool, console: Console, repetitions: int | None = None, enemies: list[str] | None = None,
         jobs: int | None = None) -> float:
    """What `characterize` would run, probe by probe, and how long it would take: every plan
    checked by the agent, nothing started, nothing written. Returns the estimate (s)."""
    import tempfile

    from .runner import COMMAND_OVERHEAD_S, estimate_seconds, prepare

    texts = experiment_texts(quick, repetitions, enemies, jobs)
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="xtalk-characterize-plan-") as tmp:
        for name, text in texts.items():
            f = Path(tmp) / f"{name}.toml"
            safepath.write_text(f, text)
            exp, runs, _ = prepare(f)
            # Each probe is run like `xtalk run` (checks, summary, analysis) but in this one
            # process: the interpreter's start-up (1.7-1.9 s of imports on a 2-vCPU guest) is
            # paid once, below, not per probe.
            seconds = PROBE_OVERHEAD_S + estimate_seconds(exp, runs, feasibility=False)  # no feasibility (see below)
            total += seconds
            solo = next(r for r in runs if r.scenario == SOLO).plan
            console.print(f"probe {name}: {len(runs)} runs ({len(runs) // exp.repetitions} scenarios × {exp.repetitions}), "
                          f"victim on CPU {solo.victim.placement.cpus[0]}, {solo.victim.body.kind} body, about {seconds:.0f} s",
                          highlight=False)
    total += COMMAND_OVERHEAD_S
    env = local_facts().environment
    console.print(f"characterize{' --quick' if quick else ''} on {env.get('cpu', {}).get('model')} × {len(local_facts().online_cpus)}: "
                  f"{len(texts)} probes, about {total:.0f} s ({total / 60:.1f} min); nothing started", highlight=False)
    return total


def characterize(out_base: Path, quick: bool, console: Console, repetitions: int | None = None,
                 enemies: list[str] | None = None, jobs: int | None = None) -> Path:
    """Run every probe against every enemy; write the matrix, heat map and text under a new
    directory of `out_base`; return it."""
    from .runner import run_experiment

    facts = local_facts()
    texts = experiment_texts(quick, repetitions, enemies, jobs)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = safepath.results_dir(out_base, "--results") / f"characterize-{stamp}"
    safepath.makedirs(out / "experiments", exist_ok=False)
    probes = {p.name: p for p in PROBES}
    results = {}
    for p in PROBES:
        f = out / "experiments" / f"{p.name}.toml"
        safepath.write_text(f, texts[p.name])
        # The probes' work is calibrated to 30 % of the period: a separate feasibility pass
        # would only re-measure that (the summary's guards still flag an overloaded solo).
        results[p.name] = run_experiment(f, out / "runs", console, skip_feasibility=True)
    m = matrix(results, probes)
    safepath.write_parquet(m, out / "matrix.parquet")
    safepath.write_csv(m, out / "matrix.csv", index=False)
    heatmap(m, out)
    text = channels_text(m, facts.environment.get("cpu", {}).get("model", "this machine"))
    loads = enemy_loads(results, facts.environment)
    safepath.write_csv(loads, out / "enemy-loads.csv", index=False)
    text += "\n" + loads_text(loads, facts.environment)
    safepath.write_text(out / "channels.md", text)
    console.print(text)
    console.print(f"matrix: {out / 'matrix.parquet'} (and .csv); heat map: {out / 'heatmap.png'} (and .svg)")
    return out


def json_document(out: Path) -> dict:
    """`xtalk characterize --json`: the verdict document's header and the sensitivity matrix
    as ``rows`` (report/verdicts.table_document: a probe × enemy × copies slowdown with its
    CI, the solo median as {value, unit}), each enemy's measured load as ``enemy_loads`` and
    the channels text (channels.md) as ``channels``; read from the directory it wrote."""
    from .report.verdicts import rows_with_units, table_document
    from .store.files import read_parquet

    out = Path(out)
    loads = pd.read_csv(out / "enemy-loads.csv") if (out / "enemy-loads.csv").is_file() else pd.DataFrame()
    return table_document("characterize", out, read_parquet(out / "matrix.parquet"),
                          {"level": 0.95, "enemy_loads": rows_with_units(loads), "channels": (out / "channels.md").read_text()})
