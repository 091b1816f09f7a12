"""The report's table of the user-defined trace segments (`[[trace.segment]]`, docs/observe.md)."""

from __future__ import annotations

import pandas as pd

#: What the table says, once.
SEGMENTS_CAPTION = ("Trace segments (µs): per job, from the segment's start event to its end event (the experiment's "
                    "[[trace.segment]]; the job's window runs from its release to the next); the execution time's "
                    "statistics over the jobs that have both, and its slowdown against solo with its 95 % CI. missing: "
                    "measured jobs without the pair")


def in_us(df: pd.DataFrame) -> pd.DataFrame:
    """For display: every *_ns column in µs, renamed *_us."""
    out = df.copy()
    for c in [c for c in out.columns if str(c).endswith("_ns")]:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float) / 1e3
        out = out.rename(columns={c: str(c)[:-3] + "_us"})
    return out
