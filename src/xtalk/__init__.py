"""xtalk: measure and analyse timing interference on multicore processors."""

from .version import __version__  # noqa: F401 (xtalk.__version__)


def open(path):  # noqa: A001 - reads as xtalk.open(path)
    """Open a results directory (an experiment or a campaign): `.jobs()`, `.runs()`,
    `.culprits()`, `.trace(run)` (a run's kernel trace, one DataFrame per event type),
    `.connect()` (DuckDB). Imported lazily so `import xtalk` stays cheap."""
    from .store.campaign import open_any

    return open_any(path)
