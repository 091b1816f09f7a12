"""Exploration results from the native core, in the form of :class:`ExplorationResult`.

The native core returns the final counter vector and, for the asked columns, witness
interleavings as event lists in the initial task numbering. Maxima are read over each
symmetry class as the Python explorer does; each witness is then *replayed* here on the
concrete model (no symmetry), so a wrong event sequence fails loudly instead of being
printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from xtalk.model import native
from xtalk.model.steps import (
    ExplorationLimit,
    ExplorationResult,
    Step,
    _describe,
    _Store,
    counter_keys,
    initial_state,
    successors,
)
from xtalk.model.semantics import Compiled

__all__ = ["explore_native", "steps_from_events"]


def steps_from_events(cm: Compiled, events: list, sigma: list[int]) -> list[Step]:
    """Witness steps from native events ([kind, index]; task indices renamed by ``sigma``)."""
    store = _Store(cm)
    state = initial_state(cm, store)
    steps = []
    for kind, i in events:
        want = ("issue", sigma[i]) if kind == 0 else ("complete", i) if kind == 1 else ("advance",)
        for event, nxt, deltas in successors(cm, state, store):
            if event == want:
                break
        else:
            raise native.NativeError(f"witness event {want} is not enabled")
        steps.append(_describe(cm, state, event, deltas))
        state = nxt
    return steps


def explore_native(
    cm: Compiled,
    witnesses: bool | Iterable[tuple[str, str, int]],
    max_states: int | None,
    symmetry: bool,
) -> ExplorationResult:
    """Run ``xtalk-explore`` on ``cm``; maxima, witnesses and statistics."""
    t0 = time.perf_counter()
    keys = counter_keys(cm)
    classes = cm.sym_classes if symmetry else []
    cls_of = {t: cls for cls in classes for t in cls}
    if witnesses is True:
        wanted = {(task, comp, g) for task, comp, g, _, _ in keys}
    else:
        wanted = set(witnesses or ())
    # the columns of a whole orbit: renamings move a witness column inside it
    cols = sorted(
        {cm.counter(u, ci, g) for task, comp, g, ti, ci in keys if (task, comp, g) in wanted for u in cls_of.get(ti, [ti])}
    )
    out = native.run(cm, symmetry=symmetry, max_states=max_states, witness_cols=cols)
    if out["limit"]:
        raise ExplorationLimit(f"more than {max_states} states; reduce requests or segments")
    final = out["finals"]
    found = {c: (reached, events) for c, reached, events in out["witnesses"]}
    maxima: dict[tuple[str, str, int], int] = {}
    wits: dict[tuple[str, str, int], list[Step]] = {}
    for task, comp, g, ti, ci in keys:
        cand = [cm.counter(u, ci, g) for u in cls_of.get(ti, [ti])]
        col = max(cand, key=lambda k: final[k])
        maxima[(task, comp, g)] = int(final[col])
        if (task, comp, g) in wanted and final[col] > 0:
            reached, events = found[col]
            # a symmetric run: swap the class member that reached the maximum with ti
            sigma = list(range(cm.n_tasks))
            sigma[reached], sigma[ti] = ti, reached
            wits[(task, comp, g)] = steps_from_events(cm, events, sigma)
    return ExplorationResult(
        compiled=cm,
        maxima=maxima,
        witnesses=wits,
        objectives=[],
        states=int(out["explored"]),
        transitions=int(out["transitions"]),
        seconds=time.perf_counter() - t0,
        stored=int(out["stored"]),
        memory_kb=int(out["memory_kb"]),
        engine="native",
        epoch_states=[int(x) for x in out["epoch_states"]],
        cpu_seconds=float(out["cpu_seconds"]),
    )
