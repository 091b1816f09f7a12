"""`xtalk containment RESULTS`: did a fault stay inside its partition? For each scenario
against `solo`, the higher-criticality application (the victim) is judged run by run, so
that the machine's own noise does not pass for propagation:

- propagated: a run of it did not complete (the victim failed or timed out), or *every* run
  missed more deadlines per job than the worst solo run, or *every* run's p99 response time
  exceeds `tolerance` × the worst solo run's;
- contained: none of these.

The fault enemies (memhog, fdexhaust, forkbomb, diskfill, syscallstorm, crashloop, or any
other) and their achieved work are listed beside the verdict."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..store import Results

COLUMNS = ["configuration", "scenario", "runs_ok", "miss_ratio", "p99_response_ms", "p99_vs_solo", "verdict", "why", "faults"]


def _per_run(jobs: pd.DataFrame) -> pd.DataFrame:
    """Miss ratio and p99 response (ms) of each run."""
    return jobs.groupby("run_id").agg(miss=("missed", "mean"), p99=("response_ns", lambda r: np.percentile(r, 99) / 1e6))


def verdicts(runs: pd.DataFrame, jobs: pd.DataFrame, tolerance: float = 1.5) -> pd.DataFrame:
    """One row per configuration × scenario other than solo, each judged against the solo
    runs of its own configuration (the same fault, contained by one configuration and not
    by another, is the point of comparing them)."""
    parts = []
    for cfg in dict.fromkeys(runs.configuration if "configuration" in runs else ["default"]):
        r = runs[runs.configuration == cfg] if "configuration" in runs else runs
        j = jobs[jobs.configuration == cfg] if "configuration" in jobs else jobs
        parts.append(_verdicts_one(r, j, tolerance).assign(configuration=cfg))
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def _verdicts_one(runs: pd.DataFrame, jobs: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    if "solo" not in set(runs.scenario):
        raise ValueError("no 'solo' runs to compare with")
    solo = _per_run(jobs[jobs.scenario == "solo"])
    solo_miss, solo_p99 = (solo.miss.max(), solo.p99.max()) if len(solo) else (0.0, float("nan"))
    rows = []
    for scenario, g in runs.groupby("scenario", sort=False):
        if scenario == "solo":
            continue
        j = jobs[jobs.scenario == scenario]
        per = _per_run(j) if len(j) else pd.DataFrame(columns=["miss", "p99"])
        ok = int((g.status == "completed").sum())
        why = []
        if ok < len(g):
            why.append(f"{len(g) - ok} run(s) not completed: {'; '.join(str(r) for r in g[g.status != 'completed'].reason)}")
        if len(per) and per.miss.min() > solo_miss:
            why.append(f"every run misses more: ratio >= {per.miss.min():.3f} > solo's worst {solo_miss:.3f}")
        if len(per) and per.p99.min() > tolerance * solo_p99:
            why.append(f"every run's p99 response >= {per.p99.min():.3f} ms > {tolerance} x solo's worst {solo_p99:.3f} ms")
        p99 = float(np.percentile(j.response_ns, 99) / 1e6) if len(j) else float("nan")
        faults = sorted({f"{e['kind']} ({e['ops']} {e['unit']})" for es in g.enemies for e in (es or [])})
        rows.append({"scenario": scenario, "runs_ok": f"{ok}/{len(g)}", "miss_ratio": float(j.missed.mean()) if len(j) else float("nan"),
                     "p99_response_ms": p99, "p99_vs_solo": p99 / solo_p99 if solo_p99 else float("nan"),
                     "verdict": "propagated" if why else "contained", "why": "; ".join(why), "faults": ", ".join(faults)})
    return pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "configuration"])


def show(results: Results, console: Console, tolerance: float = 1.5) -> pd.DataFrame:
    table = verdicts(results.runs(), results.jobs(), tolerance)
    (results.path / "containment.json").write_text(json.dumps(json.loads(table.to_json(orient="records")), indent=2))
    t = Table(title=f"containment of faults (victim vs solo, tolerance {tolerance}): {results.path.name}")
    for c in COLUMNS:
        t.add_column(c, justify="right" if c in ("miss_ratio", "p99_response_ms", "p99_vs_solo") else "left")
    for r in table.itertuples():
        t.add_row(r.configuration, r.scenario, r.runs_ok, f"{r.miss_ratio:.3f}", f"{r.p99_response_ms:.3f}", f"{r.p99_vs_solo:.2f}",
                  f"[{'red' if r.verdict == 'propagated' else 'green'}]{r.verdict}[/]", r.why, r.faults)
    console.print(t)
    return table
