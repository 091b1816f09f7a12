"""`xtalk summary RESULTS --view containment`: did a fault stay inside its partition? For each scenario
against `solo`, the higher-criticality application (the victim) is judged run by run, so
that the machine's own noise does not pass for propagation:

- propagated: the fault made the victim fail: a run of it did not complete (the victim failed
  or timed out), or a job of it failed (could not do its work, e.g. a fork refused for want of
  PIDs) where no solo job did, or it missed significantly more deadlines than solo (the
  one-sided exact test of its misses against solo's over all their jobs,
  analysis.verdict.more_misses, p < MISS_ALPHA);
- slowed: none of these, but *every* run's p99 response time exceeds `tolerance` × the worst
  solo run's (timing interference beyond the tolerance, deadlines still met);
- inconclusive: none of these, but it missed more than solo by a count the jobs cannot tell
  from chance (with the runs that would tell);
- contained: none of these;
- refused: the configuration did not let the fault start (an enemy's setup failed, e.g. an RT
  policy in a group without RT runtime), so nothing was measured.

The fault enemies (class `fault` in the agent's catalog: memhog, fdexhaust, forkbomb, diskfill, crashloop, or any
other) and their achieved work are listed beside the verdict."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from .. import safepath
from ..analysis import verdict as vd
from ..store import Results

#: How the terminal colours each containment verdict (analysis.verdict.containment).
COLOUR = {vd.PROPAGATED: "red", vd.SLOWED: "yellow", vd.REFUSED: "yellow", vd.INCONCLUSIVE: "yellow", vd.CONTAINED: "green"}
COLUMNS = ["configuration", "scenario", "runs_ok", "failed_jobs", "miss_ratio", "p99_response_ms", "p99_vs_solo", "verdict", "why", "faults"]


def _failed(jobs: pd.DataFrame) -> pd.Series:
    """Failed-job flags (False for results recorded before the flag existed)."""
    return jobs["failed"].fillna(False).astype(bool) if "failed" in jobs else pd.Series(False, index=jobs.index)


def _per_run(jobs: pd.DataFrame) -> pd.DataFrame:
    """Miss ratio, failed jobs and p99 response (ms) of each run."""
    return (jobs.assign(failed=_failed(jobs))
            .groupby("run_id").agg(miss=("missed", "mean"), failed=("failed", "sum"),
                                   p99=("response_ns", lambda r: np.percentile(r, 99) / 1e6)))


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
    solo_p99 = solo.p99.max() if len(solo) else float("nan")
    solo_failed = int(solo.failed.sum()) if len(solo) else 0
    solo_jobs = jobs[jobs.scenario == "solo"]
    k_ref, n_ref = int(solo_jobs.missed.astype(bool).sum()), len(solo_jobs)
    rows = []
    for scenario, g in runs.groupby("scenario", sort=False):
        if scenario == "solo":
            continue
        j = jobs[jobs.scenario == scenario]
        per = _per_run(j) if len(j) else pd.DataFrame(columns=["miss", "failed", "p99"])
        ok = int((g.status == "completed").sum())
        # A run that failed because an enemy could not start says nothing about the victim.
        refused = g[(g.status != "completed") & g.reason.fillna("").astype(str).str.startswith("enemy ")]
        failure, timing = [], []  # why it propagated; why it only slowed the victim
        if ok + len(refused) < len(g):
            bad = g[(g.status != "completed") & ~g.index.isin(refused.index)]
            failure.append(f"{len(bad)} run(s) not completed: {'; '.join(str(r) for r in bad.reason)}")
        failed = int(per.failed.sum()) if len(per) else 0
        if failed and not solo_failed:
            failure.append(f"{failed} job(s) failed in {int((per.failed > 0).sum())}/{len(per)} run(s) (none solo)")
        k, n = (int(j.missed.astype(bool).sum()), len(j)) if len(j) else (0, 0)
        p = vd.more_misses(k, n, k_ref, n_ref)
        uncertain = False
        if p < vd.MISS_ALPHA:
            failure.append(f"more misses than solo: {k} of {n} jobs against {k_ref} of {n_ref} (one-sided exact test p = {p:.2g})")
        elif p < 1.0:  # more than solo, by a count the jobs cannot tell from chance
            uncertain = True
            more = vd.jobs_to_tell(k, n, k_ref, n_ref, len(per))
            notes_miss = (f"{k} of {n} jobs missed against {k_ref} of {n_ref} solo: p = {p:.2g}, not significant; "
                          + (f"about {more} runs per side would tell" if more else "more runs may not tell"))
        if len(per) and per.p99.min() > tolerance * solo_p99:
            timing.append(f"every run's p99 response >= {per.p99.min():.3f} ms > {tolerance} x solo's worst {solo_p99:.3f} ms")
        notes = [f"{len(refused)} run(s) where the fault could not start: {sorted(set(map(str, refused.reason)))[0]}"] if len(refused) else []
        if uncertain:
            notes.insert(0, notes_miss)
        verdict = vd.containment(bool(failure), bool(timing), ok, len(refused), uncertain)
        why = failure + timing + notes
        p99 = float(np.percentile(j.response_ns, 99) / 1e6) if len(j) else float("nan")
        faults = sorted({f"{e['kind']} ({e['ops']} {e['unit']})" for es in g.enemies for e in (es or [])})
        rows.append({"scenario": scenario, "runs_ok": f"{ok}/{len(g)}", "failed_jobs": failed, "miss_ratio": float(j.missed.mean()) if len(j) else float("nan"),
                     "p99_response_ms": p99, "p99_vs_solo": p99 / solo_p99 if solo_p99 else float("nan"),
                     "verdict": verdict, "why": "; ".join(why), "faults": ", ".join(faults)})
    return pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "configuration"])


def show(results: Results, console: Console, tolerance: float = 1.5) -> pd.DataFrame:
    table = verdicts(results.runs(), results.jobs(), tolerance)
    safepath.write_text(results.path / "containment.json", json.dumps(json.loads(table.to_json(orient="records")), indent=2))
    t = Table(title=f"containment of faults (victim vs solo, tolerance {tolerance}): {results.path.name}")
    for c in COLUMNS:
        t.add_column(c, justify="right" if c in ("failed_jobs", "miss_ratio", "p99_response_ms", "p99_vs_solo") else "left")
    for r in table.itertuples():
        t.add_row(r.configuration, r.scenario, r.runs_ok, str(r.failed_jobs), f"{r.miss_ratio:.3f}", f"{r.p99_response_ms:.3f}", f"{r.p99_vs_solo:.2f}",
                  f"[{COLOUR.get(r.verdict, 'green')}]{r.verdict}[/]", r.why, r.faults)
    console.print(t)
    return table
