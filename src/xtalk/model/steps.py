"""States and steps of the interference explorer: the state encoding, the successor
relation, the result types and the counter keys, shared by the Python explorer
(:mod:`xtalk.model.explorer`) and the assembly of the native core's answer
(:mod:`xtalk.model.fast`), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


from xtalk.model.semantics import TAG_BASE, Compiled, access_chain

__all__ = [
    "ExplorationLimit", "Step", "ExplorationResult", "initial_state", "successors", "counter_keys",
]

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
    stored: int = 0  # states held in memory at the peak (UPPAAL's "states stored")
    memory_kb: int = 0  # peak resident memory of the process that explored
    engine: str = "python"  # "native" (explorer/ crate) or "python"
    epoch_states: list[int] = field(default_factory=list)  # states per epoch (last: terminal)
    cpu_seconds: float = 0.0  # CPU time of the exploration (the native core's own process)

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


class _Store:
    """Interned storage states: explorer states hold small ints instead of nested tuples.

    Hashing a state is then cheap, and storage accesses and renamings are memoised:
    the same (storage state, request) pair recurs across many interleavings.
    """

    def __init__(self, cm: Compiled):
        self.cm = cm
        self.val: list = []
        self._ids: dict = {}
        self._access: dict = {}
        self._rename: dict = {}
        self._local: dict = {}

    def intern(self, v) -> int:
        """Small integer id of a hashable storage state."""
        i = self._ids.get(v)
        if i is None:
            i = len(self.val)
            self._ids[v] = i
            self.val.append(v)
        return i

    def access(self, actual: int, priv: int, t: int, g: int, k: int) -> tuple[int, int, list[int]]:
        """(new actual id, new private id of t, interfered components) of t's request k."""
        key = (actual, priv, t, g, k)
        r = self._access.get(key)
        if r is None:
            private = tuple(self.val[priv] if u == t else () for u in range(self.cm.n_tasks))
            a2, p2, hits = access_chain(self.cm, self.val[actual], private, t, self.cm.chains[t][g][k])
            r = (self.intern(a2), self.intern(p2[t]), hits)
            self._access[key] = r
        return r

    def renamed(self, i: int, perm: tuple) -> int:
        """Id of the storage state ``i`` with tag owners renamed by ``perm``."""
        key = (i, perm)
        r = self._rename.get(key)
        if r is None:
            # actual and private states alike: one sparse mapping per storage
            v = self.val[i]
            r = self.intern(tuple(tuple((k, _rename_perm(x, perm)) for k, x in m) for m in v))
            self._rename[key] = r
        return r

    def local(self, i: int, t: int) -> int:
        """Id of private state ``i`` of task ``t`` with its own tags made owner-free."""
        key = (i, t)
        r = self._local.get(key)
        if r is None:
            v = self.val[i]
            r = self.intern(("local", tuple(tuple((k, _rename(x, t, 0)) for k, x in m) for m in v)))
            self._local[key] = r
        return r


def initial_state(cm: Compiled, store: _Store) -> tuple:
    """Epoch 0, nothing issued, transports free, storages in their initial states."""
    return (
        0,
        (0,) * cm.n_tasks,
        ((-1, ()),) * cm.n_transports,
        store.intern(cm.init_actual),
        tuple(store.intern(p) for p in cm.init_private),
    )


def successors(cm: Compiled, state: tuple, store: _Store) -> list[tuple[tuple, tuple, list[tuple[int, int]]]]:
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
            a2, pt, hits = store.access(actual, private[t], t, g, issued[t])
            p2 = private[:t] + (pt,) + private[t + 1 :]
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
        a2, ph, hits = store.access(actual, private[holder], holder, g, issued[holder] - 1)
        p2 = private[:holder] + (ph,) + private[holder + 1 :]
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


def _describe(
    cm: Compiled, state: tuple, event: tuple, deltas: list[tuple[int, int]], names: list[str] | None = None
) -> Step:
    names = names or cm.task_names
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
            where = f" ({cm.comp_names[x]} busy with {names[holder]})" if holder >= 0 else f" ({cm.comp_names[x]} free)"
        det = f"{names[t]} issues request {issued[t] + 1} of {cm.segment_names[t][g]}{where}{suffix}"
        return Step("issue", epoch, names[t], cm.comp_names[x] if x >= 0 else "", det, gains)
    if event[0] == "complete":
        x = event[1]
        h = buses[x][0]
        det = f"{cm.comp_names[x]} serves {names[h]}'s request{suffix}"
        return Step("complete", epoch, names[h], cm.comp_names[x], det, gains)
    det = f"epoch ends at t={cm.epoch_bounds[epoch + 1]:g}"
    return Step("advance", epoch, detail=det)


def counter_keys(cm: Compiled) -> list[tuple[str, str, int, int, int]]:
    """(task, component, segment, task index, component index) of every reported counter:
    the components on the task's path, the segments the task has."""
    out = []
    for c in range(cm.n_counters):
        task, comp, g = cm.counter_key(c)
        ti = cm.task_names.index(task)
        ci = cm.comp_names.index(comp)
        if g >= len(cm.mu[ti]):
            continue
        if ci < cm.n_transports and cm.transport_of[ti] != ci:
            continue
        if ci >= cm.n_transports and comp not in cm.platform.task[ti].path:
            continue
        out.append((task, comp, g, ti, ci))
    return out


def _rename(v, old: int, new: int):
    # rename the owner of tags owned by task ``old`` to ``new``
    if isinstance(v, tuple):
        return tuple(_rename(x, old, new) for x in v)
    if v >= 0 and v // TAG_BASE == old:
        return new * TAG_BASE + v % TAG_BASE
    return v


def _rename_perm(v, perm):
    if isinstance(v, tuple):
        return tuple(_rename_perm(x, perm) for x in v)
    if v >= 0:
        return perm[v // TAG_BASE] * TAG_BASE + v % TAG_BASE
    return v
