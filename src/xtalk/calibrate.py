"""`xtalk calibrate`: the cost of each measuring instrument and the behaviour of the clocks
(METRICS method, seed 004 §IV), and `--intrusiveness`: how much observing the victim changes
it (timestamps only, with per-job counters, with the kernel trace), measured like any
interference: interleaved runs and a slowdown with its CI."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from . import safepath
from .errors import AgentError, UsageError  # noqa: E402
from .targets.agent import find_agent  # noqa: E402
from .targets.lock import target_lock  # noqa: E402


def measure(pairs: int, cpu: int | None, drift_ms: int) -> dict:
    """Run the agent's calibration; its JSON document."""
    cmd = [str(find_agent()), "calibrate", "--pairs", str(pairs), "--drift-ms", str(drift_ms)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    with target_lock():  # calibration measures the machine: never beside a run
        out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode == 2:
        raise UsageError(out.stderr.strip().removeprefix("xtalk-agent: "))
    if out.returncode != 0:
        raise AgentError(f"calibration failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def sources_table(doc: dict) -> pd.DataFrame:
    """One row per instrument: overhead of one reading, ns."""
    rows = [{"source": k, **{s: v[s] for s in ("min", "median", "p99", "p9999", "max")}, "below_110ns": v["below_110ns"]}
            for k, v in doc["sources"].items()]
    return pd.DataFrame(rows).sort_values("median").reset_index(drop=True)


def plot(doc: dict, out: Path) -> list[Path]:
    """Sorted distributions of the pair offsets, one curve per instrument (seed 004 Fig. 2)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, v in sorted(doc["sources"].items(), key=lambda kv: kv[1]["median"]):
        q = np.asarray(v["sorted_quantiles"])
        ax.plot(np.linspace(0, 100, len(q)), np.maximum(q, 0.1), label=name)
    ax.set_yscale("log")
    ax.set_xlabel("share of pairs (%), sorted")
    ax.set_ylabel("overhead of one reading (ns)")
    ax.set_title(f"{doc['pairs']} back-to-back pairs on CPU {doc['cpu']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths = [out / "calibration.png", out / "calibration.svg"]
    for p in paths:
        safepath.save_figure(fig, p)
    plt.close(fig)
    return paths


def source_resolution_ns(name: str, clocks: dict) -> float:
    """The smallest difference an instrument's two back-to-back readings can show, ns: its
    clock's resolution for ``clock_gettime`` sources, one tick for the ones timed by ticks."""
    res = clocks.get("resolution_ns", {})
    for clock in ("MONOTONIC_RAW", "THREAD_CPUTIME_ID", "MONOTONIC"):
        if name == f"clock_gettime {clock}":
            return float(res.get(clock, 1.0))
    return float(res.get("ticks") or 1 / clocks["ticks_per_ns"])


def reading_text(value: float, resolution: float) -> str:
    """A reading's cost, or "< R ns" when it is below what the clock can resolve (two readings
    that return the same value cost less than one step of the clock, not nothing)."""
    if value < resolution:
        return f"< {resolution:.3g} (resolution)"
    return f"{value:.1f}"


def show(doc: dict, console: Console) -> None:
    t = Table(title=f"cost of one reading, ns ({doc['pairs']} pairs, CPU {doc['cpu']})")
    for h in ("source", "min (ns)", "median (ns)", "p99 (ns)", "p99.99 (ns)", "max (ns)", "< 110 ns"):
        t.add_column(h, justify="left" if h == "source" else "right")
    for r in sources_table(doc).itertuples():
        res = source_resolution_ns(r.source, doc["clocks"])
        t.add_row(r.source, *(reading_text(v, res) for v in (r.min, r.median, r.p99, r.p9999, r.max)),
                  f"{100 * r.below_110ns:.1f} %")
    console.print(t)
    c = doc["clocks"]
    console.print(f"ticks: {c['ticks_per_ns']:.4f} per ns ({1 / c['ticks_per_ns']:.3f} ns resolution); "
                  f"resolution MONOTONIC {c['resolution_ns']['MONOTONIC']} ns, THREAD_CPUTIME {c['resolution_ns']['THREAD_CPUTIME_ID']} ns")
    d = c["drift_ppm_vs_monotonic"]
    console.print(f"drift against MONOTONIC over {c['drift_window_ns'] / 1e9:.1f} s: "
                  + ", ".join(f"{k} {v:+.3f} ppm" for k, v in d.items()))
    for o in c["inter_core_offsets"]:
        console.print(f"offset CPU {o['to_cpu']} vs CPU {o['from_cpu']} ({o['clock']}): {o['offset_ns']:+.1f} ns "
                      f"(round trip {o['round_trip_ns']:.0f} ns)")
    for n in doc.get("notes", []):
        console.print(f"[yellow]{n}[/]")


def calibrate(pairs: int, cpu: int | None, drift_ms: int, results: Path, console: Console) -> Path:
    """Measure, store (calibration.json, sources.csv, plots) and show."""
    doc = measure(pairs, cpu, drift_ms)
    out = safepath.results_dir(results, "--results") / f"calibration-{dt.datetime.now():%Y%m%d-%H%M%S}"
    safepath.makedirs(out, exist_ok=False)
    safepath.write_text(out / "calibration.json", json.dumps(doc, indent=1))
    safepath.write_csv(sources_table(doc), out / "sources.csv", index=False)
    plot(doc, out)
    show(doc, console)
    console.print(f"results: {out}")
    return out
