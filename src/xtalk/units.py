"""Durations, sizes and CPU sets as people write them in experiment files.

Durations: numbers are milliseconds; strings carry a unit ("250us", "10ms", "1.5s", "100ns").
Sizes: numbers are bytes; strings carry a unit ("64KiB", "2MiB", "1GB") or name a cache of
the target ("llc", "l2", "l1d"), optionally scaled ("4*llc", "llc/4", "0.5*l2").
"""

from __future__ import annotations

import math
import re
from typing import Union

from .limits import MAX_CPU, MAX_TIMEOUT_S

#: Longest text a duration, size or CPU list may be (the patterns stay linear below it).
MAX_TEXT = 64
#: Largest size anyone means (1 PiB); the agent reads sizes as 64-bit numbers.
MAX_SIZE = 1 << 50


def _text(value: str, field: str, what: str) -> str:
    if len(value) > MAX_TEXT:
        raise ValueError(f"{field}: {value[:20]!r}... is {len(value)} characters, too long for {what}; write e.g. {_EXAMPLE[what]}")
    return value


def _finite(n, value, field: str, what: str) -> float:
    try:
        n = float(n)
    except OverflowError:  # an integer beyond any float
        n = math.inf
    if not math.isfinite(n):
        raise ValueError(f"{field}: {str(value)[:40]} is not a finite {what}; write e.g. {_EXAMPLE[what]}")
    return n


_EXAMPLE = {"a duration": '"10ms"', "a size": '"8MiB"', "a CPU list": '"0-3,6"', "duration": '"10ms"', "size": '"8MiB"'}

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
        ns = _finite(value, value, field, "duration") * 1e6
    else:
        m = _DURATION.match(_text(value, field, "a duration"))
        if not m:
            raise ValueError(f"{field}: cannot read duration {value!r}; write e.g. \"10ms\", \"250us\" or \"1.5s\"")
        ns = _finite(float(m.group(1)), value, field, "duration") * _DURATION_NS[m.group(2) or "ms"]
    if ns <= 0:
        raise ValueError(f"{field}: duration must be positive, got {value!r}")
    if ns > MAX_TIMEOUT_S * 1e9:
        raise ValueError(f"{field}: {value!r} is longer than {MAX_TIMEOUT_S // 86_400} days; give a shorter duration")
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
        n = _finite(value, value, field, "size")
    else:
        m = _CACHE_EXPR.match(_text(value, field, "a size"))
        if m:
            name = m.group(2).lower()
            name = {"l1": "l1d", "l3": "llc"}.get(name, name)
            if name not in caches:
                raise ValueError(f"{field}: this target reports no {name.upper()} cache; give the size in bytes (e.g. \"8MiB\")")
            divisor = float(m.group(3) or 1)
            if divisor == 0:
                raise ValueError(f"{field}: {value!r} divides by zero; write e.g. \"llc/4\"")
            n = caches[name] * float(m.group(1) or 1) / divisor
        else:
            m = _SIZE.match(value)
            if not m:
                raise ValueError(f"{field}: cannot read size {value!r}; write e.g. \"64KiB\", \"8MiB\", \"llc\" or \"4*llc\"")
            n = float(m.group(1)) * _SIZE_MUL[(m.group(2) or "b").lower()]
    if not math.isfinite(n):
        raise ValueError(f"{field}: {value!r} is not a finite size; write e.g. \"8MiB\"")
    if n <= 0:
        raise ValueError(f"{field}: size must be positive, got {value!r}")
    if n > MAX_SIZE:
        raise ValueError(f"{field}: {value!r} is larger than 1 PiB; give a smaller size")
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
            raise ValueError(f"{field}: a CPU list holds integers, got {str(value)[:40]}")
        if len(value) > MAX_CPU + 1:
            raise ValueError(f"{field}: {len(value)} CPUs listed; a machine has at most {MAX_CPU + 1}; online CPUs: {online}")
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
            if len(word) > 8192:
                raise ValueError(f"{field}: {value[:20]!r}... is {len(value)} characters, too long for a CPU list; write e.g. \"0-3,6\"")
            for part in word.split(","):
                a, _, b = part.partition("-")
                try:
                    lo, hi = int(a), int(b or a)
                except ValueError:
                    raise ValueError(f"{field}: cannot read CPU list {value[:40]!r}; write e.g. \"0-3,6\", \"last\" or \"others\"") from None
                # Never expand a range past the largest CPU number a kernel has.
                if hi > MAX_CPU or len(cpus) + hi - lo > MAX_CPU:
                    raise ValueError(f"{field}: CPU range {part!r} goes past CPU {MAX_CPU}; online CPUs: {online}")
                cpus.extend(range(lo, hi + 1))
    known = set(online)
    for c in cpus:
        if c not in known:
            raise ValueError(f"{field}: CPU {c} does not exist or is offline on the target; online CPUs: {online}")
    if len(set(cpus)) != len(cpus):
        raise ValueError(f"{field}: a CPU is listed twice in {str(value)[:40]}")
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
