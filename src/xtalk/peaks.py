"""The platform's channel peaks, and each enemy's achieved rate set against them.

A one-time characterisation (`xtalk characterize --peaks`, measured by peaks_measure.py
with the enemies themselves) gives each memory channel its peak: read, write and copy
bandwidth with one copy per CPU and with one CPU alone, the L1D / L2 / LLC enemies' line
rates, and the dependent-load latency of a chase over L1D-, L2-, LLC- and DRAM-sized
footprints. It is saved once per machine as JSON in the peaks directory
(`$XTALK_PEAKS_DIR`, else `$XDG_CACHE_HOME/xtalk/peaks`, else `~/.cache/xtalk/peaks`),
named by the machine's identity from its facts, with its schema and version inside.

This module is pure: it reads and writes that file and computes with it. Which channel an
enemy loads is the catalog's (`channel`, declared by each kind in the agent), so a new
enemy kind needs no code here. An enemy's rate is set against the peak with as many copies
as it runs with: one copy against one CPU's peak, several against the all-CPU peak (their
sum); a chase against the one-chain rate of the level its footprint falls in. The same rule
turns `load = "50%"` into the agent's `rate` (closed loop: the agent paces to it), so the
percentage a run reports is the one it was asked for.

Hardware counters: where the enemy's outcome carries a per-enemy counter group
(`counters`: event → count over its run) and the machine has a core PMU, `signature` gives
misses per level and bus accesses per unit of work and the share of misses that fall on
channels other than its own; without a PMU it says so once (`NO_PMU`), never zeros.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import safepath
from . import catalog
from .errors import UsageError

#: What the file says it is, and the layout this host reads and writes.
SCHEMA = "xtalk-peaks"
VERSION = 1
ENV_DIR = "XTALK_PEAKS_DIR"
#: The command that measures (and with --remeasure, re-measures) the peaks.
COMMAND = "xtalk characterize --peaks"
#: Said once where counters would be, when the machine has no core PMU.
NO_PMU = "no hardware PMU: counter signature not measured"
#: The latency levels, smallest first, and the channel a chase enemy loads.
LEVELS = ("l1d", "l2", "llc", "dram")
LATENCY = "latency"
#: The memory bandwidth channels, whose peaks are measured over 4 × LLC.
MEMORY = ("read", "write", "copy")
#: An enemy's `load`: a percentage of its channel's peak, "50%" or "50% of peak" (the
#: experiment schema checks the same pattern).
LOAD_PATTERN = r"^\s*([0-9]+(?:\.[0-9]*)?)\s*%(?:\s*of\s+(?:the\s+)?peak)?\s*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ChannelPeak(_Strict):
    """A channel's peak rate in the unit of the enemy that measured it (per second)."""

    kind: str = Field(description="the enemy kind that measured it")
    unit: str
    one: float = Field(gt=0, description="one copy on one CPU, the others idle")
    all: Optional[float] = Field(default=None, gt=0, description="one copy per CPU, summed")
    copies: int = Field(ge=1, description="copies of the all-CPU measurement")


class LevelLatency(_Strict):
    """A dependent-load chase (one chain, random order, 64-byte nodes) over one footprint."""

    bytes: int = Field(gt=0)
    rate: float = Field(gt=0, description="accesses per second, one CPU")

    @property
    def ns(self) -> float:
        """Nanoseconds per dependent access."""
        return 1e9 / self.rate


class Peaks(_Strict):
    """The file: one machine's measured peaks."""

    schema_name: str = Field(default=SCHEMA, alias="schema")
    version: int = VERSION
    machine: dict = Field(description="the identity fields the file is named after")
    measured: str = Field(description="UTC time of the measurement")
    pass_ms: float = Field(gt=0, description="length of each measuring pass")
    runs: Optional[str] = Field(default=None, description="where the measuring runs were stored")
    channels: dict[str, ChannelPeak]
    latency: dict[str, LevelLatency]

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)


# ---------------------------------------------------------------- identity and the file


def identity(env: dict) -> dict:
    """What names a machine for its peaks: processor, CPUs, caches, memory, architecture
    (from the agent's facts). A new kernel keeps the peaks; other hardware does not."""
    cpu = env.get("cpu", {})
    return {
        "model": cpu.get("model"),
        "vendor": cpu.get("vendor"),
        "online": cpu.get("online"),
        "count": cpu.get("count"),
        "caches": [[c.get("level"), c.get("type"), c.get("size_bytes")] for c in cpu.get("caches") or []],
        "memory_bytes": env.get("memory_bytes"),
        "arch": (env.get("kernel") or {}).get("machine"),
    }


def machine_key(env: dict) -> str:
    """The file name's stem: a readable slug of the model and a digest of the identity."""
    ident = identity(env)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9]+", "-", str(ident["model"] or "machine").lower()).strip("-")[:40] or "machine"
    return f"{slug}-{digest}"


def peaks_dir() -> Path:
    """Where peak files live ($XTALK_PEAKS_DIR, else the user's cache directory)."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "xtalk" / "peaks"


def path_for(env: dict, directory: Optional[Path] = None) -> Path:
    """The peak file of the machine these facts describe."""
    return Path(directory or peaks_dir()) / f"{machine_key(env)}.json"


def save(peaks: Peaks, env: dict, directory: Optional[Path] = None) -> Path:
    """Write the file (beside, then renamed into place: a reader never sees half of it)."""
    path = path_for(env, directory)
    safepath.write_text(path, json.dumps(peaks.model_dump(by_alias=True), indent=2) + "\n", parents=True)
    return path


def load(env: dict, directory: Optional[Path] = None) -> Optional[Peaks]:
    """This machine's saved peaks, or None when none were measured. A file of another
    schema or version, or one that does not parse, is an input error naming the fix."""
    path = path_for(env, directory)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a peak file ({e}); re-measure with `{COMMAND} --remeasure`") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("version") != VERSION:
        got = f"{doc.get('schema')!r} version {doc.get('version')!r}" if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f"{path}: peak file of {got}; this xtalk reads {SCHEMA!r} version {VERSION}: "
                         f"re-measure with `{COMMAND} --remeasure`")
    try:
        return Peaks.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"{path}: {where}: {first['msg']}; re-measure with `{COMMAND} --remeasure`") from None


def new(env: dict, channels: dict[str, ChannelPeak], latency: dict[str, LevelLatency], pass_ms: float,
        runs: Optional[str] = None) -> Peaks:
    """A Peaks document for this machine, stamped now."""
    return Peaks(machine=identity(env), measured=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 pass_ms=pass_ms, runs=runs, channels=channels, latency=latency)


# ---------------------------------------------------------------- enemies against peaks


def channel_of(kind: str) -> Optional[str]:
    """The channel an enemy kind loads, as the agent's catalog declares it (None: none)."""
    try:
        return catalog.kind(kind).channel or None
    except KeyError:
        return None


def caches_of(env: dict) -> dict[str, int]:
    """L1D, L2 and LLC sizes from a facts document (the run's recorded environment)."""
    from .targets.agent import _caches

    try:
        return _caches(env)
    except (KeyError, TypeError):
        return {}


def level_of(footprint: int, caches: dict[str, int]) -> str:
    """The smallest level a footprint fits in (half the cache, as the chase peaks are
    measured), else DRAM."""
    for level in ("l1d", "l2", "llc"):
        if level in caches and footprint <= caches[level] // 2:
            return level
    return "dram"


class Share(BaseModel):
    """An achieved rate against its channel's peak."""

    channel: str
    percent: float
    peak: float
    unit: str
    basis: str  # "one CPU", "all CPUs (N copies)", "L2 chase"

    def text(self) -> str:
        return f"{self.percent:.0f} % of the {self.channel} peak, {self.basis}"


#: Kinds that a parameter takes off their channel: kind -> (parameter, the value that does).
#: An aligned `buslock` (split = false, the control) makes cache locks, not bus locks: set
#: against the split-lock peak it would read thousands of percent.
OFF_CHANNEL = {"buslock": ("split", False)}


def on_channel(kind: str, params: Optional[dict]) -> bool:
    """False when `params` (the enemy's load: its kind's parameters) take it off its channel."""
    off = OFF_CHANNEL.get(kind)
    return not (off and params is not None and params.get(off[0]) == off[1])


def share(kind: str, rate: float, peaks: Optional[Peaks], unit: str, copies: int = 1,
          footprint: Optional[int] = None, caches: Optional[dict[str, int]] = None,
          params: Optional[dict] = None) -> Optional[Share]:
    """`rate` (per copy, in `unit` per second) of `copies` copies of a `kind` enemy as a
    percentage of its channel's peak: one copy against one CPU's peak, several (their sum)
    against the all-CPU peak, a chase against the one-chain rate at its footprint's level.
    None when the kind names no channel, the channel has no measured peak, or the units
    differ (a `loads` enemy counts loads, the read peak bytes), or its `params` take it off
    its channel (OFF_CHANNEL), or a memory-bandwidth enemy's footprint stays in a cache."""
    if peaks is None or rate is None or not (rate >= 0) or copies < 1 or not on_channel(kind, params):
        return None
    ch = channel_of(kind)
    if ch == LATENCY:
        if footprint is None or caches is None:
            return None
        level = level_of(footprint, caches)
        lat = peaks.latency.get(level)
        if lat is None or unit != "accesses":
            return None
        return Share(channel=ch, percent=100.0 * rate / lat.rate, peak=lat.rate, unit=unit,
                     basis=f"one-chain {level.upper() if level != 'dram' else 'DRAM'} chase, {lat.ns:.1f} ns")
    peak = peaks.channels.get(ch) if ch else None
    if peak is None or peak.unit != unit:
        return None
    if ch in MEMORY and footprint is not None and caches and level_of(footprint, caches) != "dram":
        # The bandwidth peaks are of buffers four times the LLC: a footprint that stays in a
        # cache loads that cache, not memory (a read over half of L1D read 389 % of it).
        return None
    if copies == 1 or peak.all is None:
        return Share(channel=ch, percent=100.0 * rate * copies / peak.one, peak=peak.one, unit=unit,
                     basis="one CPU" if copies == 1 else f"{copies} copies against one CPU's peak")
    return Share(channel=ch, percent=100.0 * rate * copies / peak.all, peak=peak.all, unit=unit,
                 basis=f"{copies} copies against all {peak.copies} CPUs")


def load_problem(text) -> Optional[str]:
    """Why `text` is not a load (a percentage of the channel's peak), or None when it is."""
    m = re.match(LOAD_PATTERN, str(text))
    if m and 0 < float(m.group(1)) <= 100:
        return None
    return (f"{text!r} is not a load; give a percentage of the channel's peak, above 0 and at most 100, "
            f"e.g. \"50%\" or \"50% of peak\"")


def parse_load(text, field: str) -> float:
    """`load = "50%"` (or `"50% of peak"`) as a fraction (0, 1]; an input error naming the
    field otherwise."""
    why = load_problem(text)
    if why:
        raise UsageError(f"{field}: {why}")
    return float(re.match(LOAD_PATTERN, str(text)).group(1)) / 100.0


def rate_for_load(kind: str, load_text, field: str, env: dict, copies: int = 1, footprint: Optional[int] = None,
                  caches: Optional[dict[str, int]] = None, directory: Optional[Path] = None) -> float:
    """The per-copy `rate` that holds `load` (a percentage of the channel's measured peak)
    with `copies` copies, from this machine's saved peaks: the inverse of `share`. Refused
    with one line when no peak is saved or the kind's channel has none."""
    fraction = parse_load(load_text, field)
    peaks = load(env, directory)
    if peaks is None:
        raise UsageError(f"{field}: no peaks saved for this machine ({machine_key(env)}); run `{COMMAND}` first")
    unit = catalog.kind(kind).unit
    probe = share(kind, 1.0, peaks, unit, copies, footprint, caches)
    if probe is None:
        ch = channel_of(kind)
        measured = sorted(peaks.channels) + ([LATENCY] if peaks.latency else [])
        why = f"enemy '{kind}' names no channel" if ch is None else f"channel '{ch}' of enemy '{kind}' has no peak in its unit ({unit})"
        if ch in MEMORY and footprint is not None and caches and level_of(footprint, caches) != "dram" and ch in peaks.channels:
            why = (f"a {footprint}-byte {kind} stays in the {level_of(footprint, caches).upper()}, and the {ch} peak is of memory "
                   f"(4 × LLC); give a footprint above half the LLC")
        raise UsageError(f"{field}: {why}; `load` works for the channels with a measured peak ({', '.join(measured) or 'none'}); "
                         f"give `rate` instead")
    # share(rate=1) is the percentage one unit per second per copy makes: invert it.
    return fraction * 100.0 / probe.percent


# ---------------------------------------------------------------- hardware counters

#: perf event names (observe/perf.rs) → the level their misses load.
MISS_EVENTS = {
    "L1-dcache-load-misses": "l1d",
    "L1-dcache-store-misses": "l1d",
    "l2-misses": "l2",  # a PMU alias (sysfs) where the core publishes one
    "LLC-load-misses": "llc",
    "LLC-store-misses": "llc",
    "cache-misses": "llc",
}
BUS_EVENTS = ("bus-cycles", "bus-access", "mem_access")
#: Which level's misses a memory channel is expected to make (the rest is leakage).
OWN_LEVEL = {"read": "llc", "write": "llc", "copy": "llc", "l1d": "l1d", "l2": "l2", "llc": "llc"}


def has_pmu(env: dict) -> bool:
    """The machine has a core PMU (hardware events), as the agent's facts say."""
    return bool(((env.get("capabilities") or {}).get("pmu") or {}).get("core_pmu"))


def signature(enemy: dict, env: dict) -> Optional[dict]:
    """An enemy's counter signature from its outcome record (run.json's `enemies[i]`, with
    its per-enemy `counters`: {event: count} over its run): misses per level and bus
    accesses per 1000 units of its work, and the share of its misses outside its own
    channel's level (leakage). None without a PMU or without counters: the caller says
    `NO_PMU` once, never zeros."""
    counters = enemy.get("counters")
    if not has_pmu(env) or not isinstance(counters, dict) or not counters:
        return None
    ops = enemy.get("window_ops") or enemy.get("ops")
    if not ops:
        return None
    misses: dict[str, float] = {}
    for event, level in MISS_EVENTS.items():
        if event in counters and level not in misses:
            misses[level] = float(counters[event])
        elif event in counters:
            misses[level] = max(misses[level], float(counters[event]))
    bus = next((float(counters[e]) for e in BUS_EVENTS if e in counters), None)
    out = {"enemy": enemy.get("name"), "kind": enemy.get("kind"), "unit": enemy.get("unit"),
           "per_1000": {lvl: 1000.0 * n / ops for lvl, n in misses.items()}}
    if bus is not None:
        out["bus_per_1000"] = 1000.0 * bus / ops
    own = OWN_LEVEL.get(channel_of(enemy.get("kind", "")) or "")
    total = sum(misses.values())
    if own in misses and total > 0:
        out["own_level"] = own
        out["leakage"] = {lvl: n / total for lvl, n in misses.items() if lvl != own}
    return out


def signature_text(sig: Optional[dict], env: dict) -> str:
    """One line: the signature, or why there is none."""
    if sig is None:
        return NO_PMU if not has_pmu(env) else "no per-enemy counters recorded: counter signature not measured"
    parts = [f"{lvl.upper()} misses {v:.1f}" for lvl, v in sig["per_1000"].items()]
    if "bus_per_1000" in sig:
        parts.append(f"bus accesses {sig['bus_per_1000']:.1f}")
    line = f"{sig['enemy']}: per 1000 {sig['unit']}: " + ", ".join(parts)
    if sig.get("leakage"):
        line += "; outside its own level (" + sig["own_level"].upper() + "): " + ", ".join(
            f"{lvl.upper()} {v:.0%}" for lvl, v in sig["leakage"].items())
    return line


def peaks_text(peaks: Peaks, path: Optional[Path] = None) -> list[str]:
    """The peaks in a few lines (what `--peaks` prints)."""
    from .units import rate_text

    lines = [f"peaks measured {peaks.measured} ({peaks.pass_ms:.0f} ms passes)" + (f", saved in {path}" if path else "")]
    for ch, p in peaks.channels.items():
        all_ = f", {rate_text(p.all, p.unit)} with {p.copies} copies" if p.all else ""
        lines.append(f"  {ch:<8} {rate_text(p.one, p.unit)} one CPU{all_} ({p.kind})")
    for level, lat in peaks.latency.items():
        lines.append(f"  latency {level.upper() if level != 'dram' else 'DRAM':<5} {lat.ns:7.1f} ns per dependent load "
                     f"({lat.bytes // 1024} KiB chase)")
    return lines
