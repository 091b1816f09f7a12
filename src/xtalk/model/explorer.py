"""Exhaustive explorer of request interleavings (replaces UPPAAL for seed 000 §4.4).

It computes, for every task × component × segment, the maximum number of interferences
over all interleavings, with a witness interleaving for each maximum:

* transport components (seed 000 Definition 3, §4.4 "interference iff the component is
  occupied and another request waits"): a request that arrives while the transport is
  held waits; it suffers one instantaneous interference per request served before it
  (FIFO arbitration);
* storage components (Definition 4, §4.4): the actual state is compared with the task's
  private "as if alone" state (see :mod:`xtalk.model.storage`).

Method. States (epoch, issued requests, transport holders and queues, actual and private
storage states) are hashed, so interleavings that reach the same state are merged. Every
transition strictly increases the potential (epoch, 2·issued − outstanding), so the state
graph is a DAG and states are processed in potential order: the maximum of each counter is
a longest path computed by dynamic programming over the merged graph. Counters therefore
do not enter the state, which is what keeps the state space small.

Partial-order reduction: the seed's task automata end their segment with independent
``synchro`` events (Fig. 4.9–4.10) and may send fewer than μ requests. Those end events are
invisible (no counter changes) and commute with each other, so only one order is explored:
a single ``advance`` transition, enabled whenever no request is outstanding, ends the epoch
for every task at once; a task that has not used all its requests simply sends fewer. The
brute-force enumerator keeps the explicit per-task end events and checks the reduction.

Engines. :func:`explore` runs this algorithm in the native core (``explorer/`` crate,
:mod:`xtalk.model.native`, results assembled by :mod:`xtalk.model.fast`) when it is built,
and otherwise in Python below (the reference, and the engine of weighted objectives).
"""

from __future__ import annotations

import heapq
import resource
import time
from collections.abc import Iterable

import numpy as np

from xtalk.model.platform import Platform
from xtalk.model.semantics import Compiled, compile_platform
from xtalk.model.steps import (  # noqa: F401 (re-exported: the explorer's public names)
    ExplorationLimit,
    ExplorationResult,
    Step,
    _describe,
    _potential,
    _rename,
    _rename_perm,
    _Store,
    counter_keys,
    initial_state,
    successors,
)

__all__ = ["Step", "ExplorationResult", "ExplorationLimit", "explore", "replay", "counter_keys"]


class _Symmetry:
    """Canonical representatives of states under permutations of interchangeable tasks.

    Symmetry reduction: tasks in one class (same path, profile and tags up to ownership,
    see :func:`xtalk.model.semantics._symmetry_classes`) are sorted by (issued requests,
    role on the transport, private view); the state is renamed accordingly (task indices
    and the owners of tags). Ties keep the original order, so the representative is not
    always unique: that only merges fewer states, never wrong ones. The counter vector is
    permuted with the state, and maxima are read over each class at the end.
    """

    def __init__(self, cm: Compiled, store: _Store):
        self.cm = cm
        self.store = store
        self.classes = cm.sym_classes
        self._idx: dict[tuple, np.ndarray] = {}

    def canonical(self, state: tuple) -> tuple[tuple, tuple | None]:
        """(representative, perm) with perm[t] = new index of task t; perm None = unchanged."""
        epoch, issued, buses, actual, private = state
        n = len(issued)
        role = [0] * n
        for h, q in buses:
            if h >= 0:
                role[h] = 1
                for i, t in enumerate(q):
                    role[t] = 2 + i
        perm = None
        memo = self.store._local
        local = self.store.local
        for cls in self.classes:
            keys = []
            for t in cls:
                lid = memo.get((private[t], t))
                if lid is None:
                    lid = local(private[t], t)
                keys.append((issued[t], role[t], lid, t))
            keys.sort()
            if any(k[3] != t for k, t in zip(keys, cls)):
                if perm is None:
                    perm = list(range(n))
                for new_pos, k in zip(cls, keys):
                    perm[k[3]] = new_pos
        if perm is None:
            return state, None
        perm = tuple(perm)
        renamed = self.store.renamed
        new_issued = [0] * n
        new_private = [0] * n
        for t in range(n):
            new_issued[perm[t]] = issued[t]
            new_private[perm[t]] = renamed(private[t], perm)
        new_buses = tuple((perm[h] if h >= 0 else -1, tuple(perm[q] for q in qu)) for h, qu in buses)
        return (epoch, tuple(new_issued), new_buses, renamed(actual, perm), tuple(new_private)), perm

    def index(self, perm: tuple, width: int) -> np.ndarray:
        """``idx`` with new_vector = old_vector[idx] after renaming tasks by ``perm``."""
        idx = self._idx.get(perm)
        if idx is None:
            cm = self.cm
            idx = np.arange(width)
            for t in range(cm.n_tasks):
                for c in range(len(cm.comp_names)):
                    for g in range(cm.n_gseg):
                        idx[cm.counter(perm[t], c, g)] = cm.counter(t, c, g)
            self._idx[perm] = idx
        return idx


def explore(
    platform: Platform | Compiled,
    witnesses: bool | Iterable[tuple[str, str, int]] = True,
    weights: np.ndarray | None = None,
    max_states: int | None = None,
    symmetry: bool = True,
    engine: str = "auto",
) -> ExplorationResult:
    """Explore all interleavings; return per-counter maxima (and witnesses).

    ``witnesses`` is True (one per counter), False, or the (task, component, segment)
    keys that need one. ``engine``: ``"native"`` (the explorer/ crate), ``"python"``, or
    ``"auto"`` (native when built, else Python with a one-time note on stderr).
    ``max_states`` (default 5 M for Python, unlimited for native) raises
    :class:`ExplorationLimit` beyond it. ``weights`` (shape ``(k, n_counters)``) adds
    ``k`` linear objectives Σ w·count whose exact maxima are computed in the same pass
    (used by :mod:`xtalk.model.penalty`, Python only); it turns the symmetry reduction off
    because the weights single out tasks.
    """
    cm = platform if isinstance(platform, Compiled) else compile_platform(platform)
    if engine not in ("auto", "native", "python"):
        raise ValueError(f"engine {engine!r}: use auto, native or python")
    if engine != "python" and weights is None:
        from xtalk.model import native
        from xtalk.model.fast import explore_native

        if native.available():
            return explore_native(cm, witnesses, max_states, symmetry)
        if engine == "native":
            raise native.NativeError("xtalk-explore is not built (make setup)")
        native.warn_slow_path()
    keys = None if isinstance(witnesses, bool) else set(witnesses)
    res = _explore_python(cm, bool(witnesses), weights, max_states or 5_000_000, symmetry)
    if keys is not None:
        res.witnesses = {k: v for k, v in res.witnesses.items() if k in keys}
    return res


def _explore_python(
    cm: Compiled, witnesses: bool, weights: np.ndarray | None, max_states: int, symmetry: bool
) -> ExplorationResult:
    """The reference explorer in Python (see the module docstring)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    n_c = cm.n_counters
    w = np.zeros((0, n_c)) if weights is None else np.asarray(weights, dtype=float)
    width = n_c + w.shape[0]
    store = _Store(cm)
    sym = _Symmetry(cm, store) if symmetry and cm.sym_classes and w.shape[0] == 0 else None

    init = initial_state(cm, store)
    if sym is not None:
        init, _ = sym.canonical(init)
    index: dict[tuple, int] = {init: 0}
    states: list[tuple] = [init]
    best: list[np.ndarray] = [np.zeros(width)]
    pred: list[np.ndarray | None] = [None]
    # bucket queue: successors always have a larger potential, so a heap of the distinct
    # potentials (a few hundred) plus one list per potential replaces a heap of states
    buckets: dict[tuple[int, int], list[int]] = {_potential(init): [0]}
    heap: list[tuple[int, int]] = [_potential(init)]
    transitions = 0
    terminal: list[int] = []
    delta_cache: dict[tuple, np.ndarray] = {}

    def pending():
        while heap:
            yield from buckets.pop(heapq.heappop(heap))

    for sid in pending():
        s = states[sid]
        succ = successors(cm, s, store)
        if not succ:
            terminal.append(sid)
            continue
        base = best[sid]
        for _event, nxt, deltas in succ:
            transitions += 1
            if deltas:
                key = tuple(deltas)
                dv = delta_cache.get(key)
                if dv is None:
                    dv = np.zeros(width)
                    for c, n in deltas:
                        dv[c] += n
                        if w.shape[0]:
                            dv[n_c:] += w[:, c] * n
                    delta_cache[key] = dv
                cand = base + dv
            else:
                cand = base
            nid = index.get(nxt)
            if nid is None and sym is not None:
                # only representatives are stored and canonical() is idempotent on them,
                # so a state found in the index needs no canonicalisation
                nxt, perm = sym.canonical(nxt)
                if perm is not None:
                    cand = cand[sym.index(perm, width)]
                nid = index.get(nxt)
            if nid is None:
                nid = len(states)
                if nid >= max_states:
                    raise ExplorationLimit(f"more than {max_states} states; reduce requests or segments")
                index[nxt] = nid
                states.append(nxt)
                best.append(cand.copy())
                pred.append(np.full(width, sid, dtype=np.int32) if witnesses else None)
                pot = _potential(nxt)
                bucket = buckets.get(pot)
                if bucket is None:
                    buckets[pot] = [nid]
                    heapq.heappush(heap, pot)
                else:
                    bucket.append(nid)
            else:
                cur = best[nid]
                better = cand > cur
                if better.any():
                    np.maximum(cur, cand, out=cur)
                    if witnesses:
                        pred[nid][better] = sid

    finals = np.stack([best[i] for i in terminal])
    final = finals.max(axis=0)
    argbest = finals.argmax(axis=0)
    cls_of = {t: cls for cls in (sym.classes if sym else []) for t in cls}
    maxima: dict[tuple[str, str, int], int] = {}
    wits: dict[tuple[str, str, int], list[Step]] = {}
    for task, comp, g, ti, ci in counter_keys(cm):
        # under symmetry a task's counter is the best over its class (the orbit's maximum)
        cols = [cm.counter(u, ci, g) for u in cls_of.get(ti, [ti])]
        col = max(cols, key=lambda k: final[k])
        maxima[(task, comp, g)] = int(round(final[col]))
        if witnesses and final[col] > 0:
            wits[(task, comp, g)] = _witness(cm, store, sym, states, best, pred, terminal[argbest[col]], col, w, ti)
    obj_w = []
    if witnesses:
        obj_w = [
            _witness(cm, store, sym, states, best, pred, terminal[argbest[n_c + k]], n_c + k, w, None)
            for k in range(w.shape[0])
        ]
    return ExplorationResult(
        compiled=cm,
        maxima=maxima,
        witnesses=wits,
        objectives=[float(v) for v in final[n_c:]],
        states=len(states),
        transitions=transitions,
        seconds=time.perf_counter() - t0,
        objective_witnesses=obj_w,
        stored=len(states),
        memory_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        engine="python",
        epoch_states=[sum(1 for s in states if s[0] == e) for e in range(cm.n_epochs + 1)],
        cpu_seconds=time.process_time() - c0,
    )


def _witness(cm, store, sym, states, best, pred, end: int, col: int, w: np.ndarray, target: int | None) -> list[Step]:
    """Walk predecessor links of column ``col`` back from ``end`` to the initial state.

    Under symmetry each link may rename tasks; the renamings are composed so that the
    witness is told with the real task names, and the class member whose counter reached
    the maximum is finally swapped with ``target`` (a symmetric run).
    """
    n_c = cm.n_counters
    n = cm.n_tasks
    chain = []
    cur, c = end, col
    while cur != 0:
        p = int(pred[cur][c])
        target_state = states[cur]
        for event, nxt, deltas in successors(cm, states[p], store):
            perm = None
            if sym is not None:
                nxt, perm = sym.canonical(nxt)
            if nxt != target_state:
                continue
            c_p = c if perm is None else int(sym.index(perm, len(best[0]))[c])
            if c_p < n_c:
                gain = sum(k for d, k in deltas if d == c_p)
            else:
                gain = sum(w[c_p - n_c, d] * k for d, k in deltas)
            if abs(best[p][c_p] + gain - best[cur][c]) < 1e-9:
                chain.append((states[p], event, deltas, perm))
                break
        else:  # pragma: no cover - would mean the predecessor links are inconsistent
            raise RuntimeError("witness reconstruction failed")
        cur, c = p, c_p
    chain.reverse()
    # phi[k][t]: task t of frame k is task phi[k][t] of the initial frame
    phis = [list(range(n))]
    for _, _, _, perm in chain:
        phi = phis[-1]
        if perm is not None:
            inv = [0] * n
            for t in range(n):
                inv[perm[t]] = t
            phi = [phi[inv[j]] for j in range(n)]
        phis.append(phi)
    sigma = list(range(n))
    if target is not None and col < n_c:
        reached = phis[-1][cm.task_names.index(cm.counter_key(col)[0])]
        sigma[reached], sigma[target] = target, reached
    steps = []
    for (ps, event, deltas, _), phi in zip(chain, phis):
        names = [cm.task_names[sigma[phi[t]]] for t in range(n)]
        steps.append(_describe(cm, ps, event, deltas, names))
    return steps


def replay(cm: Compiled, steps: list[Step]) -> dict[tuple[str, str, int], int]:
    """Execute a witness on the concrete model and return the counters it produces.

    Raises ``ValueError`` when a step is not enabled: witnesses are checked, not trusted.
    """
    store = _Store(cm)
    state = initial_state(cm, store)
    counts: dict[tuple[str, str, int], int] = {}
    for step in steps:
        for event, nxt, deltas in successors(cm, state, store):
            if event[0] != step.kind:
                continue
            if event[0] == "issue" and cm.task_names[event[1]] != step.task:
                continue
            if event[0] == "complete" and cm.comp_names[event[1]] != step.component:
                continue
            break
        else:
            raise ValueError(f"witness step not enabled: {step}")
        for c, n in deltas:
            key = cm.counter_key(c)
            counts[key] = counts.get(key, 0) + n
        state = nxt
    return counts
