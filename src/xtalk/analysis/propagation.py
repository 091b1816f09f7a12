"""Failure propagation between applications of different criticality (seed 002 §I; issue 18).

A fault scenario ``fault:<F>:<kind>`` runs every application with F misbehaving (a crash,
an overrun, a memory hog, a fork bomb, ...). Every other application O is judged in it
against ``all`` of the same configuration (every application, no fault), so that what the
applications do to each other anyway is not blamed on the fault:

- propagated: O failed (its process failed or was not recorded in a run, a run that is not
  the fault's own refusal did not complete, or jobs of it failed where none did in ``all``),
  O missed significantly more deadlines than in ``all`` (the one-sided exact test of its
  miss count, analysis.verdict.more_misses; more but not significantly leaves the verdict
  unsettled, never propagated),
  or O's statistic broke its ε (analysis/cohabitation.py: against ``alone:<O>``) where it
  held in ``all`` or grew beyond the CI of ``all`` (an ε the other applications already
  break is not the fault's doing); without an ε, its statistic grew beyond the CI of
  ``all`` (the slowdown's CI above 1 + noise floor);
- slowed: none of these, but its statistic grew beyond the CI of ``all`` while its ε held;
- refused: no run completed and the fault could not start (as report/containment.py);
- contained: otherwise.

A verdict that could still turn to propagated is not ``firm``, with the runs per scenario
that would settle it: fewer than ``MIN_RUNS`` runs, or a CI that straddles the threshold
(the ε bound; for an application without ε, 1 + noise floor against ``all``) while the
estimate itself lies beyond it. An estimate on the safe side of a straddling CI is noted,
not counted: more runs would most likely confirm it.

The property (:func:`property_check`), per configuration: no fault of a lower-criticality
application propagates to a higher-criticality one (ECSS levels, A highest): violated when
one does, inconclusive when none does but one of those verdicts is not firm, holds
otherwise, not exercised when no such pair was run.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from . import verdict as vd
from .cohabitation import (
    FAULT, MIN_RUNS, Application, Samples, applications, by_criticality, epsilon_check, higher, noise_floor,
    parse_scenario, ratio, runs_needed,
)

PROPAGATION_COLUMNS = ["configuration", "faulty", "fault", "scenario", "application", "faulty_criticality", "criticality",
                       "verdict", "firm", "runs_needed", "runs_ok", "runs", "slowdown", "low", "high", "epsilon",
                       "misses", "reference_misses", "why"]


def _runs_of(runs: pd.DataFrame | None, configuration: str, scenario: str) -> pd.DataFrame:
    if runs is None or runs.empty:
        return pd.DataFrame(columns=["run_id", "status", "reason"])
    r = runs[runs["scenario"] == scenario]
    if "configuration" in r.columns:
        r = r[r["configuration"] == configuration]
    return r


def _reason(r) -> str:
    v = getattr(r, "reason", None)
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _misses(frame: pd.DataFrame) -> tuple[int, int]:
    """(missed jobs, jobs) of a job frame, recomputed from the times (analysis.verdict)."""
    if frame.empty or not {"release_ns", "end_ns", "period_ns"} <= set(frame.columns):
        return (int(frame["missed"].sum()), len(frame)) if "missed" in frame.columns else (0, len(frame))
    m = vd.classify_misses(frame, include_warmup=True)
    return int(m["missed"].sum()), len(m)


def _failed_jobs(frame: pd.DataFrame) -> int:
    return int(frame["failed"].fillna(False).astype(bool).sum()) if "failed" in frame.columns else 0


def judge(samples: Samples, runs: pd.DataFrame | None, configuration: str, scenario: str, other: Application,
          faulty: Application, *, status: pd.DataFrame | None = None, n_boot: int = 2000, seed: int = 0) -> dict:
    """The verdict of one (faulty application, other application) in one fault scenario.

    ``runs``: the run table (run_id, scenario, configuration, status, reason); ``status``:
    per-application facts of each run when the results have them (run_id, application,
    failed, reason), else a run that did not complete counts against every application."""
    ref_scen = "all"
    r = _runs_of(runs, configuration, scenario)
    reasons = r["reason"].fillna("").astype(str) if "reason" in r.columns else pd.Series("", index=r.index)
    # A run that failed because the fault (an enemy) could not start says nothing about the others.
    refused = r[(r["status"] != "completed") & reasons.str.startswith("enemy ")]
    ok = int((r["status"] == "completed").sum()) if len(r) else len(samples.runs(configuration, scenario, other.name, other.metric))
    failure, timing, unsettled, notes = [], [], [], []
    # -- failures
    if status is not None and len(status) and len(r):
        judged = set(r["run_id"]) - set(refused["run_id"])
        st = status[(status["application"] == other.name) & status["run_id"].isin(judged)]
        bad = st[st["failed"].astype(bool)]
        if len(bad):
            failure.append(f"{other.name} failed in {len(bad)} run(s): " + "; ".join(sorted({_reason(x) or "failed" for x in bad.itertuples()})))
    elif len(r):
        bad = r[(r["status"] != "completed") & ~r.index.isin(refused.index)]
        if len(bad):
            failure.append(f"{len(bad)} run(s) not completed: " + "; ".join(sorted({_reason(x) or str(x.status) for x in bad.itertuples()})))
    frame = samples.frame(configuration, scenario, other.name)
    ref_frame = samples.frame(configuration, ref_scen, other.name)
    if len(r):
        done = r[r["status"] == "completed"]
        recorded = set(frame["run_id"].astype(str)) if len(frame) else set()
        silent = [str(x) for x in done["run_id"] if str(x) not in recorded]
        if silent:
            failure.append(f"no job of {other.name} recorded in {len(silent)} completed run(s)")
    fj, fj_ref = _failed_jobs(frame), _failed_jobs(ref_frame)
    if fj and not fj_ref:
        failure.append(f"{fj} job(s) of {other.name} failed (none in {ref_scen})")
    # -- deadline misses
    k_miss, n = _misses(frame)
    k_ref, n_ref = _misses(ref_frame)
    p_miss = vd.more_misses(k_miss, n, k_ref, n_ref)
    if p_miss < vd.MISS_ALPHA:
        failure.append(f"{k_miss} deadline miss(es) in {n} jobs ({k_ref} in {n_ref} in {ref_scen}; one-sided exact "
                       f"test p = {p_miss:.2g})")
    elif p_miss < 1.0:  # more than in `all`, by a count the jobs cannot tell from chance
        notes.append(f"{k_miss} deadline miss(es) in {n} jobs against {k_ref} in {n_ref} in {ref_scen}: p = "
                     f"{p_miss:.2g}, not significant")
        unsettled.append(vd.jobs_to_tell(k_miss, n, k_ref, n_ref, ok or 1))
    # -- slowdown against all, and ε (against alone)
    scen = samples.runs(configuration, scenario, other.name, other.metric)
    ref = samples.runs(configuration, ref_scen, other.name, other.metric)
    ci = ratio(scen, ref, other.statistic, n_boot=n_boot, seed=seed)
    floor = noise_floor(samples, configuration, other, seed=seed)
    word = vd.interference(ci.low, ci.high, floor)
    grown = word == vd.SLOWED_DOWN
    if not ref:
        notes.append(f"no {ref_scen} runs to compare with")
    growth = f"{other.metric} {other.statistic} ×{ci.estimate:.2f} [{ci.low:.2f}, {ci.high:.2f}] against {ref_scen}"
    eps = None
    if other.epsilon is not None:
        eps = epsilon_check(samples, configuration, scenario, other, n_boot=n_boot, seed=seed)
        what = f"ε {other.metric} {other.statistic} {eps['bound']}"
        if eps["verdict"] == vd.VIOLATED:
            # The fault's doing only when it made things worse than `all` (or pushed a held ε over).
            before = epsilon_check(samples, configuration, ref_scen, other, n_boot=n_boot, seed=seed)["verdict"] if ref else None
            if grown or before == vd.HOLDS:
                failure.append(f"{what} violated")
            else:
                notes.append(f"{what} violated, as in {ref_scen} already")
        elif eps["verdict"] == vd.INCONCLUSIVE:
            notes.append(f"{what} inconclusive")
            if eps.get("above") or not eps["firm"] and eps["runs"] < MIN_RUNS:
                unsettled.append(eps["runs_needed"])
    if grown:
        (timing if other.epsilon is not None else failure).append(growth)
    elif word == vd.INCONCLUSIVE:
        f = 0.0 if not np.isfinite(floor) else floor
        notes.append(growth + " (CI straddles 1 + noise floor)")
        if other.epsilon is None and ci.estimate > 1 + f:  # growth here would be propagation
            unsettled.append(runs_needed(ci.estimate, ci.low, ci.high, 1 + f, min(len(scen), len(ref)),
                                         over_runs=ci.method == "runs"))
    k = min(len(scen), len(ref)) if ref else len(scen)
    if k < MIN_RUNS:
        unsettled.append(MIN_RUNS)
        notes.append(f"{k} run(s): too few to judge")
    if len(refused):
        notes.append(f"{len(refused)} run(s) where the fault could not start: {_reason(refused.iloc[0])}")
    verdict = vd.containment(bool(failure), bool(timing), ok, len(refused))
    # A propagation already seen stays whatever more runs show; anything else could move.
    firm = verdict == vd.PROPAGATED or not unsettled
    needed = None if firm or None in unsettled else max(max(unsettled), k + 1)
    p = parse_scenario(scenario)
    return {"configuration": configuration, "faulty": faulty.name, "fault": p.extra, "scenario": scenario,
            "application": other.name, "faulty_criticality": faulty.criticality, "criticality": other.criticality,
            "verdict": verdict, "firm": firm, "runs_needed": needed, "runs_ok": ok, "runs": len(r) if len(r) else len(scen),
            "slowdown": ci.estimate, "low": ci.low, "high": ci.high, "epsilon": eps["verdict"] if eps else None,
            "misses": k_miss, "reference_misses": k_ref, "why": "; ".join(failure + timing + notes)}


def propagation(jobs: pd.DataFrame | Samples, runs: pd.DataFrame | None, apps: Sequence[Application] = (), *,
                status: pd.DataFrame | None = None, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per configuration × fault scenario × other application (:func:`judge`),
    the other applications criticality-ordered."""
    s = jobs if isinstance(jobs, Samples) else Samples(jobs)
    apps = applications(s.jobs, apps)
    by_name = {a.name: a for a in apps}
    scen_of = dict.fromkeys(runs["scenario"]) if runs is not None and len(runs) else {}
    rows = []
    for cfg in s.configurations():
        scenarios = list(dict.fromkeys(s.scenarios(cfg) + [str(x) for x in scen_of]))
        for sc in scenarios:
            p = parse_scenario(sc)
            if p.kind != FAULT or p.apps[0] not in by_name:
                continue
            f = by_name[p.apps[0]]
            for o in by_criticality(apps):
                if o.name != f.name:
                    rows.append(judge(s, runs, cfg, sc, o, f, status=status, n_boot=n_boot, seed=seed))
    return pd.DataFrame(rows, columns=PROPAGATION_COLUMNS)


PROPERTY_COLUMNS = ["configuration", "verdict", "pairs", "propagated", "unsettled", "runs_needed", "why"]


def property_check(prop: pd.DataFrame, apps: Sequence[Application]) -> pd.DataFrame:
    """Per configuration: does any fault of a lower-criticality application propagate to a
    higher-criticality one? ``pairs``: the (faulty, other) verdicts that count (the other of
    strictly higher criticality); ``runs_needed``: runs per scenario that would settle an
    inconclusive check (None: more runs will not)."""
    by_name = {a.name: a for a in apps}
    rows = []
    for cfg in dict.fromkeys(prop["configuration"]) if len(prop) else []:
        p = prop[prop["configuration"] == cfg]
        counts = p[[a in by_name and f in by_name and higher(by_name[a], by_name[f])
                    for a, f in zip(p["application"], p["faulty"])]]
        bad = counts[counts["verdict"] == vd.PROPAGATED]
        open_ = counts[~counts["firm"].astype(bool)]
        if counts.empty:
            verdict, why = vd.NOT_EXERCISED, "no fault of a lower-criticality application was run beside a higher one"
        elif len(bad):
            verdict = vd.VIOLATED
            why = "; ".join(f"{r.scenario} ({r.faulty_criticality}) → {r.application} ({r.criticality}): {r.why}"
                            for r in bad.itertuples())
        elif len(open_):
            verdict = vd.INCONCLUSIVE
            why = "; ".join(f"{r.scenario} → {r.application}: {r.why}" for r in open_.itertuples())
        else:
            verdict = vd.HOLDS
            why = f"{len(counts)} lower → higher pair(s), none propagated"
        needed = None
        if verdict == vd.INCONCLUSIVE:
            vals = [v for v in open_["runs_needed"]]
            needed = None if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals) else int(max(vals))
        rows.append({"configuration": cfg, "verdict": verdict, "pairs": len(counts), "propagated": len(bad),
                     "unsettled": len(open_), "runs_needed": needed, "why": why})
    return pd.DataFrame(rows, columns=PROPERTY_COLUMNS)
