"""xtalk: measure and analyse timing interference on multicore processors."""

__version__ = "0.1.0"
