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
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

import numpy as np

from xtalk.model.platform import Platform
from xtalk.model.semantics import Compiled, access_chain, compile_platform

__all__ = ["Step", "ExplorationResult", "ExplorationLimit", "explore", "successors"]


class ExplorationLimit(RuntimeError):
    """The state space exceeded ``max_states``."""


@dataclass(frozen=True)
class Step:
    """One transition of a witness interleaving."""

    kind: str  # "issue", "complete" or "advance"
    epoch: int
    task: str = ""
    component: str = ""
    detail: str = ""
    gains: tuple[tuple[str, int], ...] = ()  # (component, interferences) suffered by ``task``

    def __str__(self) -> str:
        return f"[epoch {self.epoch}] {self.detail}"


@dataclass
class ExplorationResult:
    """Maxima per (task, component, segment), witnesses and exploration statistics."""

    compiled: Compiled
    maxima: dict[tuple[str, str, int], int]
    witnesses: dict[tuple[str, str, int], list[Step]]
    objectives: list[float]
    states: int
    transitions: int
    seconds: float
    objective_witnesses: list[list[Step]] = field(default_factory=list)

    def max(self, task: str, component: str, segment: int) -> int:
        """Maximum interference count of ``task`` on ``component`` in ``segment``."""
        return self.maxima.get((task, component, segment), 0)

    def holds(self, task: str, component: str, segment: int, bound: int) -> bool:
        """Truth of the UPPAAL query ``A[] not (nb_interferences_C[seg, task] > bound)``."""
        return self.max(task, component, segment) <= bound

    def rows(self) -> list[dict]:
        """One row per counter: task, component, segment, max."""
        out = []
        cm = self.compiled
        for (task, comp, seg), v in sorted(
            self.maxima.items(), key=lambda kv: (cm.task_names.index(kv[0][0]), kv[0][2], kv[0][1])
        ):
            ti = cm.task_names.index(task)
            name = cm.segment_names[ti][seg] if seg < len(cm.segment_names[ti]) else str(seg)
            out.append({"task": task, "component": comp, "segment": seg, "segment_name": name, "max": v})
        return out


def _potential(state: tuple) -> tuple[int, int]:
    epoch, issued, buses = state[0], state[1], state[2]
    outstanding = sum((1 if h >= 0 else 0) + len(q) for h, q in buses)
    return epoch, 2 * sum(issued) - outstanding


def initial_state(cm: Compiled) -> tuple:
    """Epoch 0, nothing issued, transports free, storages in their initial states."""
    return (0, (0,) * cm.n_tasks, ((-1, ()),) * cm.n_transports, cm.init_actual, cm.init_private)


def successors(cm: Compiled, state: tuple) -> list[tuple[tuple, tuple, list[tuple[int, int]]]]:
    """Enabled transitions of ``state`` as (event, next state, counter increments)."""
    epoch, issued, buses, actual, private = state
    if epoch >= cm.n_epochs:
        return []
    out = []
    outstanding = set()
    for h, q in buses:
        if h >= 0:
            outstanding.add(h)
        outstanding.update(q)
    for t in range(cm.n_tasks):
        g = cm.epoch_seg[t][epoch]
        if g < 0 or t in outstanding or issued[t] >= cm.mu[t][g]:
            continue
        new_issued = issued[:t] + (issued[t] + 1,) + issued[t + 1 :]
        x = cm.transport_of[t]
        if x < 0:
            a2, p2, hits = access_chain(cm, actual, private, t, cm.chains[t][g][issued[t]])
            deltas = [(cm.counter(t, c, g), 1) for c in hits]
            out.append((("issue", t), (epoch, new_issued, buses, a2, p2), deltas))
            continue
        holder, queue = buses[x]
        if holder < 0:
            nb, deltas = (t, ()), []
        else:
            nb, deltas = (holder, queue + (t,)), [(cm.counter(t, x, g), 1 + len(queue))]
        b2 = buses[:x] + (nb,) + buses[x + 1 :]
        out.append((("issue", t), (epoch, new_issued, b2, actual, private), deltas))
    for x, (holder, queue) in enumerate(buses):
        if holder < 0:
            continue
        g = cm.epoch_seg[holder][epoch]
        a2, p2, hits = access_chain(cm, actual, private, holder, cm.chains[holder][g][issued[holder] - 1])
        deltas = [(cm.counter(holder, c, g), 1) for c in hits]
        nb = (queue[0], queue[1:]) if queue else (-1, ())
        b2 = buses[:x] + (nb,) + buses[x + 1 :]
        out.append((("complete", x), (epoch, issued, b2, a2, p2), deltas))
    if not outstanding:
        e2 = epoch + 1
        keep = [e2 < cm.n_epochs and cm.epoch_seg[t][e2] == cm.epoch_seg[t][epoch] for t in range(cm.n_tasks)]
        new_issued = tuple(issued[t] if keep[t] else 0 for t in range(cm.n_tasks))
        out.append((("advance",), (e2, new_issued, buses, actual, private), []))
    return out


def _describe(cm: Compiled, state: tuple, event: tuple, deltas: list[tuple[int, int]]) -> Step:
    epoch, issued, buses = state[0], state[1], state[2]
    gains = tuple((cm.counter_key(c)[1], n) for c, n in deltas)
    hit_txt = ", ".join(f"{c}+{n}" for c, n in gains)
    suffix = f" → interference {hit_txt}" if deltas else ""
    if event[0] == "issue":
        t = event[1]
        g = cm.epoch_seg[t][epoch]
        x = cm.transport_of[t]
        where = ""
        if x >= 0:
            holder = buses[x][0]
            where = f" ({cm.comp_names[x]} busy with {cm.task_names[holder]})" if holder >= 0 else f" ({cm.comp_names[x]} free)"
        det = f"{cm.task_names[t]} issues request {issued[t] + 1} of {cm.segment_names[t][g]}{where}{suffix}"
        return Step("issue", epoch, cm.task_names[t], cm.comp_names[x] if x >= 0 else "", det, gains)
    if event[0] == "complete":
        x = event[1]
        h = buses[x][0]
        det = f"{cm.comp_names[x]} serves {cm.task_names[h]}'s request{suffix}"
        return Step("complete", epoch, cm.task_names[h], cm.comp_names[x], det, gains)
    det = f"epoch ends at t={cm.epoch_bounds[epoch + 1]:g}"
    return Step("advance", epoch, detail=det)


def explore(
    platform: Platform | Compiled,
    witnesses: bool = True,
    weights: np.ndarray | None = None,
    max_states: int = 5_000_000,
) -> ExplorationResult:
    """Explore all interleavings; return per-counter maxima (and witnesses).

    ``weights`` (shape ``(k, n_counters)``) adds ``k`` linear objectives Σ w·count whose
    exact maxima are computed in the same pass (used by :mod:`xtalk.model.penalty`).
    """
    t0 = time.perf_counter()
    cm = platform if isinstance(platform, Compiled) else compile_platform(platform)
    n_c = cm.n_counters
    w = np.zeros((0, n_c)) if weights is None else np.asarray(weights, dtype=float)
    width = n_c + w.shape[0]

    init = initial_state(cm)
    index: dict[tuple, int] = {init: 0}
    states: list[tuple] = [init]
    best: list[np.ndarray] = [np.zeros(width)]
    pred: list[np.ndarray | None] = [None]
    heap: list[tuple[tuple[int, int], int]] = [(_potential(init), 0)]
    transitions = 0
    terminal: list[int] = []
    delta_cache: dict[tuple, np.ndarray] = {}

    while heap:
        _, sid = heapq.heappop(heap)
        s = states[sid]
        succ = successors(cm, s)
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
            if nid is None:
                nid = len(states)
                if nid >= max_states:
                    raise ExplorationLimit(f"more than {max_states} states; reduce requests or segments")
                index[nxt] = nid
                states.append(nxt)
                best.append(cand.copy())
                pred.append(np.full(width, sid, dtype=np.int32) if witnesses else None)
                heapq.heappush(heap, (_potential(nxt), nid))
            else:
                cur = best[nid]
                better = cand > cur
                if better.any():
                    np.maximum(cur, cand, out=cur)
                    if witnesses:
                        pred[nid][better] = sid

    final = np.max(np.stack([best[i] for i in terminal]), axis=0)
    argbest = np.argmax(np.stack([best[i] for i in terminal]), axis=0)
    maxima: dict[tuple[str, str, int], int] = {}
    wits: dict[tuple[str, str, int], list[Step]] = {}
    for c in range(n_c):
        task, comp, g = cm.counter_key(c)
        ti = cm.task_names.index(task)
        if g >= len(cm.mu[ti]):
            continue
        if cm.comp_names.index(comp) < cm.n_transports and cm.transport_of[ti] != cm.comp_names.index(comp):
            continue
        if cm.comp_names.index(comp) >= cm.n_transports and comp not in cm.platform.task[ti].path:
            continue
        maxima[(task, comp, g)] = int(round(final[c]))
        if witnesses and final[c] > 0:
            wits[(task, comp, g)] = _witness(cm, states, best, pred, terminal[argbest[c]], c, w)
    obj_w = []
    if witnesses:
        obj_w = [_witness(cm, states, best, pred, terminal[argbest[n_c + k]], n_c + k, w) for k in range(w.shape[0])]
    return ExplorationResult(
        compiled=cm,
        maxima=maxima,
        witnesses=wits,
        objectives=[float(v) for v in final[n_c:]],
        states=len(states),
        transitions=transitions,
        seconds=time.perf_counter() - t0,
        objective_witnesses=obj_w,
    )


def _witness(cm, states, best, pred, end: int, col: int, w: np.ndarray) -> list[Step]:
    """Walk predecessor links of column ``col`` back from ``end`` to the initial state."""
    steps: list[Step] = []
    cur = end
    n_c = cm.n_counters
    while cur != 0:
        p = int(pred[cur][col])
        target = states[cur]
        for event, nxt, deltas in successors(cm, states[p]):
            if nxt != target:
                continue
            if col < n_c:
                gain = sum(n for c, n in deltas if c == col)
            else:
                gain = sum(w[col - n_c, c] * n for c, n in deltas)
            if abs(best[p][col] + gain - best[cur][col]) < 1e-9:
                steps.append(_describe(cm, states[p], event, deltas))
                break
        else:  # pragma: no cover - would mean the predecessor links are inconsistent
            raise RuntimeError("witness reconstruction failed")
        cur = p
    steps.reverse()
    return steps
