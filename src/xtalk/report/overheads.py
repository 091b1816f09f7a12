"""`xtalk summary RESULTS --view overheads`: the measured scheduler overheads of each timer release (seed
001 §4.5: Δevent, Δrel, Δsched, Δcxs and their sum Δ^relEv, from the kernel trace; see
:mod:`xtalk.trace.overheads`) per scenario and configuration, in µs; the same tables for
the report's latency section and for `xtalk compare`.

Writes overheads.csv (one row per scenario × configuration × overhead) and overheads.md
(that table and the coverage: jobs decomposed, the others by reason, trace events lost).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import safepath
from ..analysis import overheads as ao
from ..store.overheads import collect

#: What the tables mean, one sentence for every place that shows them.
LEGEND = ("From the kernel trace of each run, on the clock of the job rows: Δevent = expiry of the victim's timer "
          "(the interrupt's clock read) − release; Δrel = its sched_wakeup − that expiry; Δsched = the sched_switch to "
          "it − the wake-up; Δcxs = the victim back in user space − that switch; overrun = how far an earlier job ran "
          "past the release of a late job (its timer armed only then); Δ^relEv = every job's measured wake-up latency "
          "(the sum of the four where the trace decomposed the job, carried whole where it did not). Trace stamps are "
          "ns (a run whose trace fell back to text: µs, ±0.5 µs each). The coverage says what share of the latency tail (the jobs at or above its p99) the "
          "four Δ decompose.")


def tables(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(summary, coverage) of the traced runs among ``runs``; None when none has a trace."""
    jobs, traced = collect(runs)
    if traced.empty:
        return None
    return ao.summary(jobs), ao.coverage(jobs, traced)


def wide(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario × configuration, ``<Δ> mean / p99 / max`` columns (the compact
    view the report and `xtalk compare` show)."""
    rows = []
    for (sc, cf), g in summary.groupby(["scenario", "configuration"], sort=False):
        row = {"scenario": sc, "configuration": cf}
        for r in g.itertuples():
            row.update({f"{r.overhead} mean": r.mean_us, f"{r.overhead} p99": r.p99_us, f"{r.overhead} max": r.max_us})
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame, coverage: pd.DataFrame, title: str = "## Scheduler overheads (µs)") -> list[str]:
    """Markdown lines: the legend, the summary, the coverage."""
    from .markdown import md_table

    return [title, "", LEGEND, "", md_table(summary, max_rows=10_000), "",
            "Jobs decomposed (the others by reason; events the trace lost to buffer overruns):", "",
            md_table(coverage, max_rows=10_000)]


def _cell(v) -> str:
    from .html import fmt

    return fmt(v)


def show(results, console) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Print the breakdown of ``results`` (``store.Results``) and write overheads.csv and
    overheads.md into it. ValueError (one line) when no run has a trace."""
    from rich.table import Table

    got = tables(results.runs())
    if got is None:
        raise ValueError(f"{results.path}: no run has a kernel trace (trace.dat or trace.txt); add a [trace] table with the events "
                         "of examples/latency_overheads.toml to the experiment and run it as root")
    summary, coverage = got
    safepath.write_csv(summary, Path(results.path) / "overheads.csv", index=False)
    safepath.write_text(
        Path(results.path) / "overheads.md", "\n".join(markdown(summary, coverage, f"# Scheduler overheads (µs): {Path(results.path).name}")) + "\n")
    t = Table(title=f"scheduler overheads per timer release, µs: {Path(results.path).name}")
    for c in ao.SUMMARY_COLUMNS:
        t.add_column(c, justify="left" if c in ("scenario", "configuration", "overhead") else "right")
    for r in summary.itertuples(index=False):
        t.add_row(*(_cell(v) for v in r))
    console.print(t)
    for r in coverage.itertuples():
        lost = "unknown" if r.lost_events is None or pd.isna(r.lost_events) else str(int(r.lost_events))
        console.print(f"{r.scenario} ({r.configuration}): {r.matched} of {r.jobs} jobs decomposed; not: {r.unmatched}; "
                      f"trace events lost: {lost}; {tail_text(r)}")
    console.print(f"wrote {Path(results.path) / 'overheads.csv'}, {Path(results.path) / 'overheads.md'}")
    return summary, coverage


def side_by_side(summaries: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """`xtalk compare`'s view: one row per scenario × configuration × overhead, each label's
    mean / p99 / max (µs) beside the others'; a label without the row shows NaN."""
    key = ["scenario", "configuration", "overhead"]
    out = None
    for label, s in summaries.items():
        t = s.set_index(key)[["mean_us", "p99_us", "max_us"]]
        t.columns = [f"{label}: {c.removesuffix('_us')} µs" for c in t.columns]
        out = t if out is None else out.join(t, how="outer", sort=False)
    if out is None:
        return pd.DataFrame(columns=key)
    order = {n: i for i, n in enumerate(ao.NAMES.values())}
    out = out.reset_index()
    out["_o"] = out["overhead"].map(order)
    out["_solo"] = out["scenario"] != "solo"
    return out.sort_values(["configuration", "_solo", "scenario", "_o"], kind="stable").drop(columns=["_o", "_solo"]) \
        .reset_index(drop=True)


def tail_text(r) -> str:
    """What share of the latency tail the four Δ decompose, from a coverage row."""
    if not r.tail_jobs:
        return "no latency measured"
    not_ = f"; not: {r.tail_not}" if r.tail_not else ""
    jobs = f"{r.tail_jobs} job" + ("s" if r.tail_jobs != 1 else "")
    return (f"the four Δ explain {r.tail_explained:.0%} of the latency tail ({jobs} at or above its p99, "
            f"{r.latency_p99_us:.1f} µs{not_})")


def coverage_lines(label: str, coverage: pd.DataFrame) -> list[str]:
    """One line per scenario × configuration: how many jobs the trace decomposed, and how
    much of the latency tail."""
    return [f"{label} · {r.scenario} ({r.configuration}): {r.matched} of {r.jobs} jobs decomposed; not: {r.unmatched}; "
            f"{tail_text(r)}" for r in coverage.itertuples()]
