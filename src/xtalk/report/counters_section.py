"""The report's "Counters" section: per-counter histograms with the runtime markers and the
runtime-against-counter scatter (seed 004 Fig. 8–10), the correlation matrix and the
redundant pairs.

Migrated jobs are left out of every counter statistic and figure (per-core counters: the
delta of a job that changed CPU mixes two cores, SPEC §2); the section says how many. A
counter that is constant over every job (all zero on a VM without the event, say) has no
distribution and no correlation: it gets a sentence, not an empty plot with "r undefined".
"""

from __future__ import annotations

import numpy as np

from . import figures as fg
from ..results import tables as tb
from .html import Section
from ..results.platform import counter_unit, exclude_migrated, facts, migrated
from .platform import counter_label


def section(b) -> Section | None:
    """Build the section (b: the report builder); None when no run recorded counters."""
    data = b.data
    if not data.counters:
        return None
    s = Section("counters", "Counters")
    cs = b.keep("counters", tb.counter_summary(data))
    s.table(cs, "Counters per scenario: markers and correlation with the execution time (migrated jobs excluded)")
    skipped = facts(data)["counters_skipped"]
    if skipped:
        s.text("Not read on this machine, so absent below: " + ", ".join(skipped) + ".")
    constant = []
    for ctr in data.counters:
        g = tb.all_jobs(data, ["run_id", "job", "warmup", "cpu_start", "cpu_end", "exec_ns", ctr]).dropna(subset=[ctr])
        n_mig = int(migrated(g).sum())
        g = exclude_migrated(g)
        g = g.assign(**{ctr: g[ctr].astype(float)})
        if len(g) < 3:
            continue
        steady = g[~g["warmup"]]
        v = steady[ctr].to_numpy()
        if v.size == 0 or np.all(v == v[0]):
            constant.append(f"{ctr.removeprefix('ctr_')} = {v[0]:g} {counter_unit(ctr)} in every job" if v.size else ctr)
            continue
        marks = fg.markers_of(g, ctr)
        unit = counter_unit(ctr)
        note = f" {n_mig} migrated jobs excluded." if n_mig else ""
        s.figure(b.fig(fg.runtime_histogram(v, marks, f"{ctr}: all scenarios", xlabel=counter_label(ctr), unit=unit, scale=1.0),
                       f"hist_{ctr}", f"Histogram of {ctr}", "Markers as for the execution time (seed 004 Fig. 8)." + note))
        first = g.loc[g.groupby("run_id", observed=True)["job"].idxmin()].iloc[0]
        r = tb.correlation(steady["exec_ns"], steady[ctr])
        fig = fg.counter_scatter(v, steady["exec_ns"].to_numpy(), (float(first[ctr]), float(first["exec_ns"])), r, ctr,
                                 "execution time vs counter")
        fig.axes[0].set_xlabel(counter_label(ctr))
        s.figure(b.fig(fig, f"scatter_{ctr}", f"Execution time against {ctr}",
                       "Seed 004 Fig. 10; a random sample of jobs." + note))
    if constant:
        s.text("Constant counters, not plotted (no distribution to show, no correlation defined): " + "; ".join(constant)
               + ". A counter stuck at 0 usually means the event is not counted on this machine (no PMU, or a VM).")
    corr = b.keep("counter_correlation", tb.counter_correlation(data))
    s.figure(b.fig(fg.correlation_matrix(corr, "Pearson correlation"), "counter_correlation",
                   "Correlation between execution time and counters", "Over every measured job that did not migrate."))
    red = b.keep("redundant_counters", tb.redundant_counters(data))
    s.table(red, "Redundant counters (|r| ≥ 0.95): one of each pair can be dropped")
    if red.empty:
        s.text("No pair of counters is redundant at |r| ≥ 0.95." if len(corr) > 2 else
               "Fewer than two varying counters: no redundancy to assess.")
    return s
