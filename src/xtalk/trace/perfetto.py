"""Export a run as a Perfetto trace (protobuf, the format ui.perfetto.dev and trace_processor
read natively), built with the `perfetto` package's trace protos.

- The kernel's events go in as ftrace events, one FtraceEventBundle per CPU: sched_switch,
  sched_wakeup/sched_waking, sched_migrate_task, sched_process_fork, irq_handler_entry/exit and
  softirq_entry/exit. Perfetto derives the CPU tracks, thread states and wake-up arrows (its
  `sched`, `thread_state` tables) from them itself.
- A ProcessTree names every task the trace saw (its last comm), and the victim's and enemies'
  processes by their xtalk names.
- The victim's jobs are slices on a "jobs" track under the victim's process, a missed job
  named so and flagged (a warm-up job too); releases and deadlines are instants on tracks of their own; execution
  time and lateness are counter tracks (one sample per job, at its end).

Timestamps are the run's CLOCK_MONOTONIC ns (trace_clock mono, the job records' clock),
written as the trace's default clock so the two line up without conversion.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from .. import safepath

SEQ = 1  # the one packet sequence of the track events
TE = pb.TrackEvent

# sched_switch's prev_state as the kernel (4.14 on) reports it: TASK_REPORT bits, and
# TASK_REPORT_MAX for a preempted task (printed "R+"). Perfetto decodes these bits.
_STATE_BITS = {"R": 0x0, "S": 0x1, "D": 0x2, "T": 0x4, "t": 0x8, "X": 0x10, "Z": 0x20, "P": 0x40, "I": 0x80}
_PREEMPTED = 0x100


def prev_state(text: str) -> int:
    """The kernel's prev_state value for its text rendering ("S", "R+", "D|W"): unknown letters
    count for nothing (the task is then read as running)."""
    text = str(text or "R")
    bits = 0
    for part in text.rstrip("+").split("|"):
        bits |= _STATE_BITS.get(part[:1], 0)
    return bits | (_PREEMPTED if text.endswith("+") else 0)


def _i(v, default: int = 0) -> int:
    return default if v is None or pd.isna(v) else int(v)


def _s(v) -> str:
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


# The fields without which an event says nothing true (a line cut short parses without them).
_NEEDS = {"sched_switch": ("prev_pid", "next_pid"), "sched_wakeup": ("target_pid",), "sched_waking": ("target_pid",),
          "sched_migrate_task": ("target_pid", "orig_cpu", "dest_cpu"), "sched_process_fork": ("parent_pid", "child_pid"),
          "irq_handler_entry": ("irq",), "irq_handler_exit": ("irq",), "softirq_entry": ("vec",), "softirq_exit": ("vec",)}


def _fill(ev: pb.FtraceEvent, r) -> bool:
    """Set the ftrace event's payload from row `r`; False for an event Perfetto is not given
    (another kind, or one whose line was damaged: its fields did not parse)."""
    e = r.event
    needs = _NEEDS.get(e)
    if needs is None or any(pd.isna(getattr(r, f)) for f in needs):
        return False
    if e == "sched_switch":
        ev.sched_switch.prev_comm = _s(r.prev_comm)
        ev.sched_switch.prev_pid = _i(r.prev_pid)
        ev.sched_switch.prev_prio = _i(getattr(r, "prev_prio", None))
        ev.sched_switch.prev_state = prev_state(r.prev_state)
        ev.sched_switch.next_comm = _s(r.next_comm)
        ev.sched_switch.next_pid = _i(r.next_pid)
        ev.sched_switch.next_prio = _i(getattr(r, "next_prio", None))
    elif e in ("sched_wakeup", "sched_waking"):
        w = ev.sched_wakeup if e == "sched_wakeup" else ev.sched_waking
        w.comm, w.pid, w.prio, w.success = _s(r.target_comm), _i(r.target_pid), _i(getattr(r, "prio", None)), 1
        w.target_cpu = _i(r.target_cpu)
    elif e == "sched_migrate_task":
        m = ev.sched_migrate_task
        m.comm, m.pid, m.prio = _s(r.target_comm), _i(r.target_pid), _i(getattr(r, "prio", None))
        m.orig_cpu, m.dest_cpu = _i(r.orig_cpu), _i(r.dest_cpu)
    elif e == "sched_process_fork":
        f = ev.sched_process_fork
        f.parent_comm, f.parent_pid, f.child_comm, f.child_pid = _s(r.parent_comm), _i(r.parent_pid), _s(r.child_comm), _i(r.child_pid)
    elif e == "irq_handler_entry":
        ev.irq_handler_entry.irq, ev.irq_handler_entry.name = _i(r.irq), _s(r.name)
    elif e == "irq_handler_exit":
        ev.irq_handler_exit.irq, ev.irq_handler_exit.ret = _i(r.irq), 1 if _s(getattr(r, "ret", "")) == "handled" else 0
    elif e in ("softirq_entry", "softirq_exit"):
        (ev.softirq_entry if e == "softirq_entry" else ev.softirq_exit).vec = _i(r.vec)
    else:
        return False
    return True


_SCHED_COLS = ["prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid", "target_comm", "target_pid", "target_cpu",
               "orig_cpu", "dest_cpu", "parent_comm", "parent_pid", "child_comm", "child_pid", "irq", "name", "vec"]


def _ftrace(builder: TraceProtoBuilder, events: pd.DataFrame) -> None:
    """One FtraceEventBundle per CPU, its events in time order."""
    if events.empty:
        return
    ev = events.copy()
    for c in _SCHED_COLS:
        if c not in ev:
            ev[c] = None
    for cpu, g in ev.groupby("cpu", sort=True):
        bundle = builder.add_packet().ftrace_events
        bundle.cpu = int(cpu)
        for r in g.sort_values("ts_ns", kind="stable").itertuples():
            fe = pb.FtraceEvent(timestamp=int(r.ts_ns), pid=int(r.pid))
            if _fill(fe, r):
                bundle.event.append(fe)


def task_names(events: pd.DataFrame) -> dict[int, str]:
    """tid -> the last comm the trace gave it (line contexts, switch and wake-up fields); the
    idle task (0) left out."""
    parts = [events[["ts_ns", "pid", "comm"]].rename(columns={"comm": "name"})]
    for pid, comm in (("prev_pid", "prev_comm"), ("next_pid", "next_comm"), ("target_pid", "target_comm"),
                      ("parent_pid", "parent_comm"), ("child_pid", "child_comm")):
        if pid in events and comm in events:
            parts.append(events[["ts_ns", pid, comm]].rename(columns={pid: "pid", comm: "name"}))
    df = pd.concat(parts, ignore_index=True).dropna()
    df = df[df.pid.astype("int64") > 0].sort_values("ts_ns", kind="stable")
    return {int(p): str(n) for p, n in zip(df.pid, df.name)}


def _process_tree(builder: TraceProtoBuilder, names: dict[int, str], labels: dict[int, str],
                  threads_of: dict[int, int]) -> None:
    """Processes for the pids xtalk started (named by role) and a named thread for every tid."""
    tree = builder.add_packet().process_tree
    for pid, label in sorted(labels.items()):
        comm = names.get(pid)
        tree.processes.add(pid=int(pid), cmdline=[f"{label} ({comm})" if comm else label])
    for tid, name in sorted(names.items()):
        t = tree.threads.add(tid=tid, name=name)
        tgid = threads_of.get(tid, tid if tid in labels else None)
        if tgid is not None:
            t.tgid = tgid


class _Tracks:
    """Track descriptors and events on the single track-event sequence."""

    def __init__(self, builder: TraceProtoBuilder):
        self.b, self.first, self.next_uuid = builder, True, 1

    def packet(self, ts: int | None = None) -> pb.TracePacket:
        p = self.b.add_packet()
        p.trusted_packet_sequence_id = SEQ
        if self.first:
            p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        if ts is not None:
            p.timestamp = int(ts)
        return p

    def track(self, name: str, parent: int | None = None, pid: int | None = None, counter_unit: int | None = None) -> int:
        uuid, self.next_uuid = self.next_uuid, self.next_uuid + 1
        d = self.packet().track_descriptor
        d.uuid = uuid
        if pid is not None:
            d.process.pid, d.process.process_name = int(pid), name
        else:
            d.name = name
        if parent is not None:
            d.parent_uuid = parent
        if counter_unit is not None:
            d.counter.unit = counter_unit
        return uuid

    def event(self, track: int, ts: int, kind: int, name: str | None = None, **args) -> pb.TrackEvent:
        te = self.packet(ts).track_event
        te.track_uuid, te.type = track, kind
        if name is not None:
            te.name = name
        for k, v in args.items():
            a = te.debug_annotations.add(name=k)
            if isinstance(v, bool):
                a.bool_value = v
            else:
                a.int_value = int(v)
        return te

    def counter(self, track: int, ts: int, value: int) -> None:
        self.packet(ts).track_event.MergeFrom(TE(track_uuid=track, type=TE.TYPE_COUNTER, counter_value=int(value)))


def _deadlines(jobs: pd.DataFrame) -> pd.Series | None:
    """Each job's absolute deadline (release + relative deadline, else + period), None without one."""
    for col in ("deadline_ns", "period_ns"):
        if col in jobs and (jobs[col].fillna(0) > 0).all():
            return jobs.release_ns.astype("int64") + jobs[col].astype("int64")
    return None


def _jobs(tracks: _Tracks, jobs: pd.DataFrame, victim: int | None, victim_name: str) -> None:
    """The victim's jobs, releases, deadlines and the two counters, under the victim's process."""
    root = tracks.track(victim_name, pid=victim) if victim else None
    job_t = tracks.track("jobs", parent=root)
    rel_t = tracks.track("releases", parent=root)
    dl_t = tracks.track("deadlines", parent=root)
    exec_t = tracks.track("execution time", parent=root, counter_unit=pb.CounterDescriptor.UNIT_TIME_NS)
    deadline = _deadlines(jobs)
    late_t = tracks.track("lateness", parent=root, counter_unit=pb.CounterDescriptor.UNIT_TIME_NS) if deadline is not None else None
    for i, j in enumerate(jobs.itertuples()):
        missed, warmup = bool(getattr(j, "missed", False)), bool(getattr(j, "warmup", False))
        tracks.event(rel_t, j.release_ns, TE.TYPE_INSTANT, f"release {j.job}")
        tracks.event(job_t, j.start_ns, TE.TYPE_SLICE_BEGIN, f"job {j.job}" + (" MISSED" if missed else "") + (" (warm-up)" if warmup else ""),
                     job=j.job, exec_ns=j.exec_ns, response_ns=j.response_ns, missed=missed, warmup=warmup,
                     cpu=_i(getattr(j, "cpu_start", None), -1))
        tracks.event(job_t, j.end_ns, TE.TYPE_SLICE_END)
        tracks.counter(exec_t, j.end_ns, j.exec_ns)
        if deadline is not None:
            d = int(deadline.iloc[i])
            tracks.event(dl_t, d, TE.TYPE_INSTANT, f"deadline {j.job}" + (" missed" if missed else ""), missed=missed)
            tracks.counter(late_t, j.end_ns, int(j.end_ns) - d)


def build(events: pd.DataFrame, jobs: pd.DataFrame, labels: dict[int, str], victim: int | None = None,
          threads_of: dict[int, int] | None = None) -> bytes:
    """The serialized trace. `labels`: pid -> xtalk name (trace/run.py `labels`); `victim`: the
    victim's pid (its process carries the job tracks); `threads_of`: tid -> tgid where known."""
    builder = TraceProtoBuilder()
    names = task_names(events) if not events.empty else {}
    for pid, label in labels.items():
        names.setdefault(int(pid), label)
    _process_tree(builder, names, labels, threads_of or {})
    _ftrace(builder, events)
    if len(jobs):
        _jobs(_Tracks(builder), jobs.sort_values("start_ns", kind="stable"), victim, labels.get(victim, "victim"))
    return builder.serialize()


def write(events: pd.DataFrame, jobs: pd.DataFrame, labels: dict[int, str], path: Path, victim: int | None = None,
          threads_of: dict[int, int] | None = None) -> Path:
    """Write the trace (see `build`) to `path`, not following links."""
    safepath.write_bytes(path, build(events, jobs, labels, victim, threads_of))
    return Path(path)
