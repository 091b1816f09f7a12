"""Which channels `xtalk worst` exercised, and which it never reached and why.

A channel is the machine resource an enemy kind loads, as the catalog declares it (each
kind's `channel`, from the agent); a kind that declares none is its own channel, named
`(kind)`, so it is never silently merged or dropped. Every candidate the search tried is
classified by the channels of its enemies. For each channel of the catalog the result says:

- `exercised`: candidates loading it were measured; the best score of one (pooled over the
  rounds it survived: one short round's score for most, so noisy), and of one loading that
  channel alone (a candidate loading several is credited to each: the
  scores do not separate channels), and whether any slowed the victim by more than the
  stopping rule's margin (`effect`: "slows" or "none measured");
- `refused`: every candidate with it was tried and failed to run (the agent refused it, or
  the kernel stopped it: see rounds/);
- `not reached`: its kinds were in the space, but no candidate with them was tried before the
  search stopped;
- `not searched`: its kinds are outside the space (space.EXCLUDED's reason) or `--kind`
  left them out.

With the confirmation's runs, the finalists' achieved rates (and their share of the
channel's peak where `xtalk characterize --peaks` measured it) are attached to their
channels.
"""

from __future__ import annotations

import math
from typing import Optional

from .. import catalog as catalog_mod
from .space import Candidate, Space


def channel_of(cat: catalog_mod.Catalog, kind: str) -> str:
    """The catalog's channel of `kind`, else `(kind)`."""
    k = cat.kinds.get(kind)
    return (k.channel if k is not None and k.channel else None) or f"({kind})"


def loads(cat: catalog_mod.Catalog, c: Candidate) -> set[str]:
    """The channels a candidate's enemies load."""
    return {channel_of(cat, e.kind) for s in c.slots for e in s}


def coverage(cat: catalog_mod.Catalog, sp: Space, requested: Optional[list[str]], tried: list[tuple[Candidate, Optional[float]]],
             margin: float, rates: Optional[dict[str, list[str]]] = None, refused: Optional[dict[str, str]] = None) -> dict:
    """Per channel of the catalog: its kinds, its status and why, and for an exercised one the
    candidates, best scores and effect. `tried`: each candidate tried and its score (None
    when its runs failed). `rates`: channel -> the finalists' measured rates (text).
    `refused`: candidate label -> the agent's refusal (a few are quoted per channel)."""
    kinds_of: dict[str, list[str]] = {}
    for name in sorted(cat.kinds):
        kinds_of.setdefault(channel_of(cat, name), []).append(name)
    out: dict[str, dict] = {}
    for ch, kinds in sorted(kinds_of.items()):
        searched = [k for k in kinds if k in sp.kinds]
        entry: dict = {"kinds": kinds}
        if not searched:
            entry["status"] = "not searched"
            entry["why"] = "; ".join(f"{k}: {_why_not(k, sp, requested)}" for k in kinds)
            out[ch] = entry
            continue
        with_it = [(c, s) for c, s in tried if ch in loads(cat, c)]
        measured = [(c, s) for c, s in with_it if s is not None and math.isfinite(s)]
        entry["searched_kinds"] = searched
        entry["candidates"] = len(with_it)
        if not with_it:
            entry["status"], entry["why"] = "not reached", "no candidate with it was tried before the search stopped"
        elif not measured:
            entry["status"], entry["why"] = "refused", "every candidate with it failed to run (see rounds/)"
        else:
            best_c, best = max(measured, key=lambda x: x[1])
            alone = [s for c, s in measured if loads(cat, c) == {ch}]
            entry.update({
                "status": "exercised", "measured": len(measured), "best_score": round(best, 4), "best": best_c.label(),
                "best_alone": round(max(alone), 4) if alone else None,
                "effect": "slows" if max(alone or [best]) > 1.0 + margin else "none measured",
            })
            if len(measured) < len(with_it):
                entry["failed"] = len(with_it) - len(measured)
        said = [f"{c.label()}: {(refused or {})[c.label()]}" for c, _ in with_it if c.label() in (refused or {})]
        if said:
            entry["refused_by_agent"] = said[:3] + ([f"... and {len(said) - 3} more"] if len(said) > 3 else [])
            if entry["status"] == "refused":
                entry["why"] = "the agent refused every candidate with it: " + said[0]
        if rates and rates.get(ch):
            entry["finalist_rates"] = rates[ch]
        out[ch] = entry
    return {
        "channels": out,
        "exercised": [ch for ch, e in out.items() if e["status"] == "exercised"],
        "not_reached": {ch: f"{e['status']}: {e['why']}" for ch, e in out.items() if e["status"] != "exercised"},
        "note": "a candidate loading several channels is credited to each; `best_alone` is of candidates loading "
                "that channel only. Slowdowns the catalog's channels do not explain: `residual`",
    }


def _why_not(kind: str, sp: Space, requested: Optional[list[str]]) -> str:
    """Why `kind` is outside the space: the space's reason, else --kind."""
    from .space import EXCLUDED

    return sp.excluded.get(kind) or EXCLUDED.get(kind) or ("left out by --kind" if requested else "not in the space")


def text(cov: dict) -> list[str]:
    """Lines for the printout: the channels exercised with their best score, those with no
    measured effect, those not reached and why."""
    ch = cov["channels"]
    slows = [f"{c} {e['best_score']:.2f}×" + (f" (alone {e['best_alone']:.2f}×)" if e.get("best_alone") else "")
             for c, e in ch.items() if e["status"] == "exercised" and e["effect"] == "slows"]
    none = [c for c, e in ch.items() if e["status"] == "exercised" and e["effect"] != "slows"]
    lines = [f"channels exercised ({len(cov['exercised'])} of {len(ch)}): " + (", ".join(slows) or "none slowed the victim")]
    if none:
        lines.append("  exercised, no effect beyond the margin: " + ", ".join(none))
    for status in ("refused", "not reached", "not searched"):
        names = [c for c, e in ch.items() if e["status"] == status]
        if names:
            lines.append(f"  {status}: " + "; ".join(f"{c} ({ch[c]['why']})" if status != "not searched" else c for c in names))
    rates = [f"{c}: {'; '.join(e['finalist_rates'])}" for c, e in ch.items() if e.get("finalist_rates")]
    if rates:
        lines.append("  finalists' measured rates: " + " | ".join(rates))
    return lines
