"""The residual of `xtalk worst`: how much of the worst finalist's slowdown its channels do
not explain.

A finalist that loads several of the catalog's channels is split into its parts, one per
channel (its enemies of that channel only, on the same CPUs), and the parts run alone in the
confirmation's experiment, interleaved with the finalist and solo. The additive model says
the finalist should slow the victim by what its parts add up to:

    explained = 1 + Σ_c (S_c − 1)            S_c: part c's slowdown against solo

and the residual is `S − explained`, in the same unit as a slowdown (× solo), with a 95 %
bootstrap CI over the runs (runs, then jobs within each, resampled per scenario; the same
solo replicate in every ratio, as they share it). A residual above zero (its CI above 0):
the finalist does more than its channels do apart — an interaction, or a channel the catalog
does not name; below zero: less (its parts compete: for the enemy CPUs' time, for one
bottleneck); a CI around 0: explained by its channels within the noise. A finalist loading
one channel has nothing to separate, and the result says so rather than printing a zero
that holds by construction.

Pure: samples in, numbers out (the driver runs the parts).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import catalog as catalog_mod
from ..analysis.stats import _resample_runs, statistic_value
from .coverage import channel_of
from .space import Candidate

#: A finalist is split into at most this many channel parts (each one more scenario of the
#: confirmation); one loading more is said, not split.
MAX_PARTS = 3
#: The prefix of a part's scenario in the confirmation.
PART = "part-"
MODEL = "additive: explained = 1 + Σ over its channels of (the channel part's slowdown alone − 1)"


def parts(cat: catalog_mod.Catalog, c: Candidate) -> dict[str, Candidate]:
    """The candidate's enemies grouped by the channel each loads: channel -> a candidate
    with only those enemies, on the CPUs that hold any. Empty when it loads one channel."""
    chans = sorted({channel_of(cat, e.kind) for s in c.slots for e in s})
    if len(chans) < 2:
        return {}
    out = {}
    for ch in chans:
        kept = [(cpu, tuple(e for e in s if channel_of(cat, e.kind) == ch)) for cpu, s in zip(c.cpus, c.slots)]
        kept = [(cpu, s) for cpu, s in kept if s]
        out[ch] = Candidate(tuple(cpu for cpu, _ in kept), tuple(s for _, s in kept))
    return out


def part_name(channel: str) -> str:
    """The confirmation scenario of a channel part (letters, digits, - only)."""
    return PART + "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in channel).strip("-")


def residual(samples: dict[str, list[np.ndarray]], solo: list[np.ndarray], finalist: str, part_scen: dict[str, str],
             stat: str, n_boot: int = 2000, seed: int = 0) -> Optional[dict]:
    """The finalist's slowdown, its parts' and the additive model's, and the residual with a
    95 % CI. `samples`: scenario -> per-run job times; `part_scen`: channel -> the part's
    scenario. None when a side has no runs."""
    names = [finalist, *part_scen.values()]
    if not solo or any(not samples.get(n) for n in names):
        return None
    rng = np.random.default_rng(seed)
    point_solo = statistic_value(np.concatenate(solo), stat)
    boot_solo = _resample_runs(list(solo), stat, n_boot, rng)
    point = {n: statistic_value(np.concatenate(samples[n]), stat) / point_solo for n in names}
    boot = {n: _resample_runs(list(samples[n]), stat, n_boot, rng) / boot_solo for n in names}
    explained = 1.0 + sum(point[s] - 1.0 for s in part_scen.values())
    boot_explained = 1.0 + sum(boot[s] - 1.0 for s in part_scen.values())
    res = point[finalist] - explained
    boot_res = boot[finalist] - boot_explained

    def ci(est: float, draws: np.ndarray) -> dict:
        lo, hi = np.nanpercentile(draws, [2.5, 97.5])
        return {"estimate": round(est, 4), "low": round(float(lo), 4), "high": round(float(hi), 4), "level": 0.95}

    out = {
        "model": MODEL,
        "finalist": finalist,
        "slowdown": ci(point[finalist], boot[finalist]),
        "parts": {ch: {"scenario": s, "slowdown": ci(point[s], boot[s])} for ch, s in part_scen.items()},
        "explained": ci(explained, boot_explained),
        "residual": ci(res, boot_res),
    }
    r = out["residual"]
    out["reading"] = ("more than its channels add up to: an interaction, or a channel the catalog does not name"
                      if r["low"] > 0 else
                      "less than its channels add up to: its parts compete (for the enemy CPUs' time, for one bottleneck)"
                      if r["high"] < 0 else "explained by its channels' effects added, within the CI")
    return out


def text(doc: Optional[dict]) -> str:
    """One line for the printout."""
    if not doc:
        return "unknown channels: not assessed"
    if "residual" not in doc:
        return f"unknown channels: {doc['why']}"
    r, e = doc["residual"], doc["explained"]
    parts_text = ", ".join(f"{ch} {p['slowdown']['estimate']:.2f}×" for ch, p in doc["parts"].items())
    return (f"unknown channels: {doc['finalist']} {doc['slowdown']['estimate']:.2f}× against {e['estimate']:.2f}× "
            f"[{e['low']:.2f}, {e['high']:.2f}] from its channels alone ({parts_text}, added): residual "
            f"{r['estimate']:+.2f}× [{r['low']:+.2f}, {r['high']:+.2f}]: {doc['reading']}")


def not_split(finalist: str, why: str) -> dict:
    """The result when the finalist is not split (one channel, too many, no time)."""
    return {"model": MODEL, "finalist": finalist, "why": why}

