"""Durations, sizes and CPU sets as people write them in experiment files.

Durations: numbers are milliseconds; strings carry a unit ("250us", "10ms", "1.5s", "100ns").
Sizes: numbers are bytes; strings carry a unit ("64KiB", "2MiB", "1GB") or name a cache of
the target ("llc", "l2", "l1d"), optionally scaled ("4*llc", "llc/4", "0.5*l2").
"""

from __future__ import annotations

import re
from typing import Union

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|min)?\s*$")
_DURATION_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_MUL = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
             "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_CACHE_EXPR = re.compile(r"^\s*(?:([0-9]*\.?[0-9]+)\s*\*\s*)?(llc|l1d|l1|l2|l3)\s*(?:/\s*([0-9]*\.?[0-9]+))?\s*$", re.IGNORECASE)


def duration_ns(value: Union[int, float, str], field: str) -> int:
    """Parse a duration; bare numbers are milliseconds."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected a duration such as \"10ms\", got {value!r}")
    if isinstance(value, (int, float)):
        ns = float(value) * 1e6
    else:
        m = _DURATION.match(value)
        if not m:
            raise ValueError(f"{field}: cannot read duration {value!r}; write e.g. \"10ms\", \"250us\" or \"1.5s\"")
        ns = float(m.group(1)) * _DURATION_NS[m.group(2) or "ms"]
    if ns <= 0:
        raise ValueError(f"{field}: duration must be positive, got {value!r}")
    return int(round(ns))


def fraction(value: Union[int, float, str], field: str, high: float = 1.0) -> float:
    """A share written "30%" or 0.3, in (0, high]."""
    text = value.strip() if isinstance(value, str) else value
    try:
        if isinstance(text, bool):
            raise ValueError
        f = float(text[:-1]) / 100 if isinstance(text, str) and text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"{field}: cannot read {value!r}; write a share such as \"30%\" or 0.3") from None
    if not 0 < f <= high:  # also refuses nan
        raise ValueError(f"{field}: {value!r} is outside (0, {high:.0%}]; write e.g. \"30%\"")
    return f


def size_bytes(value: Union[int, float, str], field: str, caches: dict[str, int]) -> int:
    """Parse a size; `caches` maps "l1d", "l2", "llc" to bytes on the target."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected a size such as \"2MiB\" or \"llc\", got {value!r}")
    if isinstance(value, (int, float)):
        n = float(value)
    else:
        m = _CACHE_EXPR.match(value)
        if m:
            name = m.group(2).lower()
            name = {"l1": "l1d", "l3": "llc"}.get(name, name)
            if name not in caches:
                raise ValueError(f"{field}: this target reports no {name.upper()} cache; give the size in bytes (e.g. \"8MiB\")")
            n = caches[name] * float(m.group(1) or 1) / float(m.group(3) or 1)
        else:
            m = _SIZE.match(value)
            if not m:
                raise ValueError(f"{field}: cannot read size {value!r}; write e.g. \"64KiB\", \"8MiB\", \"llc\" or \"4*llc\"")
            n = float(m.group(1)) * _SIZE_MUL[(m.group(2) or "b").lower()]
    if n <= 0:
        raise ValueError(f"{field}: size must be positive, got {value!r}")
    return int(n)


def cpu_set(value: Union[int, str, list, None], field: str, online: list[int], victim_cpus: list[int] | None = None) -> list[int] | None:
    """Resolve a CPU placement: a list, "0-3,6", "first", "last", "all", "others"
    (every online CPU not used by the victim) or None (unpinned)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected CPUs such as [0, 1], \"last\" or \"others\", got {value!r}")
    if isinstance(value, int):
        cpus = [value]
    elif isinstance(value, list):
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in value):
            raise ValueError(f"{field}: a CPU list holds integers, got {value!r}")
        cpus = list(value)
    else:
        word = value.strip().lower()
        if word == "first":
            cpus = [online[0]]
        elif word == "last":
            cpus = [online[-1]]
        elif word == "all":
            cpus = list(online)
        elif word == "others":
            taken = set(victim_cpus or [])
            cpus = [c for c in online if c not in taken]
            if not cpus:
                raise ValueError(f"{field}: \"others\" leaves no CPU beside the victim's; pin the victim to fewer CPUs")
        else:
            cpus = []
            for part in word.split(","):
                a, _, b = part.partition("-")
                try:
                    lo, hi = int(a), int(b or a)
                except ValueError:
                    raise ValueError(f"{field}: cannot read CPU list {value!r}; write e.g. \"0-3,6\", \"last\" or \"others\"") from None
                cpus.extend(range(lo, hi + 1))
    for c in cpus:
        if c not in online:
            raise ValueError(f"{field}: CPU {c} does not exist or is offline on the target; online CPUs: {online}")
    if len(set(cpus)) != len(cpus):
        raise ValueError(f"{field}: a CPU is listed twice in {value!r}")
    if not cpus:
        raise ValueError(f"{field}: no CPU given; list CPUs or leave the field out to run unpinned")
    return cpus


_PREFIXES = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def rate_text(per_s: float, unit: str) -> str:
    """A rate with the SI prefix that keeps 1–999 before the unit: 2.4 kwakeups/s, not
    0.0 Mwakeups/s; bytes are written B (1.25 GB/s). Three significant digits."""
    unit = "B" if unit == "bytes" else unit
    if per_s != per_s or per_s in (float("inf"), float("-inf")):
        return f"{per_s} {unit}/s"
    scale, prefix = next(((s, p) for s, p in _PREFIXES if abs(per_s) >= s), (1.0, ""))
    return f"{per_s / scale:.3g} {prefix}{unit}/s"
