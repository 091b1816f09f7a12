"""`xtalk compare RESULTS RESULTS [...]`: the same experiment or campaign measured on several
machines or kernels (PREEMPT_RT against stock, native against a KVM guest), side by side.

Each results directory is read by the one typed pass its own summary uses (an experiment's
cells, ``results/tables.cells``; a campaign's, ``results/campaign_cells.cell_table``; a
``latency`` victim's ``victim_kinds.latency_table``), so a number here is the number
`xtalk summary` prints for that directory. Only the cells present in every directory are
compared (same configuration × scenario; for a campaign the same application ·
configuration · variant · scenario); the others are listed, never dropped silently.

The comparison table has one row per common cell, each label's columns (runs, jobs,
response median / p99 / max in ms, deadline misses, the median execution-time slowdown
against solo with its 95 % CI; for a latency victim samples and p50 / p99 / max in µs) and,
per label after the first, the ratio of its p99 to the first label's. Whether a label differs
from the first is judged per cell on the median and the p99 (of the response time; of the
wake-up latency for a latency victim) by ``analysis.change``: the ratio with its CI from the
runs of both sides and a word like pyperf's ("1.12× slower, significant" / "no significant
change", with the smallest change these runs could detect). Each label is given
(``--label``) or derived from the environment the agent recorded in every run.json: the
kernel release, ``rt`` or ``stock`` (PREEMPT_RT or not) and ``vm`` under a hypervisor.

Campaigns run on lab boards (runs labelled ``board``, docs/lab.md) are also split per common
cell into the board-to-board variation and each label's effect with a CI that accounts for it
(analysis/boards.py, the labels as the factor): "rt is 12 % better" told from "board 3 is
slower" across two campaigns, e.g. the pool under the stock kernel, then under PREEMPT_RT.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .. import safepath
from ..analysis.change import DRIFT_NOTE, Change, changes
from ..errors import UsageError
from ..store import run_outcome, run_outcomes

#: Cell key columns (an experiment's; a campaign's cell is ``group`` · ``scenario``).
KEY = ["cell", "scenario"]


@dataclass
class Measured:
    """One results directory reduced to its cells: ``table`` indexed by (cell, scenario)
    with the per-label columns (``STATS`` or ``LATENCY_STATS``)."""

    path: Path
    label: str
    kind: str  # "experiment", "campaign" or "latency"
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: A latency victim's measured scheduler overheads (report/overheads.py: summary and
    #: coverage), None when no run has a kernel trace.
    overheads: tuple[pd.DataFrame, pd.DataFrame] | None = None
    #: (cell, scenario) -> one array per run of the compared quantity (response time in ms;
    #: wake-up latency in µs for a latency victim), what the changes are judged on.
    samples: dict[tuple[str, str], list[np.ndarray]] = field(default_factory=dict)
    #: The victims measured ("name (body)"), to refuse comparing different ones.
    victims: frozenset[str] = frozenset()
    #: A lab campaign's runs (labelled ``board``): one row per run, its cell, scenario, board
    #: and the p99 and median of its response time (analysis/boards.per_run); None otherwise.
    boards: pd.DataFrame | None = None


#: (column, header) per label: response time of a periodic victim or a campaign cell.
STATS = [("runs", "runs"), ("jobs", "jobs"), ("median_ms", "median ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms"),
         ("misses", "misses"), ("slowdown", "slowdown [95% CI]")]
#: The columns per label of the wide table (compare.csv): the slowdown as three numbers.
COLUMNS = ["runs", "jobs", "median_ms", "p99_ms", "max_ms", "misses", "slowdown_median", "slowdown_lo", "slowdown_hi"]
#: (column, header) per label: wake-up latency of a `latency` victim.
LATENCY_STATS = [("runs", "runs"), ("samples", "samples"), ("min_us", "min µs"), ("p50_us", "p50 µs"),
                 ("p99_us", "p99 µs"), ("max_us", "max µs")]
LATENCY_COLUMNS = [c for c, _ in LATENCY_STATS]
#: The statistics whose change against the first label is judged (analysis.change).
CHANGE_STATS = ("median", "p99")


def _change_text(ch: Change) -> str:
    """"1.12× slower, significant [1.05, 1.20]" (the CI of the ratio after / before)."""
    ci = f" [{ch.low:.2f}, {ch.high:.2f}]" if ch.concluded else ""
    return ch.words() + ci


def _change_cell(ch: Change) -> str:
    """The table's short form: "×1.12 [1.05, 1.20] significant" or "×1.00 [0.56, 1.79] n.s."."""
    if not ch.concluded:
        return ch.words()
    return f"×{ch.ratio:.2f} [{ch.low:.2f}, {ch.high:.2f}] {'significant' if ch.significant else 'n.s.'}"


# --------------------------------------------------------------------------- input


def check_inputs(paths: Sequence[Path], labels: Sequence[str]) -> None:
    """Refuse bad input before anything is read or written: fewer than two directories, a
    path that is not a results directory, a --label count that does not match."""
    if len(paths) < 2:
        raise UsageError(f"RESULTS: {len(paths)} given; give two results directories or more "
                         "(the same experiment or campaign measured on each machine or kernel)")
    for p in paths:
        if not (Path(p) / "runs").is_dir():
            raise UsageError(f"RESULTS: {p} is not an xtalk results directory (no runs/); give the directory "
                             "`xtalk run` or `xtalk campaign run` printed")
    seen: dict[Path, Path] = {}
    for p in paths:
        real = Path(p).resolve()
        if real in seen:
            same = "is given twice" if str(seen[real]) == str(p) else f"and {seen[real]} are the same directory"
            raise UsageError(f"RESULTS: {p} {same}; compare different results directories")
        seen[real] = Path(p)
    if labels and len(labels) != len(paths):
        raise UsageError(f"--label: {len(labels)} given for {len(paths)} RESULTS; give one --label per RESULTS, "
                         "in the same order, or none (derived from each run's kernel)")
    if labels and len(set(labels)) != len(labels):
        dup = sorted({x for x in labels if list(labels).count(x) > 1})
        raise UsageError(f"--label: {', '.join(dup)} given twice; labels must be unique")


def environment(path: Path):
    """The environment the agent recorded in the first run.json that has one (None if none)."""
    for d in sorted(p for p in (Path(path) / "runs").iterdir() if p.is_dir()):
        meta = run_outcome(d)
        if meta is not None and meta.environment is not None:
            return meta.environment
    return None


def derived_label(path: Path) -> str:
    """``rt-<release>`` or ``stock-<release>`` (PREEMPT_RT or not), ``-vm`` under a
    hypervisor; the directory's name where no run recorded an environment."""
    env = environment(path)
    if env is None:
        return Path(path).resolve().name
    k = env.kernel
    label = f"{'rt' if k.preempt_rt else 'stock'}-{k.release}"
    if env.virtualization.hypervisor:
        label += "-vm"
    return label


def labels_for(paths: Sequence[Path], given: Sequence[str]) -> list[str]:
    """The given labels, else derived ones; derived labels that collide (the same kernel
    measured twice) become the directory names, and names that still collide are refused."""
    if given:
        return list(given)
    out = [derived_label(p) for p in paths]
    for i, lb in enumerate(out):
        if out.count(lb) > 1:
            out = [Path(p).resolve().name if x == lb else x for p, x in zip(paths, out)]
    if len(set(out)) != len(out):
        raise UsageError(f"--label: the derived labels {', '.join(out)} are not unique; give one --label per RESULTS")
    return out


# --------------------------------------------------------------------------- cells


def _ci(p: float, lo: float, hi: float) -> str:
    from .summary import ci_text

    return "–" if p is None else ci_text(p, lo, hi)


def _stats(c: pd.DataFrame, cell: list[str]) -> pd.DataFrame:
    """The per-label columns from a table of cells (the experiment's or the campaign's: the
    same column names), keyed by (cell, scenario)."""
    return pd.DataFrame({
        "cell": cell, "scenario": c["scenario"].astype(str), "runs": c["runs"], "jobs": c["jobs"],
        "median_ms": c["response_median_ms"], "p99_ms": c["response_p99_ms"], "max_ms": c["response_max_ms"],
        "misses": c["deadline_misses"], "slowdown_median": c["exec_slowdown_median"],
        "slowdown_lo": c["exec_slowdown_median_lo"], "slowdown_hi": c["exec_slowdown_median_hi"]}).set_index(KEY)


def _per_run(cell: Sequence[str], scenario: Sequence[str], run: Sequence[str],
             values: np.ndarray) -> dict[tuple[str, str], list[np.ndarray]]:
    """(cell, scenario) -> the values of each run, runs in the order they first appear."""
    frame = pd.DataFrame({"cell": list(map(str, cell)), "scenario": list(map(str, scenario)),
                          "run": list(map(str, run))})
    out: dict[tuple[str, str], list[np.ndarray]] = {}
    for (c, sc, _), idx in frame.groupby(["cell", "scenario", "run"], sort=False).indices.items():
        out.setdefault((c, sc), []).append(values[idx])
    return out


def _latency_us(jobs: pd.DataFrame) -> np.ndarray:
    """Wake-up latency of every job in µs (the latency table's quantity)."""
    ns = jobs["wakeup_latency_ns"] if "wakeup_latency_ns" in jobs else jobs["wakeup_ns"] - jobs["release_ns"]
    return ns.to_numpy(dtype=float) / 1e3


def _victims(dirs: Sequence) -> frozenset[str]:
    """"name (body)" of every victim the runs measured."""
    plans = [m.plan for m in (run_outcome(d) for d in dirs) if m is not None and m.plan is not None]
    return frozenset(f"{p.victim.name} ({p.victim.body.kind})" for p in plans)


def _experiment_cells(path: Path) -> Measured:
    """An experiment's cells (the report's, or the latency table) with the per-run samples
    the changes are judged on and, where its runs have kernel traces, the measured scheduler
    overheads."""
    from ..store import open as open_results
    from . import overheads as oh
    from ..results import tables as tb
    from . import victim_kinds as vk

    results = open_results(path)
    runs = results.runs()
    if runs.empty:
        raise UsageError(f"RESULTS: {path} has no run with a run.json under runs/; run the experiment first")
    victims = _victims(runs["dir"]) if "dir" in runs else frozenset()
    if vk.kind_of(runs) == "latency":
        jobs = results.jobs()
        t = vk.latency_table(jobs)
        t = t.assign(cell=t["configuration"].astype(str), scenario=t["scenario"].astype(str))
        conf = jobs["configuration"] if "configuration" in jobs else ["default"] * len(jobs)
        samples = _per_run(conf, jobs["scenario"], jobs["run_id"], _latency_us(jobs))
        return Measured(path, "", "latency", t.set_index(KEY)[[c for c, _ in LATENCY_STATS]], oh.tables(runs),
                        samples, victims)
    data = tb.load(path)
    c = tb.cells(data)
    m = data.measured
    samples = _per_run(m["configuration"], m["scenario"], m["run_id"], m["response_ns"].to_numpy(dtype=float) / 1e6)
    return Measured(path, "", "experiment", _stats(c, list(c["configuration"].astype(str))), None, samples, victims)


def _cell_name(application, configuration, variant) -> str:
    """A campaign cell's name: application · configuration · variant, "default" parts left out."""
    return " · ".join([str(application)] + [str(x) for x in (configuration, variant) if str(x) not in ("", "default")])


def _campaign_cells(path: Path) -> Measured:
    """A campaign's cells keyed by application · configuration · variant, "default" parts
    left out (not the group, whose parts depend on what varies within each campaign), with
    the per-run response times of each."""
    from ..results import campaign_cells as cc

    cd = cc.load_campaign(path)
    c = cc.cell_table(cd)
    victims = _victims(cd.data.runs["dir"]) if "dir" in cd.data.runs else frozenset()
    if c.empty:
        return Measured(path, "", "campaign", pd.DataFrame(columns=KEY + COLUMNS).set_index(KEY), victims=victims)
    cell = [_cell_name(a, cf, v) for a, cf, v in zip(c["application"], c["configuration"], c["variant"])]
    name_of = dict(zip(c["group"].astype(str), cell))
    samples = {(name_of[g], sc): [v.astype(float) / 1e6 for v in d["response_ns"]]
               for (g, sc), d in cc.run_samples(cd.data).items() if g in name_of}
    return Measured(path, "", "campaign", _stats(c, cell), samples=samples, victims=victims, boards=_board_runs(cd))


def _board_runs(cd) -> pd.DataFrame | None:
    """Each run on a lab board: its cell (as `_campaign_cells` names it), scenario, board and
    statistics; None when no run carries a ``board`` label."""
    from ..analysis.boards import per_run
    from .boards import STATS as BOARD_STATS

    labels = {r: {**lb, "_side": ""} for r, lb in cd.labels.items() if lb.get("board")}
    if not labels or cd.data.measured.empty:
        return None
    runs = per_run(cd.data.measured, labels, factor="_side", stats_=BOARD_STATS).drop(columns="_side")
    lb = [labels[r] for r in runs["run_id"]]
    runs["cell"] = [_cell_name(x.get("application", ""), x.get("configuration", "default") or "default",
                               x.get("variant", "default") or "default") for x in lb]
    runs["scenario"] = [str(x.get("scenario", "")) for x in lb]
    return runs


def _campaign_latency_cells(path: Path) -> Measured | None:
    """A campaign whose every application is a ``latency`` victim (it ran through a target:
    `xtalk run` drives this machine only): its latency table, keyed by application ·
    configuration · variant like its other cells, its per-run wake-up latencies, and the
    measured scheduler overheads where its runs have kernel traces; None for any other
    campaign."""
    from ..store.campaign import open_any
    from . import overheads as oh
    from . import victim_kinds as vk

    results = open_any(path)  # the campaign's view: its application, configuration and variant labels
    runs = results.runs()
    if runs.empty or "dir" not in runs:
        return None
    plans = [m.plan for m in run_outcomes(runs) if m is not None and m.plan is not None]
    if not plans or any(p.victim.body.kind != "latency" for p in plans):
        return None
    jobs = results.jobs()

    def part(c: str) -> list[str]:
        return jobs[c].astype(str).tolist() if c in jobs else [""] * len(jobs)

    group = [_cell_name(a, cf, v) for a, cf, v in zip(part("application"), part("configuration"), part("variant"))]
    t = vk.latency_table(jobs.assign(configuration=group))
    t = t.assign(cell=t["configuration"].astype(str), scenario=t["scenario"].astype(str))
    samples = _per_run(group, jobs["scenario"], jobs["run_id"], _latency_us(jobs))
    return Measured(path, "", "latency", t.set_index(KEY)[[c for c, _ in LATENCY_STATS]], oh.tables(runs), samples,
                    _victims(runs["dir"]))


def measure(path: Path, label: str) -> Measured:
    """One results directory's cells."""
    from dataclasses import replace

    from ..results.campaign_cells import is_campaign

    path = Path(path)
    m = (_campaign_latency_cells(path) or _campaign_cells(path)) if is_campaign(path) else _experiment_cells(path)
    return replace(m, label=label)


# --------------------------------------------------------------------------- comparison


@dataclass
class Comparison:
    """The comparison: the wide table (one row per common cell), the cells only some
    directories have (cell, scenario, labels that have it), the labels and the kind."""

    table: pd.DataFrame
    partial: list[tuple[str, str, list[str]]]
    labels: list[str]
    kind: str
    paths: list[Path]
    #: Scheduler overheads side by side (report/overheads.side_by_side) and one line per
    #: label × cell on the jobs decomposed; None when no label's runs have a trace.
    overheads: pd.DataFrame | None = None
    overhead_lines: list[str] = field(default_factory=list)
    #: Per common cell, label after the first and statistic: the change against the first
    #: label (analysis.change), as rows (cell, scenario, label, Change).
    changes: list[tuple[str, str, str, Change]] = field(default_factory=list)
    #: The quantity the changes are about (unit included).
    quantity: str = "response time (ms)"
    #: Lab campaigns: per common cell and statistic, the boards' variation split from each
    #: label's effect (analysis/boards.BoardSplit, the labels as its factor).
    board_splits: list[tuple[str, str, object]] = field(default_factory=list)

    def board_lines(self) -> list[str]:
        """The board splits in words, each line prefixed by its cell."""
        return [f"{c} · {sc}: {line}" for c, sc, split in self.board_splits for line in split.lines()]

    @property
    def stats(self) -> list[tuple[str, str]]:
        return LATENCY_STATS if self.kind == "latency" else STATS

    @property
    def p99(self) -> str:
        return "p99_us" if self.kind == "latency" else "p99_ms"

    def ratio_column(self, label: str) -> str:
        return f"p99 {label} / {self.labels[0]}"

    def long(self) -> pd.DataFrame:
        """One row per cell × label (the terminal and Markdown view): the label's numbers
        and, from the second label on, its p99 over the first label's."""
        rows = []
        for _, r in self.table.iterrows():
            for i, lb in enumerate(self.labels):
                row = {"cell": r["cell"], "scenario": r["scenario"], "label": lb}
                row.update({h: (_ci(*(r[f"{lb}: slowdown_{k}"] for k in ("median", "lo", "hi"))) if c == "slowdown"
                                else r[f"{lb}: {c}"]) for c, h in self.stats})
                row[f"p99 / {self.labels[0]}"] = r[self.ratio_column(lb)] if i else math.nan
                for stat in CHANGE_STATS:
                    ch = self.change(r["cell"], r["scenario"], lb, stat) if i else None
                    row[f"{stat} vs {self.labels[0]}"] = _change_cell(ch) if ch is not None else "–"
                rows.append(row)
        return pd.DataFrame(rows)

    def change(self, cell: str, scenario: str, label: str, stat: str) -> Change | None:
        """The change of ``stat`` of one cell, ``label`` against the first label."""
        return next((ch for c, sc, lb, ch in self.changes if (c, sc, lb) == (cell, scenario, label) and ch.stat == stat),
                    None)

    def change_lines(self) -> list[str]:
        """One line per cell, label and statistic that changed significantly (the verdict to
        read first), or one line saying nothing did."""
        sig = [f"{c} · {sc}: {lb} {ch.stat} {_change_text(ch)}" for c, sc, lb, ch in self.changes if ch.significant]
        if not sig:
            n = len(self.changes)
            mdc = [ch.minimum_detectable for *_, ch in self.changes if math.isfinite(ch.minimum_detectable)]
            smallest = (f"; with these runs a change under ±{100 * min(mdc):.0f} % to ±{100 * max(mdc):.0f} % "
                        "could not be detected") if mdc else ""
            sig = [f"no significant change in {n} comparisons of the {self.quantity}{smallest}" if n
                   else "nothing to compare"]
        return sig + [f"note: {DRIFT_NOTE}"]

    def to_dict(self) -> dict:
        """The comparison as JSON (`xtalk compare --json`): labels, directories, the cells with
        each label's numbers and each change with its CI and verdict, the cells not common."""
        def num(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v.item() if hasattr(v, "item") else v

        cells = []
        for _, r in self.table.iterrows():
            sides = {lb: {c: num(r[f"{lb}: {c}"]) for c in (LATENCY_COLUMNS if self.kind == "latency" else COLUMNS)}
                     for lb in self.labels}
            cells.append({"cell": r["cell"], "scenario": r["scenario"], "sides": sides,
                          "changes": [{"label": lb, **ch.to_dict()} for c, sc, lb, ch in self.changes
                                      if (c, sc) == (r["cell"], r["scenario"])]})
        return {"schema_version": 1, "kind": self.kind, "quantity": self.quantity, "labels": self.labels,
                "baseline": self.labels[0], "paths": [str(p) for p in self.paths], "cells": cells,
                "partial": [{"cell": c, "scenario": s, "labels": lbs} for c, s, lbs in self.partial],
                "boards": [{"cell": c, "scenario": sc, **split.to_dict()} for c, sc, split in self.board_splits],
                "note": DRIFT_NOTE}


def compare(measured: Sequence[Measured]) -> Comparison:
    """Join the directories' cells on (cell, scenario): each label's columns, then the ratio
    of each later label's p99 to the first's."""
    kinds = {m.kind for m in measured}
    if len(kinds) > 1:
        what = ", ".join(f"{m.path} ({m.kind})" for m in measured)
        raise UsageError(f"RESULTS: mixes {what}; compare the same experiment or campaign measured on each machine")
    kind = kinds.pop()
    victims = {m.victims for m in measured if m.victims}
    if len(victims) > 1:
        what = "; ".join(f"{m.path}: {', '.join(sorted(m.victims))}" for m in measured)
        raise UsageError(f"RESULTS: the directories measured different victims ({what}); compare the same experiment "
                         "or campaign measured on each machine or kernel")
    p99 = "p99_us" if kind == "latency" else "p99_ms"
    keys = [list(m.table.index) for m in measured]
    common = [k for k in keys[0] if all(k in set(ks) for ks in keys[1:])]
    every = list(dict.fromkeys(k for ks in keys for k in ks))
    partial = [(c, s, [m.label for m in measured if (c, s) in set(m.table.index)]) for c, s in every
               if (c, s) not in set(common)]
    cols = {"cell": [c for c, _ in common], "scenario": [s for _, s in common]}
    for m in measured:
        t = m.table.loc[common] if common else m.table.iloc[0:0]
        for c in ([c for c, _ in LATENCY_STATS] if kind == "latency" else COLUMNS):
            cols[f"{m.label}: {c}"] = list(t[c])
    first = measured[0].table.loc[common, p99].to_numpy(dtype=float) if common else []
    labels = [m.label for m in measured]
    out = pd.DataFrame(cols)
    comp = Comparison(out, partial, labels, kind, [m.path for m in measured],
                      quantity="wake-up latency (µs)" if kind == "latency" else "response time (ms)")
    for m in measured[1:]:
        for c, sc in common:
            for stat, ch in changes(measured[0].samples.get((c, sc), []), m.samples.get((c, sc), []),
                                    CHANGE_STATS).items():
                comp.changes.append((c, sc, m.label, ch))
    traced = {m.label: m.overheads for m in measured if m.overheads is not None}
    if traced:
        from .overheads import coverage_lines, side_by_side

        comp.overheads = side_by_side({lb: o[0] for lb, o in traced.items()})
        comp.overhead_lines = [x for lb, o in traced.items() for x in coverage_lines(lb, o[1])] + \
            [f"{m.label}: no kernel trace" for m in measured if m.overheads is None]
    for m in measured[1:]:
        other = m.table.loc[common, p99].to_numpy(dtype=float) if common else []
        out[comp.ratio_column(m.label)] = [b / a if a > 0 else math.nan for a, b in zip(first, other)]
    comp.board_splits = _board_splits(measured, common)
    return comp


def _board_splits(measured: Sequence[Measured], common: list) -> list:
    """Per common cell and statistic, the boards' variation against the labels' effects, when
    at least two labels' campaigns ran on lab boards (the first label the reference)."""
    from ..analysis.boards import board_split
    from .boards import STATS as BOARD_STATS

    sides = [m.boards.assign(side=m.label) for m in measured if m.boards is not None and len(m.boards)]
    if len(sides) < 2:
        return []
    runs = pd.concat(sides, ignore_index=True)
    ref = next(m.label for m in measured if m.boards is not None and len(m.boards))
    found = []
    for c, sc in common:
        rows = runs[(runs["cell"] == c) & (runs["scenario"] == sc)]
        if rows["side"].nunique() < 2:
            continue
        for stat in BOARD_STATS:
            try:
                found.append((c, sc, board_split(rows.rename(columns={stat: "value"}), stat=stat, factor="side",
                                                 reference=ref)))
            except ValueError:  # no run with a positive value: nothing to split
                continue
    return found


# --------------------------------------------------------------------------- output


def default_out(labels: Sequence[str]) -> Path:
    """./compare-<label>-vs-<label>..., each label reduced to file-name characters."""
    return Path("compare-" + "-vs-".join(re.sub(r"[^A-Za-z0-9._+-]+", "_", lb) for lb in labels))


def _fmt(v) -> str:
    from .html import fmt

    return fmt(v)


def partial_lines(comp: Comparison) -> list[str]:
    """The cells only some directories have, one line each."""
    return [f"{c} · {s}: only in {', '.join(lbs)}" for c, s, lbs in comp.partial]


def sources(comp: Comparison) -> list[str]:
    return [f"{lb}: {p}" for lb, p in zip(comp.labels, comp.paths)]


def markdown(comp: Comparison) -> str:
    """compare.md: what is compared, the table (one row per cell × label), the partial cells."""
    from .markdown import md_table

    what = "wake-up latency (µs)" if comp.kind == "latency" else \
        "response time (ms); slowdown: median execution time against solo, 95 % CI"
    out = [f"# Comparison: {' vs '.join(comp.labels)}", "", *[f"- {x}" for x in sources(comp)], "",
           f"Cells common to every results directory: {len(comp.table)}; {what}; "
           f"p99 / {comp.labels[0]}: the label's p99 over {comp.labels[0]}'s.", "",
           md_table(comp.long(), max_rows=10_000), "",
           f"## Changes against {comp.labels[0]}", "",
           f"The {comp.quantity}'s median and p99, each label over {comp.labels[0]}, with the 95 % CI from the runs "
           "of both sides; significant when the CI excludes 1.", "", *[f"- {x}" for x in comp.change_lines()], ""]
    if comp.board_splits:
        out += ["## Boards against results directories", "",
                "Lab boards: the between-board variation (a random effect, its SD with a 95 % CI) split from each "
                f"label's effect against {comp.labels[0]} (95 % CI accounting for the boards), per cell, on the log "
                "of each run's statistic of the response time (analysis/boards.py).", "",
                *[f"- {x}" for x in comp.board_lines()], ""]
    lines = partial_lines(comp)
    out += ["## Cells not in every results directory", ""] + ([f"- {x}" for x in lines] or ["_(none)_"])
    if comp.overheads is not None:
        from .overheads import LEGEND

        out += ["", "## Scheduler overheads (µs)", "", LEGEND, "", md_table(comp.overheads, max_rows=10_000), ""]
        out += [f"- {x}" for x in comp.overhead_lines]
    return "\n".join(out) + "\n"


def figure(comp: Comparison):
    """p99 per cell, one bar per label (None when there is no common cell)."""
    import matplotlib.pyplot as plt
    import numpy as np

    if comp.table.empty:
        return None
    names = [f"{c} · {s}" if c not in ("default", "") else s for c, s in zip(comp.table["cell"], comp.table["scenario"])]
    n, k = len(names), len(comp.labels)
    fig, ax = plt.subplots(figsize=(7.2, 1.2 + 0.35 * n * k), layout="constrained")
    h = 0.8 / k
    y = np.arange(n)
    for i, lb in enumerate(comp.labels):
        ax.barh(y + i * h, comp.table[f"{lb}: {comp.p99}"].to_numpy(dtype=float), height=h, label=lb)
    ax.set_yticks(y + h * (k - 1) / 2, names)
    ax.invert_yaxis()
    ax.set_xlabel("p99 wake-up latency (µs)" if comp.kind == "latency" else "p99 response time (ms)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("p99 per cell and label")
    return fig


def write(comp: Comparison, out: Path) -> list[Path]:
    """compare.md, compare.csv (the wide table), compare.html (self-contained) and the figure
    (p99.png, p99.svg) under ``out``."""
    from . import html as hx
    from .figures import render

    out = Path(out)
    safepath.makedirs(out)
    safepath.write_text(out / "compare.md", markdown(comp))
    safepath.write_csv(comp.table, out / "compare.csv", index=False)
    fig = figure(comp)
    rendered = render(fig, out, "p99", "p99 per cell and label",
                      "Only the cells common to every results directory.") if fig is not None else None
    sec = hx.Section("compare", "Side by side")
    for x in sources(comp):
        sec.text(x)
    for x in comp.change_lines():
        sec.text(x)
    sec.table(comp.long(), max_rows=10_000).figure(rendered)
    part = hx.Section("partial", "Cells not in every results directory")
    for x in partial_lines(comp) or ["(none)"]:
        part.text(x)
    sections = [sec, part]
    if comp.overheads is not None:
        from .overheads import LEGEND

        ovh = hx.Section("overheads", "Scheduler overheads (µs)").text(LEGEND)
        ovh.table(comp.overheads, max_rows=10_000)
        for x in comp.overhead_lines:
            ovh.text(x)
        sections.append(ovh)
        safepath.write_csv(comp.overheads, out / "overheads.csv", index=False)
    safepath.write_text(out / "compare.html", hx.page(f"Comparison: {' vs '.join(comp.labels)}",
                                                      f"{len(comp.table)} common cells", sections))
    files = [out / "compare.md", out / "compare.csv", out / "compare.html"] + \
        ([out / "overheads.csv"] if comp.overheads is not None else [])
    return files + ([rendered.png_path, rendered.svg_path] if rendered else [])


def show(comp: Comparison, console) -> None:
    """The terminal table (one row per cell × label) and the cells not in every directory."""
    from rich.table import Table

    long = comp.long()
    t = Table(title=f"compare: {' vs '.join(comp.labels)}")
    for c in long.columns:
        t.add_column(str(c), justify="left" if c in ("cell", "scenario", "label") else "right")
    for row in long.itertuples(index=False):
        t.add_row(*(_fmt(v) for v in row))
    console.print(t, markup=False)
    for x in sources(comp):
        console.print(x, markup=False)
    for x in comp.change_lines():
        console.print(x, markup=False)
    for x in comp.board_lines():
        console.print(f"boards: {x}", markup=False)
    for x in partial_lines(comp):
        console.print(x, markup=False)
    if comp.overheads is not None:
        t = Table(title="scheduler overheads per timer release (µs)")
        for c in comp.overheads.columns:
            t.add_column(str(c), justify="left" if c in ("scenario", "configuration", "overhead") else "right")
        for row in comp.overheads.itertuples(index=False):
            t.add_row(*(_fmt(v) for v in row))
        console.print(t)
        for x in comp.overhead_lines:
            console.print(x)


def run(paths: Sequence[Path], labels: Sequence[str], out: Path | None, console, *, as_json: bool = False) -> Comparison:
    """The command: check, label, measure, compare, print (the table, or with ``as_json`` the
    JSON document on standard output), write. Nothing is written before every input has been
    read."""
    import json
    import sys

    paths = [Path(p) for p in paths]
    check_inputs(paths, labels)
    names = labels_for(paths, labels)
    comp = compare([measure(p, lb) for p, lb in zip(paths, names)])
    if as_json:
        json.dump(comp.to_dict(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        show(comp, console)
    files = write(comp, out if out is not None else safepath.results_dir(default_out(names), "--out"))
    if not as_json:
        console.print(f"wrote {', '.join(str(f) for f in files[:3])}", markup=False)
    return comp
