"""Compiled form of a :class:`Platform` shared by the explorer and the brute-force enumerator.

Time is logical, as in seed 000 §4.3.3 ("only a logical abstraction of time"): segment
durations only decide which segments overlap. The period is cut into *epochs* at every
segment boundary of every task; during an epoch each task is in one segment (or idle),
and a request of a segment may be issued in any epoch the segment spans. Epoch
boundaries are synchronisation points like the seed's scheduler automaton (Fig. 4.10):
all requests issued in an epoch complete before the next epoch starts.

Request path (seed 000 §4.2): core → (at most one) transport → storages in order; a hit in
a storage ends the path, a miss continues to the next one. The transport is held from
grant until the request completes (seed 000 §4.3.3: ``end_req`` releases it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xtalk.model import storage as st
from xtalk.model.platform import CacheStorage, DramBank, Platform

__all__ = ["Compiled", "compile_platform", "mapping_get", "mapping_set", "access_chain", "TAG_BASE"]

#: Tags are relabelled as owner·TAG_BASE + local index when one task owns them (only tag
#: equality matters to caches and row buffers), and as negative numbers when shared. A
#: task permutation then maps states to symmetric states by renaming owners.
TAG_BASE = 1 << 20

Mapping = tuple  # sorted tuple of (key, value) pairs: hashable sparse dict


def mapping_get(m: Mapping, key: int):
    """Value stored under ``key`` in a sparse mapping (``None`` when absent)."""
    for k, v in m:
        if k == key:
            return v
    return None


def mapping_set(m: Mapping, key: int, value) -> Mapping:
    """A new sparse mapping with ``key`` set to ``value`` (kept sorted for hashing)."""
    items = [(k, v) for k, v in m if k != key]
    items.append((key, value))
    items.sort(key=lambda kv: kv[0])
    return tuple(items)


@dataclass
class Compiled:
    """Everything the exploration needs, indexed by small integers."""

    platform: Platform
    task_names: list[str]
    comp_names: list[str]
    storages: list[CacheStorage | DramBank]
    n_transports: int
    transport_of: list[int]  # transport index per task, -1 when the path has none
    epoch_bounds: list[float]
    epoch_seg: list[list[int]]  # [task][epoch] -> global segment index or -1
    mu: list[list[int]]  # [task][global segment] -> max requests
    chains: list[list[list[tuple[tuple[int, int, int], ...]]]]  # [task][gseg][k] -> ((storage, key, tag), ...)
    n_gseg: int
    init_actual: tuple
    init_private: tuple
    segment_names: list[list[str]] = field(default_factory=list)
    sym_classes: list[list[int]] = field(default_factory=list)

    @property
    def n_tasks(self) -> int:
        """Number of tasks."""
        return len(self.task_names)

    @property
    def n_epochs(self) -> int:
        """Number of epochs of the unrolled schedule."""
        return len(self.epoch_bounds) - 1

    @property
    def n_counters(self) -> int:
        """Size of the flat counter vector (tasks × components × segments)."""
        return self.n_tasks * len(self.comp_names) * self.n_gseg

    def counter(self, task: int, comp: int, gseg: int) -> int:
        """Flat index of the counter nb_interferences_comp[gseg, task]."""
        return (task * len(self.comp_names) + comp) * self.n_gseg + gseg

    def counter_key(self, idx: int) -> tuple[str, str, int]:
        """(task name, component name, segment index) of a flat counter index."""
        gseg = idx % self.n_gseg
        rest = idx // self.n_gseg
        comp = rest % len(self.comp_names)
        task = rest // len(self.comp_names)
        return self.task_names[task], self.comp_names[comp], gseg


def access_chain(
    comp: Compiled, actual: tuple, private: tuple, task: int, chain
) -> tuple[tuple, tuple, list[int]]:
    """Perform one request's storage accesses (seed 000 §4.4).

    Returns the new actual state, the new private states and the component indices
    (into ``comp.comp_names``) where the access suffered a delayed interference. The
    private view of a task is updated by the task's own accesses that reach the component.
    """
    actual_l = list(actual)
    mine = list(private[task])
    hits: list[int] = []
    for s, key, tag in chain:
        c = comp.storages[s]
        a = mapping_get(actual_l[s], key)
        p = mapping_get(mine[s], key)
        if st.is_interference(c, a, p, tag):
            hits.append(comp.n_transports + s)
        hit = st.lookup(c, a, tag)
        actual_l[s] = mapping_set(actual_l[s], key, st.update(c, a, tag))
        mine[s] = mapping_set(mine[s], key, st.update(c, p, tag))
        if hit:
            break
    priv = list(private)
    priv[task] = tuple(mine)
    return tuple(actual_l), tuple(priv), hits


def _default_stride(storages: list[CacheStorage | DramBank]) -> int:
    # A stride that maps every task's line to set 0 of every cache with a distinct tag and
    # to a distinct DRAM row: the adversarial "all tasks conflict" default.
    stride = 1
    for c in storages:
        span = c.sets * c.line_bytes if isinstance(c, CacheStorage) else c.row_bytes * c.banks
        stride = math.lcm(stride, span)
    return stride


def compile_platform(p: Platform) -> Compiled:
    """Unroll the schedule into epochs and precompute each request's storage chain."""
    storages = list(p.storage)
    sidx = {s.name: i for i, s in enumerate(storages)}
    tidx = {t.name: i for i, t in enumerate(p.transport)}
    period = p.schedule.period
    stride = _default_stride(storages)

    bounds = {0.0}
    for k in range(p.schedule.periods):
        bounds.add((k + 1) * period)
        for t in p.task:
            acc = 0.0
            for s in t.segment:
                acc += s.duration
                bounds.add(k * period + acc)
    epoch_bounds = sorted(round(b, 9) for b in bounds)
    epoch_bounds = [b for i, b in enumerate(epoch_bounds) if i == 0 or b > epoch_bounds[i - 1]]

    epoch_seg: list[list[int]] = []
    mu: list[list[int]] = []
    chains: list[list[list[tuple]]] = []
    transport_of: list[int] = []
    seg_names: list[list[str]] = []
    for ti, t in enumerate(p.task):
        nseg = len(t.segment)
        starts = []
        acc = 0.0
        for s in t.segment:
            starts.append((acc, acc + s.duration))
            acc += s.duration
        row = []
        for e in range(len(epoch_bounds) - 1):
            b = epoch_bounds[e]
            k = int(b // period + 1e-12)
            off = b - k * period
            g = -1
            for j, (lo, hi) in enumerate(starts):
                if lo - 1e-9 <= off < hi - 1e-9:
                    g = k * nseg + j
                    break
            row.append(g)
        epoch_seg.append(row)
        path_st = [sidx[c] for c in t.path if c in sidx]
        tr = [tidx[c] for c in t.path if c in tidx]
        transport_of.append(tr[0] if tr else -1)
        mus, chs, names = [], [], []
        for k in range(p.schedule.periods):
            for j, s in enumerate(t.segment):
                mus.append(s.max_requests)
                names.append(f"P{k}S{j}" if p.schedule.periods > 1 else f"S{j}")
                addrs = s.addresses if s.addresses is not None else (ti * stride,) * s.max_requests
                seg_chains = []
                for a in addrs:
                    seg_chains.append(tuple((si, *st.locate(storages[si], a)) for si in path_st))
                chs.append(seg_chains)
        mu.append(mus)
        chains.append(chs)
        seg_names.append(names)

    _relabel_tags(chains, len(storages))
    n_gseg = max(len(m) for m in mu)
    empty_actual = tuple(() for _ in storages)
    comp = Compiled(
        platform=p,
        task_names=[t.name for t in p.task],
        comp_names=list(p.components),
        storages=storages,
        n_transports=len(p.transport),
        transport_of=transport_of,
        epoch_bounds=epoch_bounds,
        epoch_seg=epoch_seg,
        mu=mu,
        chains=chains,
        n_gseg=n_gseg,
        init_actual=empty_actual,
        init_private=tuple(empty_actual for _ in p.task),
        segment_names=seg_names,
    )
    if p.schedule.warm_start:
        comp.init_private = _warm_private(comp)
    comp.sym_classes = _symmetry_classes(comp)
    return comp


def _relabel_tags(chains: list, n_storages: int) -> None:
    """Rewrite tags in place: owned tags → owner·TAG_BASE + local, shared → negative."""
    owners: dict[tuple[int, int], set[int]] = {}
    for t, segs in enumerate(chains):
        for seg in segs:
            for ch in seg:
                for s, _key, tag in ch:
                    owners.setdefault((s, tag), set()).add(t)
    local: dict[tuple[int, int], int] = {}
    counters: dict[tuple[int, int], int] = {}
    shared = 0
    for t, segs in enumerate(chains):
        for seg in segs:
            for ch in seg:
                for s, _key, tag in ch:
                    if (s, tag) in local:
                        continue
                    if len(owners[(s, tag)]) > 1:
                        shared += 1
                        local[(s, tag)] = -shared
                    else:
                        n = counters.get((s, t), 0)
                        counters[(s, t)] = n + 1
                        local[(s, tag)] = t * TAG_BASE + n
    for segs in chains:
        for seg in segs:
            for i, ch in enumerate(seg):
                seg[i] = tuple((s, key, local[(s, tag)]) for s, key, tag in ch)


def _local_tag(tag: int, t: int):
    # a task-relative view of a tag: the task's own tags lose their owner
    return ("own", tag % TAG_BASE) if tag >= 0 and tag // TAG_BASE == t else tag


def _local_value(v, t: int):
    if isinstance(v, tuple):
        return tuple(_local_tag(x, t) for x in v)
    return _local_tag(v, t)


def _symmetry_classes(comp: Compiled) -> list[list[int]]:
    """Groups of tasks that are interchangeable: same path, segments, epochs, request
    chains (up to their own tags) and initial private view."""
    groups: dict[tuple, list[int]] = {}
    for t, task in enumerate(comp.platform.task):
        sig = (
            task.path,
            comp.transport_of[t],
            tuple(comp.mu[t]),
            tuple(comp.epoch_seg[t]),
            tuple(tuple(tuple((s, k, _local_tag(g, t)) for s, k, g in ch) for ch in seg) for seg in comp.chains[t]),
            tuple(tuple((k, _local_value(v, t)) for k, v in m) for m in comp.init_private[t]),
        )
        groups.setdefault(sig, []).append(t)
    return [g for g in groups.values() if len(g) > 1]


def _warm_private(comp: Compiled) -> tuple:
    """Private views after each task ran one period alone with all its requests."""
    private = list(comp.init_private)
    nseg = [len(t.segment) for t in comp.platform.task]
    for ti in range(comp.n_tasks):
        alone_actual = comp.init_actual
        alone_private = tuple(comp.init_private)
        for g in range(nseg[ti]):
            for chain in comp.chains[ti][g]:
                alone_actual, alone_private, _ = access_chain(comp, alone_actual, alone_private, ti, chain)
        private[ti] = alone_private[ti]
    return tuple(private)
