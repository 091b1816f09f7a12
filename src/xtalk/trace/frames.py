"""A run's kernel trace as one DataFrame per event type, the shape LISA users know.

LISA's ``Trace.df_event(name)`` gives an event's rows indexed by ``Time``, with the common
fields ``__cpu``, ``__pid``, ``__comm`` and the event's own fields as columns. Here ``Time``
is CLOCK_MONOTONIC in ns (int64, the job table's clock: join on ``start_ns``/``end_ns``), not
LISA's float seconds, and the fields are those the parser gives (trace/parse.py), so either
capture the agent kept reads the same.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import UsageError
from .run import events_of

_COMMON = {"cpu": "__cpu", "pid": "__pid", "comm": "__comm"}


class RunTrace:
    """The events of one run's trace, split by event type (``df_event``, ``dfs``)."""

    def __init__(self, events: pd.DataFrame, path: Path | None = None):
        self.path = path
        self.events = events
        self._by_event = {str(k): g for k, g in events.groupby("event", sort=True)} if len(events) else {}

    @classmethod
    def of(cls, run_dir: Path) -> RunTrace:
        """The trace of run directory ``run_dir``; UsageError (one line) when it has none."""
        events = events_of(Path(run_dir))
        if events is None:
            raise UsageError(f"{run_dir}: no kernel trace; add a [trace] table to the experiment and run it as root")
        return cls(events, Path(run_dir))

    @property
    def available_events(self) -> list[str]:
        """The event types the trace holds (e.g. sched_switch, irq_handler_entry)."""
        return sorted(self._by_event)

    def df_event(self, event: str) -> pd.DataFrame:
        """The rows of ``event`` indexed by ``Time`` (ns), columns ``__cpu``, ``__pid``,
        ``__comm`` then the event's own fields (those it never has dropped). KeyError naming
        the events there are when the trace has none of it."""
        g = self._by_event.get(event)
        if g is None:
            raise KeyError(f"{event!r}: not in this trace; it has {', '.join(self.available_events) or 'no event'}")
        df = g.drop(columns="event").dropna(axis=1, how="all").rename(columns=_COMMON)
        df = df.rename(columns={"ts_ns": "Time"}).set_index("Time")
        first = [c for c in _COMMON.values() if c in df]
        return df[first + [c for c in df.columns if c not in first]]

    def dfs(self) -> dict[str, pd.DataFrame]:
        """Every event type's frame (:meth:`df_event`), by name."""
        return {e: self.df_event(e) for e in self.available_events}

    def __repr__(self) -> str:
        return f"RunTrace({self.path}, {len(self.events)} events: {', '.join(self.available_events)})"
