"""The report's "Platform" section: the facts of results/platform.py (kernel, hypervisor,
PMU, counters, migrated jobs) as sentences and a table."""

from __future__ import annotations

import pandas as pd

from ..results.platform import counter_unit, facts, migration_table


def counter_label(column: str) -> str:
    """Axis label of a counter: its event name and unit per job."""
    return f"{column.removeprefix('ctr_')} ({counter_unit(column)} per job)"


def lines(f: dict) -> list[str]:
    """The facts as sentences (HTML section, summary.md, terminal)."""
    out = [f"Kernel: {f['kernel']}.", f"Virtual machine: {f['virtualization']}.", f"CPU: {f['cpu']}, clocksource {f['clocksource']}.",
           f"PMU: {f['pmu_line']}."]
    if f["counters_skipped"]:
        out.append("Counters skipped (not read on this machine): " + "; ".join(
            f"{e} ({why})" if why else e for e, why in f["counters_skipped"].items()) + ".")
    elif f["counters_requested"] or f["counters_read"]:
        out.append("Counters: every requested counter was read.")
    else:
        out.append("Counters: none requested.")
    n, k = f["jobs"], f["migrated"]
    out.append(f"Migrated jobs (ended on another CPU than they started on): {k} of {n}"
               + (f" ({100.0 * k / n:.2f} %); their counter deltas mix two CPUs, so the counter statistics exclude them."
                  if k else "." if n else ""))
    return out


def section(b):
    """The report's "Platform" section (b: the report builder)."""
    from .html import Section

    f = facts(b.data)
    b.keep("platform", pd.DataFrame({"item": list(f), "value": [str(v) for v in f.values()]}))
    s = Section("platform", "Platform")
    s.raw("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in lines(f)) + "</ul>")
    if f["hypervisor"]:
        s.text("Timing measured in a virtual machine includes the hypervisor's own preemptions (steal time) and timer "
               "emulation; compare solo and interference runs of the same machine only.")
    if f["preempt_rt"] is False:
        s.text("Stock (non PREEMPT_RT) kernel: non-preemptible kernel sections add to the latency tail.")
    mt = b.keep("migrations", migration_table(b.data))
    if f["migrated"]:
        s.table(mt, "Migrated jobs per scenario")
    return s


def _esc(x) -> str:
    import html

    return html.escape(str(x))
