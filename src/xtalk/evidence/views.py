"""Views of the same results for other standards than the objectives' own: ISO 26262's
freedom from interference in timing, per pair of criticalities (an experiment of applications
gives each application beside each other, and each fault of one against the others)."""

from __future__ import annotations

import pandas as pd

from .inputs import Input
from .objectives import Finding


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
