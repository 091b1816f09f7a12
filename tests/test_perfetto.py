"""`xtalk perfetto`: the Perfetto protobuf export, decoded with Perfetto's own trace protos.
A recorded kernel trace (tests/fixtures/trace_sample.txt, two CPUs) with jobs at the victim's
wake-ups, one of them planted late; a live traced run through the command line; the Chrome
JSON behind `--format json`; a bad `--format` refused."""

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from conftest import small_plan, write_plan, xtalk
from xtalk.store.jobs import victim_jobs
from xtalk.trace import perfetto
from xtalk.trace.parse import parse_file, parse_lines

FIXTURE = Path(__file__).parent / "fixtures" / "trace_sample.txt"
VICTIM = 19304
LATE = 3  # the planted job that ends past its deadline
DEADLINE_NS = 10_000_000
TE = pb.TrackEvent


def fixture_jobs(events: pd.DataFrame) -> pd.DataFrame:
    """A job per wake-up of the victim in the recording: released 2 µs before it, running 5 ms,
    job LATE 12 ms (past its 10 ms deadline)."""
    wakes = events[(events.event == "sched_wakeup") & (events.target_pid == VICTIM)].ts_ns.astype("int64").tolist()
    rows = []
    for k, w in enumerate(wakes):
        exec_ns = 12_000_000 if k == LATE else 5_000_000
        rows.append({"job": k, "release_ns": w - 2_000, "start_ns": w, "end_ns": w + exec_ns, "exec_ns": exec_ns,
                     "response_ns": exec_ns + 2_000, "cpu_start": 1, "missed": exec_ns + 2_000 > DEADLINE_NS,
                     "deadline_ns": DEADLINE_NS, "period_ns": 20_000_000})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def decoded():
    events = parse_file(FIXTURE)
    jobs = fixture_jobs(events)
    trace = pb.Trace.FromString(perfetto.build(events, jobs, {VICTIM: "victim", 19303: "enemy spin@0"}, victim=VICTIM))
    return events, jobs, trace


def track_events(trace):
    names = {p.track_descriptor.uuid: p.track_descriptor.name or p.track_descriptor.process.process_name
             for p in trace.packet if p.HasField("track_descriptor")}
    return names, [(names[p.track_event.track_uuid], p.timestamp, p.track_event) for p in trace.packet if p.HasField("track_event")]


def test_kernel_events_are_ftrace_bundles_for_every_cpu(decoded):
    events, _, trace = decoded
    bundles = [p.ftrace_events for p in trace.packet if p.HasField("ftrace_events")]
    assert sorted(b.cpu for b in bundles) == sorted(events.cpu.unique()) == [0, 1]
    by_kind = {}
    for b in bundles:
        assert [e.timestamp for e in b.event] == sorted(e.timestamp for e in b.event)
        for e in b.event:
            by_kind.setdefault(e.WhichOneof("event"), []).append((b.cpu, e))
    for kind in ("sched_switch", "sched_wakeup", "softirq_entry", "softirq_exit"):
        assert len(by_kind[kind]) == int((events.event == kind).sum()), kind
    # every CPU of the capture has its scheduler events (in this recording the victim spins
    # on CPU 1 between its wake-ups: CPU 1 has wake-ups, CPU 0 the switches)
    assert {cpu for cpu, _ in by_kind["sched_switch"] + by_kind["sched_wakeup"]} == {0, 1}
    assert {cpu for cpu, _ in by_kind["sched_switch"]} == {0}
    states = [e.sched_switch.prev_state for _, e in by_kind["sched_switch"]]
    assert states.count(1) == 13 and states.count(0) == 48  # S and R in the recording
    first = events[events.event == "sched_switch"].iloc[0]
    sw = next(e for _, e in by_kind["sched_switch"] if e.timestamp == first.ts_ns)
    assert (sw.sched_switch.prev_pid, sw.sched_switch.next_comm, sw.pid) == (first.prev_pid, first.next_comm, first.pid)
    wake = next(e for _, e in by_kind["sched_wakeup"] if e.sched_wakeup.pid == VICTIM)
    assert wake.sched_wakeup.comm == "xt-victim" and wake.sched_wakeup.prio == 19 and wake.sched_wakeup.target_cpu == 1


def test_every_task_is_named_and_xtalk_processes_by_role(decoded):
    events, _, trace = decoded
    tree = next(p.process_tree for p in trace.packet if p.HasField("process_tree"))
    threads = {t.tid: t for t in tree.threads}
    seen = set(events.pid) | set(events.next_pid.dropna()) | set(events.prev_pid.dropna()) | set(events.target_pid.dropna())
    assert {int(p) for p in seen if p > 0} == set(threads)
    assert all(t.name for t in threads.values())
    assert threads[12510].name == "memfd:sealed-91" and threads[VICTIM].name == "xt-victim"
    assert threads[VICTIM].tgid == VICTIM
    procs = {p.pid: list(p.cmdline) for p in tree.processes}
    assert procs == {VICTIM: ["victim (xt-victim)"], 19303: ["enemy spin@0 (xt-enemy-0)"]}


def test_jobs_are_slices_with_release_and_deadline_instants_and_counters(decoded):
    _, jobs, trace = decoded
    names, evs = track_events(trace)
    assert {"victim", "jobs", "releases", "deadlines", "execution time", "lateness"} <= set(names.values())
    seq = [p for p in trace.packet if p.HasField("track_event") or p.HasField("track_descriptor")]
    assert seq[0].sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    assert all(p.trusted_packet_sequence_id == perfetto.SEQ for p in seq)
    begins = [(ts, e) for t, ts, e in evs if t == "jobs" and e.type == TE.TYPE_SLICE_BEGIN]
    ends = [ts for t, ts, e in evs if t == "jobs" and e.type == TE.TYPE_SLICE_END]
    assert [ts for ts, _ in begins] == jobs.start_ns.tolist() and ends == jobs.end_ns.tolist()
    missed = [e.name for _, e in begins if any(a.name == "missed" and a.bool_value for a in e.debug_annotations)]
    assert missed == [f"job {LATE} MISSED"]
    releases = [(ts, e.name) for t, ts, e in evs if t == "releases" and e.type == TE.TYPE_INSTANT]
    assert releases == [(r, f"release {k}") for k, r in zip(jobs.job, jobs.release_ns)]
    deadlines = [(ts, e.name) for t, ts, e in evs if t == "deadlines" and e.type == TE.TYPE_INSTANT]
    assert [ts for ts, _ in deadlines] == (jobs.release_ns + DEADLINE_NS).tolist()
    assert [n for _, n in deadlines if n.endswith("missed")] == [f"deadline {LATE} missed"]
    counters = {name: [(ts, e.counter_value) for t, ts, e in evs if t == name and e.type == TE.TYPE_COUNTER]
                for name in ("execution time", "lateness")}
    assert counters["execution time"] == list(zip(jobs.end_ns, jobs.exec_ns))
    late = [v for _, v in counters["lateness"]]
    assert late[LATE] == 12_000_000 + 2_000 - DEADLINE_NS and all(v < 0 for k, v in enumerate(late) if k != LATE)
    units = {p.track_descriptor.name: p.track_descriptor.counter.unit for p in trace.packet
             if p.HasField("track_descriptor") and p.track_descriptor.HasField("counter")}
    assert units == {"execution time": pb.CounterDescriptor.UNIT_TIME_NS, "lateness": pb.CounterDescriptor.UNIT_TIME_NS}


def test_jobs_without_a_deadline_get_no_deadline_or_lateness(decoded):
    events, jobs, _ = decoded
    plain = jobs.drop(columns=["deadline_ns", "period_ns"]).assign(missed=False)
    names, evs = track_events(pb.Trace.FromString(perfetto.build(events, plain, {VICTIM: "victim"}, victim=VICTIM)))
    assert "lateness" not in names.values()
    assert not [e for t, _, e in evs if t == "deadlines"]
    assert not [e for t, _, e in evs if "MISSED" in e.name]


@pytest.mark.parametrize("text, value", [("S", 1), ("R", 0), ("R+", 0x100), ("D", 2), ("I", 0x80), ("D|K", 2), ("S+", 0x101)])
def test_prev_state_text_becomes_the_kernels_bits(text, value):
    assert perfetto.prev_state(text) == value


def test_unknown_format_is_refused(tmp_path):
    p = xtalk("perfetto", tmp_path, "--format", "ctf")
    assert p.returncode == 2 and "--format" in p.stderr and "proto" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_live_run_exports_both_formats(agent, tmp_path, facts, needs_tracefs):
    """A real traced run: the default export decodes and holds the victim's switches on its
    CPU and a slice per job of the job table; `--format json` still writes the Chrome JSON."""
    cpu = facts.online_cpus[-1]
    plan = small_plan(jobs=10, cpus=[cpu])
    plan["trace"] = {}
    run = tmp_path / "exp" / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", run], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    victim = json.loads((run / "run.json").read_text())["pids"]["victim"]
    p = xtalk("perfetto", run)
    assert p.returncode == 0, p.stderr
    trace = pb.Trace.FromString((run / "trace.pftrace").read_bytes())
    switches = [(b.cpu, e.sched_switch) for pk in trace.packet if pk.HasField("ftrace_events")
                for b in [pk.ftrace_events] for e in b.event if e.HasField("sched_switch")]
    assert any(c == cpu and victim in (s.prev_pid, s.next_pid) for c, s in switches)
    tree = next(pk.process_tree for pk in trace.packet if pk.HasField("process_tree"))
    assert any(t.tid == victim and t.name for t in tree.threads)
    _, evs = track_events(trace)
    jobs = victim_jobs(run)  # the measured jobs and the warm-up ones
    assert len(jobs) >= 10
    assert [ts for t, ts, e in evs if t == "jobs" and e.type == TE.TYPE_SLICE_BEGIN] == sorted(jobs.start_ns)
    # a miss is flagged where the job table says so, nowhere else
    assert sum("MISSED" in e.name for t, _, e in evs if t == "jobs") == int(jobs.missed.sum())
    p = xtalk("perfetto", run, "--format", "json", "-o", tmp_path / "t.json")
    assert p.returncode == 0, p.stderr
    assert any(e.get("cat") == "job" for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"])


def test_a_damaged_line_is_left_out_not_exported_as_pid_0(decoded):
    """A sched_switch line cut short parses without its fields: it is not exported (Perfetto
    would read it as a switch to and from the idle task), and the rest is."""
    events, jobs, _ = decoded
    lines = FIXTURE.read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if "sched_switch:" in ln)
    lines[cut] = lines[cut][:lines[cut].index("prev_pid")]
    damaged = parse_lines(lines)
    trace = pb.Trace.FromString(perfetto.build(damaged, jobs, {VICTIM: "victim"}, victim=VICTIM))
    switches = [e.sched_switch for p in trace.packet if p.HasField("ftrace_events") for e in p.ftrace_events.event
                if e.HasField("sched_switch")]
    assert len(switches) == int((events.event == "sched_switch").sum()) - 1
    assert all(s.prev_comm and s.next_comm for s in switches)


def test_known_threads_join_their_process(decoded):
    """`threads_of` (an attached process's threads, the measured thread of a traced victim)
    puts a thread in its process; tasks whose group the trace does not tell get none."""
    events, jobs, _ = decoded
    trace = pb.Trace.FromString(perfetto.build(events, jobs.assign(warmup=jobs.job == 0), {VICTIM: "victim"},
                                               victim=VICTIM, threads_of={12510: VICTIM}))
    tree = next(p.process_tree for p in trace.packet if p.HasField("process_tree"))
    groups = {t.tid: t.tgid for t in tree.threads if t.HasField("tgid")}
    assert groups == {VICTIM: VICTIM, 12510: VICTIM}
    _, evs = track_events(trace)
    assert [e.name for t, _, e in evs if t == "jobs" and "warm-up" in e.name] == ["job 0 (warm-up)"]
