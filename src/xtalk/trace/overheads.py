"""The scheduler overheads of each timer release (seed 001 §4.5), from a run's kernel trace.

A `latency` victim sleeps with clock_nanosleep(TIMER_ABSTIME) to each release r and records
the date it is back in user space (``wakeup_ns``). Between the two, the kernel trace (one
clock with the job rows: CLOCK_MONOTONIC) shows four instants, which cut the job's measured
latency ``wakeup_ns − r`` into the seed's four overheads:

    r ── Δevent ──► t_irq ── Δrel ──► t_wake ── Δsched ──► t_switch ── Δcxs ──► wakeup_ns

- t_irq: ``hrtimer_expire_entry`` of the victim's own timer (``function=hrtimer_wakeup``,
  the timer the victim armed with ``hrtimer_start … softexpires=r``; without ``hrtimer_start`` in
  the trace, the last ``hrtimer_wakeup`` expiry on the CPU that woke the victim). Its ``now``
  field (ns) is the clock the timer interrupt read on entry, used where present; else the
  event's stamp.
- t_wake: ``sched_wakeup`` of the victim's pid: the task is runnable.
- t_switch: ``sched_switch`` with ``next_pid`` = the victim: the CPU is given to it.

so Δevent = t_irq − r, Δrel = t_wake − t_irq, Δsched = t_switch − t_wake, Δcxs = wakeup_ns −
t_switch, and their sum Δ^relEv is the job's measured latency exactly, by construction.

What each one holds on Linux, against the seed's RTOS (Fig. 4.10):

- Δevent (seed: interrupt signal to ISR start): the timer device's programming and
  delivery, interrupts-off sections, the interrupt entry; in a guest also the host's timer,
  the VM exit and the injection, and any time the vCPU was not running. Timer slack is in it
  for a non-real-time victim (SCHED_FIFO and DEADLINE have none).
- Δrel (seed: the release ISR): the hrtimer core from its clock read to the victim's
  wake-up (``try_to_wake_up``, enqueue, the preemption check), including any timer that
  expired at the same instant and ran first. It ends at the wake-up, not at
  ``hrtimer_expire_exit``: the rest of the interrupt is counted in Δsched.
- Δsched (seed: selecting the next process): the rest of the interrupt (other timers, the
  next expiry programmed, interrupt exit), the wait for a preemption point (a stock kernel's
  non-preemptible sections: where PREEMPT_RT differs) and ``__schedule`` picking the victim.
- Δcxs (seed: the context switch): the switch itself, then the return from clock_nanosleep
  to user space and the vDSO clock read that dates the wake-up.

Resolution: every instant is in ns. The agent keeps the ring buffer's own stamps (trace.dat,
the mono clock in ns), t_irq is the interrupt's clock read (``now``), and both ends of the
job are the victim's own CLOCK_MONOTONIC reads. Only a run whose trace fell back to the text
rendering (``trace.capture = "text"`` in run.json: the raw buffers could not be read) has µs
stamps, rounded to the nearest, so there t_wake and t_switch carry ±0.5 µs and a Δ that ends
or starts at them ±1 µs (a small Δ may read slightly below zero: kept as measured); the
matching allows that half µs (the table's ``resolution_ns``). The sum is exact either way.

A job whose instants cannot all be found (events lost to an overrun of the trace buffer,
a job released late so that the victim never left the CPU, the trace window's edges) is
kept with its reason in ``unmatched`` (``REASONS``) and no Δ (NaN, never 0); where only the
switch is missing, Δevent and Δrel stand and the other two are unknown. A ``late`` job's
latency is decomposed as far as the trace allows: ``overrun_ns``, how long after the
release the victim armed its timer (the earlier job ran that far past it; the rest is the
immediate return from clock_nanosleep). ``relev_ns`` is every job's measured latency,
``wakeup_ns − release_ns``, decomposed or not: the tail is where the late jobs are. On the machine this
was written on (a sandboxed KVM guest, Linux 6.18) the trace holds no sched_switch away from
the idle task, nor away from the processes outside the container's PID namespace, while
their wake-ups are there: a victim woken on an idle CPU has no switch to find.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The four overheads, in order along the release (seed 001 §4.5).
DELTAS = ["event", "rel", "sched", "cxs"]
#: Their names as the seed writes them, for tables.
NAMES = {"event": "Δevent", "rel": "Δrel", "sched": "Δsched", "cxs": "Δcxs", "overrun": "overrun", "relev": "Δ^relEv"}
#: The events the decomposition reads (hrtimer_start sharpens the match; the rest are needed).
EVENTS = ["timer:hrtimer_start", "timer:hrtimer_expire_entry", "sched:sched_wakeup", "sched:sched_switch"]
TIMER_FN = "hrtimer_wakeup"  # the expiry function of a sleeping task's timer
COLUMNS = ["job", "release_ns", "irq_ns", "wake_ns", "switch_ns", "wakeup_ns",
           "event_ns", "rel_ns", "sched_ns", "cxs_ns", "overrun_ns", "relev_ns", "unmatched"]


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df else pd.Series(pd.NA, index=df.index)


def _first_at_or_after(ts: np.ndarray, t: int) -> int:
    """Index of the first stamp >= t, or -1."""
    i = int(np.searchsorted(ts, t, side="left"))
    return i if i < ts.size else -1


def decompose(events: pd.DataFrame, jobs: pd.DataFrame, victim_pid: int) -> pd.DataFrame:
    """One row per job (``COLUMNS``): the four instants, the four Δ and their sum Δ^relEv in
    ns, and ``unmatched`` ("" when every instant was found, else why not: ``REASONS``)."""
    ev = events
    kind = ev["event"] if "event" in ev else pd.Series(dtype=object)
    fn = _col(ev, "name").astype(object)
    starts = ev[(kind == "hrtimer_start") & (ev["pid"] == victim_pid) & (fn == TIMER_FN)]
    entries = ev[(kind == "hrtimer_expire_entry") & (fn == TIMER_FN)]
    wakes = ev[(kind == "sched_wakeup") & (_col(ev, "target_pid") == victim_pid)]
    switches = ev[(kind == "sched_switch") & (_col(ev, "next_pid") == victim_pid)]
    ctx = _Trace(
        # The timer each release armed: the time it asks for (softexpires; expires adds the
        # timer slack of a non-real-time task) is the release itself, in ns; the last start
        # wins (a sleep restarted after a signal arms it again).
        by_expiry={int(x): (int(t), h) for x, t, h in zip(_col(starts, "softexpires").fillna(_col(starts, "expires")),
                                                        starts["ts_ns"], _col(starts, "hrtimer")) if pd.notna(x)},
        by_timer={h: (g["ts_ns"].to_numpy(np.int64), _col(g, "now").to_numpy(dtype=float))
                  for h, g in entries.groupby("hrtimer", sort=False)} if len(entries) else {},
        e_ts=entries["ts_ns"].to_numpy(np.int64), e_cpu=entries["cpu"].to_numpy(np.int64),
        e_now=_col(entries, "now").to_numpy(dtype=float),
        w_ts=wakes["ts_ns"].to_numpy(np.int64), w_cpu=wakes["cpu"].to_numpy(np.int64), w_pid=wakes["pid"].to_numpy(np.int64),
        s_ts=switches["ts_ns"].to_numpy(np.int64), victim=victim_pid,
        # How far a stamp may be from the true ns: half its resolution (a text trace's µs).
        slack=int(events.attrs.get("resolution_ns", 1000)) // 2)
    rows = [_job(ctx, int(j), int(r), int(b)) for j, r, b in
            zip(jobs["job"].to_numpy(np.int64), jobs["release_ns"].to_numpy(np.int64), jobs["wakeup_ns"].to_numpy(np.int64))]
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS[1:-1]:  # ns since boot: exact in a float64 for 104 days; NaN where unknown
        out[c] = out[c].astype("int64" if c in ("release_ns", "wakeup_ns") else float)
    return out


#: Why a job has no (or only a partial) decomposition.
REASONS = {
    "no timer start": "no hrtimer_start of the victim for this release (lost events, or the trace window's edge)",
    "late": "the timer was armed after its release (an earlier job overran): the victim never slept",
    "no timer expiry": "no expiry of the victim's timer in the trace",
    "no wake-up": "no sched_wakeup of the victim between the expiry and the wake-up date",
    "no switch": "no sched_switch to the victim between its wake-up and the wake-up date (seen where the CPU "
                 "was idle or ran a task the trace shows no switch away from): Δevent and Δrel kept, Δsched and "
                 "Δcxs unknown",
}


class _Trace:
    """The victim's events, as arrays searched per job."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _job(t: _Trace, job: int, r: int, back: int) -> dict:
    row = dict.fromkeys(COLUMNS, np.nan)
    row.update(job=job, release_ns=r, wakeup_ns=back, unmatched="")
    row["relev_ns"] = back - r  # measured whatever the trace holds: a job's latency is never dropped
    irq = _irq(t, r)
    if isinstance(irq, str):
        row["unmatched"] = irq
        if irq == "late" and r in t.by_expiry:
            # The victim armed this release's timer only then: the earlier job ran past r.
            row["overrun_ns"] = t.by_expiry[r][0] - r
        return row
    irq_ns, irq_stamp = irq
    # The wake-up follows the expiry in the same interrupt: at or after its stamp.
    i = _first_at_or_after(t.w_ts, irq_stamp)
    if i < 0 or t.w_ts[i] > back + t.slack:
        row["unmatched"] = "no wake-up"
        return row
    wake = int(t.w_ts[i])
    k = _first_at_or_after(t.s_ts, wake)
    if k < 0 or t.s_ts[k] > back + t.slack:
        if t.w_pid[i] == t.victim:  # woken in its own context: it never left the CPU
            row["unmatched"] = "late"
            return row
        # The first two instants stand; the switch is missing from the trace.
        row.update(unmatched="no switch", irq_ns=irq_ns, wake_ns=wake, event_ns=irq_ns - r, rel_ns=wake - irq_ns)
        return row
    inst = [r, irq_ns, wake, int(t.s_ts[k]), back]
    row.update(irq_ns=inst[1], wake_ns=inst[2], switch_ns=inst[3])
    for name, a, b in zip(DELTAS, inst, inst[1:]):
        row[f"{name}_ns"] = b - a
    return row


def _irq(t: _Trace, r: int):
    """(t_irq ns, its line's stamp) of the release at ``r``, or the reason it is missing."""
    if t.by_expiry:
        start = t.by_expiry.get(r)
        if start is None:
            return "no timer start"
        t0, h = start
        if t0 > r + t.slack:
            return "late"
        ts, now = t.by_timer.get(h, (np.empty(0, np.int64), None))
        j = _first_at_or_after(ts, t0)
        if j < 0:
            return "no timer expiry"
        return (int(now[j]) if np.isfinite(now[j]) else int(ts[j])), int(ts[j])
    # No hrtimer_start traced: the victim's wake-up names the CPU, and the timer is the last
    # hrtimer_wakeup expiry there at or before it, at or after the release.
    i = _first_at_or_after(t.w_ts, r - t.slack)
    if i < 0:
        return "no wake-up"
    cand = np.nonzero((t.e_cpu == t.w_cpu[i]) & (t.e_ts <= t.w_ts[i]) & (t.e_ts >= r - t.slack))[0]
    if cand.size == 0:
        return "no timer expiry"
    j = int(cand[-1])
    return (int(t.e_now[j]) if np.isfinite(t.e_now[j]) else int(t.e_ts[j])), int(t.e_ts[j])


def for_run(run_dir, meta, jobs: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`decompose` for one run directory's measured victim jobs (``jobs``), or None
    when the run has no trace or no victim pid in its outcome (``meta``: the run's
    RunOutcome, which the store reads)."""
    from pathlib import Path

    from .parse import parse_file, trace_file

    path = trace_file(Path(run_dir))
    if path is None:
        return None
    victim = meta.pids.victim if meta.pids else None
    if not victim:
        return None
    return decompose(parse_file(path), jobs, victim)
