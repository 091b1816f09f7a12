"""xtalk: measure and analyse timing interference on multicore processors."""

from .version import __version__  # noqa: F401 (xtalk.__version__)


def open(path):  # noqa: A001 - reads as xtalk.open(path)
    """Open a results directory (an experiment or a campaign) as one
    :class:`xtalk.results.Results`: every run's typed outcome (`.outcomes`, `.outcome(run)`),
    `.runs()`, `.jobs()`, `.probes()`, `.culprits()`, `.trace(run)` (a run's kernel trace, one
    DataFrame per event type), `.connect()` (DuckDB), `.cells()`; the query functions of
    `xtalk.results.tables` take it. Imported lazily so `import xtalk` stays cheap."""
    from .results import Results

    return Results(path)
