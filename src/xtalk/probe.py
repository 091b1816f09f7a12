"""Probes in Python programs: the records of include/xtalk/probe.h, written by the same code.

    from xtalk import probe
    with probe.span(7):
        work()

or `probe.begin(7)` ... `probe.end(7)`. Run by xtalk as a `command` victim (the agent hands
over XTALK_PROBE_FD), each section lands in probes.bin like a C program's, on the processor's
counter; outside xtalk every call returns at once. The calls go through the compiled module
`xtalk._probe` (built by `pip install` / `make setup`): its slot claim is the header's atomic
add, so Python, C code and the preload library can share one buffer. One call costs a Python
call (tens of ns) on top of the C probe.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from typing import Iterator

# A compiled module (setup.py), outside the host's layers: imported by name, not as a unit.
try:
    _probe = importlib.import_module("xtalk._probe")
except ImportError as e:  # pragma: no cover - a checkout that was never built
    raise ImportError("xtalk.probe needs the compiled module xtalk._probe: install xtalk with pip "
                      "(`pip install .`) or run `make setup`") from e
attached, begin, dropped, end = _probe.attached, _probe.begin, _probe.dropped, _probe.end

__all__ = ["attached", "begin", "dropped", "end", "span"]


@contextmanager
def span(probe_id: int) -> Iterator[None]:
    """Probe `probe_id` around the body of a `with` block (its end written even if it raises)."""
    begin(probe_id)
    try:
        yield
    finally:
        end(probe_id)
