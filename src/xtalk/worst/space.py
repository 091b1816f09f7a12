"""The search space of `xtalk worst`, made from the agent's catalog (catalog.py).

Every enemy kind of the catalog joins the space unless it cannot be given values without the
user (`external` needs a command, `aocs` data files) or its purpose is failure propagation,
not timing (those kinds hold resources up to hard limits and a search should not set them off
by chance); a kind the catalog gains later joins with no change here. Each parameter gets its
values from its declared type and bounds:

- the size that sets a kind's footprint (`bytes`, or a count given as `bytes`): multiples of
  the machine's cache sizes (`FOOTPRINTS`), kept within the declared bounds and the memory cap;
- any other size (strides, element sizes): `GRANULES` bytes within the bounds;
- a bounded count (chains, functions): powers of two between its bounds (memory-level
  parallelism, code footprint);
- a duration: its minimum × 1, 10, 100 (within its maximum);
- a choice (access order, protocol): every choice; a flag: both;
- anything else (seeds, strings): its default.

The file-level `intensity` (duty cycle) comes from `INTENSITIES`. A candidate places one or
several enemies on every CPU except the victim's; `homogeneous` candidates put the same enemy
on each of them (the usual worst case on a shared cache or memory bus), the others draw each
CPU's enemies apart.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Optional

from .. import catalog as catalog_mod

#: Footprints as multiples of the machine's caches, smallest first (experiment-file expressions).
FOOTPRINTS = ("l1d/2", "l2/2", "l2", "llc/2", "llc", "2*llc", "4*llc", "8*llc")
#: The seeds' footprint: the smallest of FOOTPRINTS past the LLC. Measured here (docs/worst.md
#: "Seeds at 2 × LLC"): every streaming enemy's rate is at its DRAM plateau from 2 × LLC on, and
#: a larger buffer only lengthens the agent's start-up of the enemy (a run 1.67 s at 8 × LLC
#: against 1.38 s at 2 × LLC); the random candidates still draw every footprint.
SEED_FOOTPRINT = "2*llc"
#: Sizes of access granules (strides, element sizes), bytes.
GRANULES = (8, 64, 128, 4096)
#: Duty cycles in percent of each 1 ms window (EnemySpec.intensity: 0 < x <= 100).
INTENSITIES = (100.0, 50.0)
#: Kinds left out, and why (a kind not named here joins the space): these two, and every
#: enemy of class `fault` in the catalog (failure propagation, not timing).
EXCLUDED = {
    "external": "needs a command: the confirmation compares with stress-ng through it",
    "aocs": "needs AOCS data files",
    **{k.name: f"failure propagation ({k.channel or 'a fault'}), not timing" for k in catalog_mod.current().kinds.values() if k.fault},
}
#: The most enemies one CPU gets in a candidate.
MAX_PER_CPU = 2


def _size_value(text: str, caches: dict[str, int]) -> int:
    from ..units import size_bytes

    return size_bytes(text, "footprint", caches)


@dataclass(frozen=True)
class Axis:
    """One parameter of a kind and the values the search tries (experiment-file values)."""

    key: str
    values: tuple


@dataclass(frozen=True)
class KindSpace:
    """A kind, its axes, and the fixed keys every copy of it gets."""

    kind: str
    axes: tuple[Axis, ...]

    def size(self) -> int:
        n = len(INTENSITIES)
        for a in self.axes:
            n *= len(a.values)
        return n


@dataclass(frozen=True)
class Enemy:
    """One enemy of a candidate: kind, experiment-file parameters, duty cycle."""

    kind: str
    params: tuple[tuple[str, object], ...] = ()
    intensity: float = 100.0

    def table(self) -> dict:
        """Its experiment-file table, without placement."""
        t = {"kind": self.kind, **dict(self.params)}
        if self.intensity < 100.0:
            t["intensity"] = self.intensity
        return t

    def label(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.params)
        duty = f"@{self.intensity:g}%" if self.intensity < 100.0 else ""
        return f"{self.kind}({args}){duty}" if args else f"{self.kind}{duty}"


@dataclass(frozen=True)
class Candidate:
    """Enemies per CPU: `slots[i]` are the enemies on CPU `cpus[i]`."""

    cpus: tuple[int, ...]
    slots: tuple[tuple[Enemy, ...], ...]

    @property
    def key(self) -> str:
        """A stable identity (duplicates are drawn once)."""
        return json.dumps([[c, [e.table() for e in s]] for c, s in zip(self.cpus, self.slots)], sort_keys=True)

    def label(self) -> str:
        """Short words: `read(bytes=4*llc) ×3` when every CPU has the same, else per CPU."""
        if len(set(self.slots)) == 1:
            one = " + ".join(e.label() for e in self.slots[0])
            return f"{one} ×{len(self.cpus)}" if len(self.cpus) > 1 else one
        return "; ".join(f"cpu{c}: " + " + ".join(e.label() for e in s) for c, s in zip(self.cpus, self.slots))

    def tables(self) -> list[dict]:
        """The experiment file's enemies: one table per enemy, pinned; copies of the same
        enemy on several CPUs written once with `per_cpu`."""
        out: list[dict] = []
        if len(set(self.slots)) == 1:
            for e in self.slots[0]:
                out.append({**e.table(), "cpus": list(self.cpus), "per_cpu": True} if len(self.cpus) > 1
                           else {**e.table(), "cpus": list(self.cpus)})
            return out
        for c, s in zip(self.cpus, self.slots):
            out += [{**e.table(), "cpus": [c]} for e in s]
        return out

    def footprint(self, space: "Space") -> int:
        return sum(space.footprint(e) for s in self.slots for e in s)


@dataclass
class Space:
    """What the search may try against a victim on `victim_cpus`."""

    kinds: dict[str, KindSpace]
    cpus: tuple[int, ...]
    caches: dict[str, int]
    memory_cap: int
    cat: catalog_mod.Catalog = field(repr=False, default=None)
    excluded: dict[str, str] = field(default_factory=dict)

    def footprint(self, e: Enemy) -> int:
        """Bytes one enemy allocates (its footprint size; 0 when it has none)."""
        for k, v in e.params:
            if k == "bytes":
                return _size_value(str(v), self.caches)
        return 0  # kinds without a size allocate little (or a fixed few lines)

    def enemy(self, rng: random.Random, kind: Optional[str] = None) -> Enemy:
        """A random enemy (of `kind`, else of a random kind)."""
        ks = self.kinds[kind] if kind else self.kinds[rng.choice(sorted(self.kinds))]
        params = self.within(ks, [(a.key, rng.choice(a.values)) for a in ks.axes])
        return Enemy(ks.kind, params, rng.choice(INTENSITIES))

    def within(self, ks: KindSpace, params: list[tuple[str, object]]) -> tuple[tuple[str, object], ...]:
        """``params`` with each count the catalog bounds by another (`at_most`: chase's
        `chains` by its `elements`) lowered to the largest value of its axis that fits: the
        agent refuses more (a `chase` over l1d/2 in 4 KiB elements has 4 nodes, not room
        for 32 walkers), and one refused enemy would stop the whole search."""
        kind = self.cat.kinds.get(ks.kind) if self.cat is not None else None
        if kind is None:
            return tuple(params)
        given = dict(params)
        for p in kind.params:
            if p.at_most is None or p.file_key not in given:
                continue
            limit = self._count(kind, p.at_most, given)
            if limit is not None and int(given[p.file_key]) > limit:
                axis = next(a for a in ks.axes if a.key == p.file_key)
                fits = [v for v in axis.values if int(v) <= limit]
                given[p.file_key] = fits[-1] if fits else max(1, p.min or 1)
        return tuple(given.items())

    def _count(self, kind: catalog_mod.Kind, name: str, given: dict) -> Optional[int]:
        """The value of count parameter ``name`` these parameters give (a count written as
        `bytes` divided by its element size), or None when unknown."""
        p = kind.param(name)
        if p is None:
            return None
        if p.file_key in given:
            return int(given[p.file_key])
        if p.per_bytes and "bytes" in given:
            from ..config.processes import count_from_bytes

            return count_from_bytes(kind, p, given, self.caches, f"{kind.name}")
        return int(p.default) if isinstance(p.default, int) else None

    def sample(self, rng: random.Random) -> Candidate:
        """One random candidate within the memory cap: half of them homogeneous (the same
        enemy on every CPU), the others drawn per CPU, each CPU one or several enemies."""
        for _ in range(100):
            if rng.random() < 0.5:
                slot = tuple(self.enemy(rng) for _ in range(rng.choice((1, 1, MAX_PER_CPU))))
                c = Candidate(self.cpus, tuple(slot for _ in self.cpus))
            else:
                c = Candidate(self.cpus, tuple(tuple(self.enemy(rng) for _ in range(rng.choice((1, 1, MAX_PER_CPU))))
                                               for _ in self.cpus))
            if c.footprint(self) <= self.memory_cap:
                return c
        return Candidate(self.cpus, tuple((self.enemy(rng, "pi" if "pi" in self.kinds else None),) for _ in self.cpus))

    def draw(self, n: int, seed: int = 0, seeds: list[Candidate] | None = None) -> list[Candidate]:
        """`n` distinct candidates: `seeds` first (e.g. each kind alone at its largest
        footprint), then random ones."""
        rng = random.Random(seed)
        out: dict[str, Candidate] = {}
        for c in seeds or []:
            if len(out) < n and c.footprint(self) <= self.memory_cap:
                out.setdefault(c.key, c)
        tries = 0
        while len(out) < n and tries < 50 * n:
            c = self.sample(rng)
            out.setdefault(c.key, c)
            tries += 1
        return list(out.values())

    def default(self, ks: KindSpace, axis: Axis):
        """The value a fixed axis takes: the catalog's default where the axis holds it (a
        `buslock` splits its locks, as it does by default), else the axis' first value (for
        `buslock` that is `split = false`, the aligned control that locks nothing)."""
        kind = self.cat.kinds.get(ks.kind) if self.cat is not None else None
        p = kind.param(axis.key) if kind is not None else None
        return p.default if p is not None and p.default in axis.values else axis.values[0]

    def singles(self) -> list[Candidate]:
        """Each kind alone, the same on every CPU, at the largest footprint that fits up to
        SEED_FOOTPRINT (its smallest where none does) and the other axes at their default
        (`default`): the catalog's strongest single enemies, the baseline a search must beat,
        at what a sweep run costs."""
        out = []
        for ks in self.kinds.values():
            params = []
            for a in ks.axes:
                v = self.default(ks, a)
                if a.key == "bytes":
                    most = min(_size_value(SEED_FOOTPRINT, self.caches), self.memory_cap // len(self.cpus))
                    fits = [x for x in a.values if _size_value(str(x), self.caches) <= most]
                    v = fits[-1] if fits else a.values[0]
                params.append((a.key, v))
            e = Enemy(ks.kind, self.within(ks, params), 100.0)
            out.append(Candidate(self.cpus, tuple((e,) for _ in self.cpus)))
        return out

    def size(self) -> int:
        """How many single-enemy choices one CPU has (the space is this to the power of the CPUs, and more)."""
        return sum(k.size() for k in self.kinds.values())


def _axis(p: catalog_mod.Param, kind: catalog_mod.Kind, caches: dict[str, int], cap: int,
          arch: Optional[str] = None) -> Optional[Axis]:
    """The values of one parameter, or None to leave it at its default; a choice's values
    are those that exist on ``arch`` (the catalog's `choice_arch`)."""
    footprint_key = p.name == "bytes" or (p.per_bytes is not None)
    if p.type == "u64" and footprint_key and caches:
        key = "bytes"
        values = []
        for expr in FOOTPRINTS:
            try:
                n = _size_value(expr, caches)
            except ValueError:
                continue
            if p.per_bytes is None and ((p.min is not None and n < p.min) or (p.max is not None and n > p.max)):
                continue
            if n > cap:
                continue
            values.append(expr)
        return Axis(key, tuple(values)) if values else None
    if p.type == "u64" and p.unit == "bytes":
        # The size of one element of a footprint count (element_bytes, stride_bytes), or
        # of a message: its granule.
        vals = [g for g in GRANULES if (p.min is None or g >= p.min) and (p.max is None or g <= p.max)
                and (not p.multiple_of or g % p.multiple_of == 0)]
        return Axis(p.file_key, tuple(vals)) if len(vals) > 1 else None
    if p.type == "u64" and p.unit == "ns" and p.min is not None:
        vals = [p.min * f for f in (1, 10, 100) if p.max is None or p.min * f <= p.max]
        return Axis(p.file_key, tuple(f"{v // 1000}us" if v % 1000 == 0 else f"{v}ns" for v in vals))
    if p.type == "u64" and p.min is not None and p.max is not None and not p.unit:
        vals, v = [], max(1, p.min)
        while v <= p.max:
            vals.append(v)
            v *= 2
        if vals and vals[-1] != p.max and p.max <= 1 << 20:
            vals.append(p.max)
        return Axis(p.file_key, tuple(vals)) if len(vals) > 1 else None
    if p.type == "choice" and p.choices:
        here = p.choices_on(arch)
        return Axis(p.file_key, tuple(here)) if here else None
    if p.type == "bool":
        return Axis(p.file_key, (False, True))
    return None


def _searchable(kind: catalog_mod.Kind, caches: dict[str, int]) -> Optional[str]:
    """Why `kind` cannot join the space, or None."""
    if kind.name in EXCLUDED:
        return EXCLUDED[kind.name]
    for p in kind.params:
        if p.required and p.default is None and p.file_default is None:
            if p.type in ("str", "strings"):
                return f"needs '{p.file_key}' ({p.doc})"
            if p.type == "u64" and (p.name == "bytes" or p.per_bytes) and not caches:
                return "needs a size and the machine's caches are unknown"
    return None


def build(cat: catalog_mod.Catalog, caches: dict[str, int], enemy_cpus: list[int], memory_cap: int,
          kinds: Optional[list[str]] = None, arch: Optional[str] = None) -> Space:
    """The space for enemies on `enemy_cpus` of a machine with `caches` ("l1d", "l2", "llc"
    -> bytes), no candidate allocating more than `memory_cap` bytes in all. `kinds` narrows
    the catalog's kinds (UsageError-worthy names are the caller's to check). `arch` (the
    machine's `uname -m`): choices that exist elsewhere only (`stnp` off Arm) are not drawn."""
    per_enemy_cap = max(4096, memory_cap // max(1, len(enemy_cpus)))
    out: dict[str, KindSpace] = {}
    excluded: dict[str, str] = {}
    for k in cat.kinds.values():
        if kinds is not None and k.name not in kinds:
            continue
        why = _searchable(k, caches)
        if why:
            excluded[k.name] = why
            continue
        axes = []
        missing = False
        for p in k.params:
            a = _axis(p, k, caches, per_enemy_cap, arch)
            if a is None:
                if p.required and p.default is None and p.file_default is None:
                    missing = True
                continue
            if a.key in {x.key for x in axes}:
                continue
            axes.append(a)
        if missing:
            excluded[k.name] = "a required parameter has no value the search can choose"
            continue
        out[k.name] = KindSpace(k.name, tuple(axes))
    return Space(out, tuple(enemy_cpus), dict(caches), memory_cap, cat, excluded)
