"""Views of the same results for other standards than the objectives' own: ISO 26262's
freedom from interference in timing, per pair of criticalities (an experiment of applications
gives each application beside each other, and each fault of one against the others); ECSS's
CPU budget per application against the margin each review asks."""

from __future__ import annotations

import pandas as pd

from ..errors import UsageError
from ..units import fraction
from .inputs import Input
from .objectives import FAULT_KINDS, Finding

#: The CPU margin a budget keeps by default at each review, in order of maturity: the share of
#: the period the worst observed execution leaves free. A project's margin policy sets its own
#: (`--ecss-margin REVIEW=SHARE`); these defaults only make the view readable without one.
ECSS_MARGINS = {"PDR": 0.50, "CDR": 0.35, "QR": 0.25}


def iso26262(inputs: list[Input]) -> Finding:
    """Freedom from interference in timing per (victim, interferer) pair with both
    criticalities: the slowdown of the victim beside the interferer (95 % CI) and, where the
    interferer had a fault injected, whether it propagated."""
    f = Finding("ISO_26262_FFI", "ISO 26262 view: freedom from interference in timing",
                "per pair of applications of different criticality (ASIL): does the lower one's timing or failure "
                "reach the higher one")
    rows, ids = [], []
    for inp in inputs:
        if not inp.multi:
            continue
        c = inp.cohabitation()
        crit = {a.name: a.criticality for a in c.apps}
        spread = {(r.configuration, r.faulty, r.application): r.verdict for r in c.propagation.itertuples()}
        for r in c.matrix.itertuples():
            rows.append({"input": inp.name, "configuration": r.configuration, "victim": r.victim,
                         "victim criticality": crit.get(r.victim), "interferer": r.perturber,
                         "interferer criticality": crit.get(r.perturber), "metric": f"{r.metric} {r.statistic}",
                         "slowdown [95 % CI]": f"×{r.slowdown:.2f} [{r.low:.2f}, {r.high:.2f}]",
                         "timing interference": r.interference,
                         "fault of the interferer": spread.get((r.configuration, r.perturber, r.victim), "not injected")})
        ids += [f"{inp.name}/{x}" for x in inp.run_ids()]
    if not rows:
        f.not_covered = "no input is an experiment of applications with criticalities ([[application]] entries)"
        return f
    f.add("ffi_pairs", pd.DataFrame(rows), ids)
    f.notes.append("Criticality letters are those the experiment file declares; map them to ASILs in the safety case.")
    return f


def ecss_margins(given: list[str]) -> dict[str, float]:
    """The reviews and their margins: the defaults, each `REVIEW=SHARE` given replacing or
    adding one (UsageError naming the bad one)."""
    out = dict(ECSS_MARGINS)
    for g in given:
        review, eq, share = g.partition("=")
        if not eq or not review.strip():
            raise UsageError(f"--ecss-margin {g!r}: write REVIEW=SHARE, e.g. CDR=35%")
        try:
            out[review.strip()] = fraction(share, f"--ecss-margin {review.strip()}", high=1.0)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return out


def _fault_scenarios(inp: Input) -> set[str]:
    """Scenarios that inject a failure (a fault of an application, a fault enemy): they measure
    containment, not the budget."""
    r = inp.runs()
    faulty = r["fault"].fillna("").astype(str).ne("") if "fault" in r else pd.Series(False, index=r.index)
    kinds = r["enemy_kinds"].fillna("").astype(str).map(lambda s: bool(set(s.split("+")) & FAULT_KINDS))
    return set(r.loc[faulty | kinds, "scenario"].astype(str))


def ecss(inputs: list[Input], margins: dict[str, float] | None = None) -> Finding:
    """CPU budget per application and configuration: the share of its period its worst observed
    execution takes (over the scenarios without a fault: the worst interference measured), its
    share alone, the margin left, and whether that margin meets each review's."""
    margins = ECSS_MARGINS if margins is None else margins
    f = Finding("ECSS_CPU_budget", "ECSS view: CPU budget per application",
                "per application: the share of its period its worst observed execution takes under the worst "
                "interference measured, against the margin each review asks")
    rows, ids = [], []
    for inp in inputs:
        m = inp.data.measured
        if m.empty or "period_ns" not in m or "exec_ns" not in m:
            continue
        crit = {a.name: a.criticality for a in inp.cohabitation().apps} if inp.multi else {}
        m = m[~m["scenario"].astype(str).isin(_fault_scenarios(inp))]
        for (conf, app), g in m.groupby(["configuration", "application"], sort=True):
            worst = g.groupby("scenario")["exec_ns"].max()
            scenario = str(worst.idxmax())
            period = float(g["period_ns"].median())
            alone = [s for s in worst.index if s in ("solo", f"alone:{app}")]
            use = float(worst.max()) / period
            row = {"input": inp.name, "configuration": conf, "application": app, "criticality": crit.get(app, "–"),
                   "period ms": period / 1e6, "worst scenario": scenario, "max execution ms": float(worst.max()) / 1e6,
                   "CPU use (worst)": f"{use:.1%}",
                   "CPU use (alone)": f"{float(worst[alone[0]]) / period:.1%}" if alone else "–",
                   "margin left": f"{1 - use:.1%}", "runs": int(g["run_id"].nunique())}
            for review, need in margins.items():
                row[f"{review} (margin ≥ {need:.0%})"] = "holds" if 1 - use >= need else "exceeded"
            rows.append(row)
        ids += [f"{inp.name}/{x}" for x in inp.run_ids()]
    if not rows:
        f.not_covered = "no input measured a job with a period (every run failed or none had a periodic victim)"
        return f
    f.add("cpu_budget", pd.DataFrame(rows), ids)
    f.notes.append("CPU use: the largest execution time observed in any run, over the period, on the application's "
                   "CPU; an observation, not a WCET bound (MCP_Software_1 has the pWCET where it is accepted). "
                   "Review margins: " + ", ".join(f"{r} {v:.0%}" for r, v in margins.items())
                   + (" (defaults; a project's margin policy sets its own with --ecss-margin REVIEW=SHARE)"
                      if margins == ECSS_MARGINS else " (given with --ecss-margin)") + ".")
    return f
