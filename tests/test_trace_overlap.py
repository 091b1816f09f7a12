"""trace/overlap.overlaps, the one window × interval join of the per-job culprits and the
spike attribution, against a plain double loop: overlapping intervals, very long ones, several
CPUs, windows in any order."""

from __future__ import annotations

import numpy as np

from xtalk.trace.overlap import overlaps


def _brute(wc, ws, we, c, s, e):
    return sorted((w, i, min(e[i], we[w]) - max(s[i], ws[w])) for w in range(len(ws)) for i in range(len(s))
                  if wc[w] == c[i] and min(e[i], we[w]) - max(s[i], ws[w]) > 0)


def test_every_overlap_is_found_once_with_its_length():
    rng = np.random.default_rng(7)
    n, m = 60, 400
    wc, c = rng.integers(0, 3, n), rng.integers(0, 3, m)
    ws = rng.integers(0, 100_000, n)
    we = ws + rng.integers(1, 5_000, n)
    s = rng.integers(0, 100_000, m)
    # Mostly short intervals, a few very long ones (they overlap each other and many windows).
    e = s + np.where(rng.random(m) < 0.03, rng.integers(20_000, 90_000, m), rng.integers(0, 800, m))
    order = rng.permutation(n)
    wc, ws, we = wc[order], ws[order], we[order]
    w, i, o = overlaps(wc, ws, we, c, s, e)
    got = sorted(zip(w.tolist(), i.tolist(), o.tolist()))
    assert got == _brute(wc, ws, we, c, s, e) and len(got) > n


def test_no_overlap_gives_empty_arrays():
    w, i, o = overlaps(np.array([0]), np.array([0]), np.array([10]), np.array([1, 0]), np.array([0, 10]),
                       np.array([10, 20]))
    assert w.size == i.size == o.size == 0 and w.dtype == np.int64
