"""Which intervals overlap which windows, on the same CPU: the one join behind the per-job
culprits (trace/culprits.py) and the spike attribution (analysis/spikes.py)."""

from __future__ import annotations

import numpy as np


def overlaps(win_cpu: np.ndarray, win_s: np.ndarray, win_e: np.ndarray,
             cpu: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(window, interval, overlap ns) of every window [win_s, win_e) and interval
    [start, end) on the same CPU with a positive overlap, all windows at once.

    Per CPU the intervals are sorted by start. Where their ends come in the same order (a
    CPU's tasks, back to back) a window's candidates are the contiguous range from the first
    that ends after it starts; otherwise (intervals that overlap each other) they are bucketed
    by duration (powers of two), and within a bucket the candidates are those starting in
    [win_s − the bucket's longest, win_e), so a few very long ones do not make every window
    scan everything. Indices are positions in the arrays given.
    """
    win_cpu, win_s, win_e = (np.asarray(a, dtype=np.int64) for a in (win_cpu, win_s, win_e))
    cpu, start, end = (np.asarray(a, dtype=np.int64) for a in (cpu, start, end))
    out_w, out_i, out_o = [], [], []
    for c in np.unique(win_cpu):
        wi = np.flatnonzero(win_cpu == c)
        on = np.flatnonzero(cpu == c)
        on = on[np.argsort(start[on], kind="stable")]
        if on.size and np.all(end[on][1:] >= end[on][:-1]):
            # Ends in the order of starts (a CPU's tasks, back to back): one range per window,
            # from the first interval that ends after the window starts.
            groups = [(on, np.searchsorted(end[on], win_s[wi], side="right"))]
        else:
            bucket = np.floor(np.log2(np.maximum(end[on] - start[on], 1))).astype(np.int64)
            groups = []
            for b in np.unique(bucket):
                ii = on[bucket == b]
                groups.append((ii, np.searchsorted(start[ii], win_s[wi] - int(np.max(end[ii] - start[ii])), side="left")))
        for ii, lo in groups:
            s, e = start[ii], end[ii]
            cnt = np.maximum(np.searchsorted(s, win_e[wi], side="left") - lo, 0)
            total = int(cnt.sum())
            if total == 0:
                continue
            rep_w = np.repeat(wi, cnt)
            rep_i = np.repeat(lo, cnt) + np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            ov = np.minimum(e[rep_i], win_e[rep_w]) - np.maximum(s[rep_i], win_s[rep_w])
            keep = ov > 0
            out_w.append(rep_w[keep])
            out_i.append(ii[rep_i[keep]])
            out_o.append(ov[keep])
    if not out_w:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    return np.concatenate(out_w), np.concatenate(out_i), np.concatenate(out_o)
