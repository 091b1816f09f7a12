"""Plain enumeration of every interleaving, used to cross-check :mod:`xtalk.model.explorer`.

No state hashing and no reduction: every sequence of events is walked depth-first, with
the explicit per-task end-of-segment events of the seed's task automata (seed 000
Fig. 4.9–4.10: each task sends ``synchro`` when it ends its segment, possibly before its
μ requests). Counters are carried along each path; the maximum over complete paths is
the reference value. Exponential: only for small models.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from xtalk.model.platform import Platform
from xtalk.model.semantics import Compiled, access_chain, compile_platform

__all__ = ["BruteForceResult", "enumerate_maxima"]


@dataclass
class BruteForceResult:
    """Maxima per (task, component, segment) and the number of complete paths walked."""

    maxima: dict[tuple[str, str, int], int]
    paths: int
    seconds: float


def enumerate_maxima(platform: Platform | Compiled, max_paths: int = 2_000_000) -> BruteForceResult:
    """Walk all interleavings; return the maximum of every counter over complete runs."""
    t0 = time.perf_counter()
    cm = platform if isinstance(platform, Compiled) else compile_platform(platform)
    n = cm.n_tasks
    best = [0] * cm.n_counters
    paths = 0

    def run(epoch, issued, done, holder, queue, actual, private, counts):
        nonlocal paths
        if epoch == cm.n_epochs:
            paths += 1
            if paths > max_paths:
                raise RuntimeError(f"more than {max_paths} paths; model too large for brute force")
            for i, v in enumerate(counts):
                if v > best[i]:
                    best[i] = v
            return
        busy = {h for h in holder if h >= 0} | {t for q in queue for t in q}
        moved = False
        for t in range(n):
            g = cm.epoch_seg[t][epoch]
            if g < 0 or done[t] or t in busy:
                continue
            # end of this task's participation in the epoch (its synchro)
            d2 = list(done)
            d2[t] = True
            run(epoch, issued, d2, holder, queue, actual, private, counts)
            moved = True
            if issued[t] >= cm.mu[t][g]:
                continue
            i2 = list(issued)
            i2[t] += 1
            x = cm.transport_of[t]
            c2 = list(counts)
            if x < 0:
                a2, p2, hits = access_chain(cm, actual, private, t, cm.chains[t][g][issued[t]])
                for c in hits:
                    c2[cm.counter(t, c, g)] += 1
                run(epoch, i2, done, holder, queue, a2, p2, c2)
                continue
            h2, q2 = list(holder), [list(q) for q in queue]
            if h2[x] < 0:
                h2[x] = t
            else:
                c2[cm.counter(t, x, g)] += 1 + len(q2[x])
                q2[x].append(t)
            run(epoch, i2, done, h2, q2, actual, private, c2)
        for x in range(cm.n_transports):
            h = holder[x]
            if h < 0:
                continue
            g = cm.epoch_seg[h][epoch]
            a2, p2, hits = access_chain(cm, actual, private, h, cm.chains[h][g][issued[h] - 1])
            c2 = list(counts)
            for c in hits:
                c2[cm.counter(h, c, g)] += 1
            h2, q2 = list(holder), [list(q) for q in queue]
            h2[x] = q2[x].pop(0) if q2[x] else -1
            run(epoch, issued, done, h2, q2, a2, p2, c2)
            moved = True
        if not moved and not busy:
            # every task has ended its segment: the scheduler starts the next epoch
            e2 = epoch + 1
            i2 = [
                issued[t] if e2 < cm.n_epochs and cm.epoch_seg[t][e2] == cm.epoch_seg[t][epoch] else 0
                for t in range(n)
            ]
            run(e2, i2, [False] * n, holder, queue, actual, private, counts)

    run(
        0,
        [0] * n,
        [False] * n,
        [-1] * cm.n_transports,
        [[] for _ in range(cm.n_transports)],
        cm.init_actual,
        cm.init_private,
        [0] * cm.n_counters,
    )
    maxima = {}
    for c, v in enumerate(best):
        task, comp, g = cm.counter_key(c)
        ti = cm.task_names.index(task)
        if g < len(cm.mu[ti]) and (v > 0 or comp in cm.platform.task[ti].path):
            maxima[(task, comp, g)] = v
    return BruteForceResult(maxima=maxima, paths=paths, seconds=time.perf_counter() - t0)
