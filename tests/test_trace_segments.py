"""User-defined trace segments (`[[trace.segment]]`, trace/segments.py): per-job lengths on
event tables with planted segments (exact ns), the execution time's statistics over them
(analysis/segments.py), and bad input refused by `xtalk plan` in one line, exit 2, before
anything starts (no agent: the tripwire would fail the test)."""

import numpy as np
import pandas as pd
import pytest

from conftest import xtalk
from xtalk.analysis.segments import segment_cells
from xtalk.plan import Segment, Trace
from xtalk.trace.parse import table
from xtalk.trace.segments import lengths

V, OTHER = 4242, 777  # the victim's pid, another task's
PERIOD = 1_000_000
T0 = 5_000_000_000


def waking(ts, target, waker=0, cpu=0):
    return {"ts_ns": ts, "cpu": cpu, "comm": "swapper/0" if not waker else "w", "pid": waker, "event": "sched_waking",
            "target_comm": "v" if target == V else "o", "target_pid": target, "prio": 120, "target_cpu": cpu}


def switch_in(ts, nxt, prev=0, cpu=0):
    return {"ts_ns": ts, "cpu": cpu, "comm": "x", "pid": prev, "event": "sched_switch", "prev_comm": "x", "prev_pid": prev,
            "prev_prio": 120, "prev_state": "S", "next_comm": "v" if nxt == V else "o", "next_pid": nxt, "next_prio": 120}


def irq(ts, number, name, cpu=0):
    return {"ts_ns": ts, "cpu": cpu, "comm": "v", "pid": V, "event": "irq_handler_entry", "irq": number, "name": name}


def seg(name, start, end, occurrence="first"):
    return Segment.model_validate({"name": name, "start": start, "end": end, "occurrence": occurrence})


WAKE = seg("wake", {"event": "sched:sched_waking", "where": {"pid": "$victim"}},
           {"event": "sched:sched_switch", "where": {"next_pid": "$victim"}})


def planted(n=6, lat=lambda k: 3_000 + 1_117 * k):
    """A periodic victim: job k released at T0 + k·P, woken 2 µs later, switched in lat(k) ns
    after the waking, ends 200 µs after its release; around it, another task's wake-ups and
    switch-ins that the filters must leave out."""
    rows, jobs = [], []
    for k in range(n):
        r = T0 + k * PERIOD
        rows += [waking(r + 500, OTHER), switch_in(r + 900, OTHER), waking(r + 2_000, V), switch_in(r + 2_000 + lat(k), V),
                 waking(r + 2_000 + lat(k) + 50, OTHER)]
        jobs.append({"job": k, "release_ns": r, "start_ns": r + 2_000 + lat(k) + 100, "end_ns": r + 200_000})
    return table(rows, 1), pd.DataFrame(jobs)


def test_planted_wakeup_latency_comes_out_exact():
    events, jobs = planted()
    got = lengths(events, jobs, V, [WAKE])
    assert list(got.columns) == ["job", "seg_wake_ns"]
    assert got["seg_wake_ns"].tolist() == [3_000 + 1_117 * k for k in range(6)]


def test_a_job_without_its_end_has_no_value_never_a_borrowed_pair():
    events, jobs = planted()
    # Job 2's switch-in is lost: its waking must not pair with job 3's switch-in.
    r2 = T0 + 2 * PERIOD
    events = table([r for r in events.to_dict("records")
                    if not (r["event"] == "sched_switch" and r["next_pid"] == V and r2 <= r["ts_ns"] < r2 + PERIOD)], 1)
    got = lengths(events, jobs, V, [WAKE])["seg_wake_ns"]
    assert got.isna().tolist() == [False, False, True, False, False, False]
    assert got[3] == 3_000 + 1_117 * 3


def test_nothing_planted_nothing_claimed():
    events, jobs = planted()
    none = seg("none", {"event": "sched:sched_waking", "where": {"pid": 999}}, {"event": "sched:sched_switch"})
    got = lengths(events, jobs, V, [none])
    assert got["seg_none_ns"].isna().all()
    assert lengths(table([], 1), jobs, V, [WAKE])["seg_wake_ns"].isna().all()


def irq_exit(ts, number, cpu=0):
    return {"ts_ns": ts, "cpu": cpu, "comm": "v", "pid": V, "event": "irq_handler_exit", "irq": number, "ret": "handled"}


def test_pairs_first_and_last_occurrence_and_field_filters():
    # Per job, three interrupts before the victim's wake-up: a disk's (irq 14, name "ata"), the
    # timer's (irq 11, "timer"), the disk's again; each handled in its own time.
    rows, jobs = [], []
    for k in range(4):
        r = T0 + k * PERIOD
        rows += [irq(r + 100, 14, "ata"), irq_exit(r + 110, 14), irq(r + 700 + k, 11, "timer"), irq_exit(r + 720 + 2 * k, 11),
                 irq(r + 1_500, 14, "ata"), irq_exit(r + 1_530, 14), waking(r + 2_000, V), switch_in(r + 9_000, V)]
        jobs.append({"job": k, "release_ns": r, "end_ns": r + 100_000})
    events, jobs = table(rows, 1), pd.DataFrame(jobs)
    to_wake = {"event": "sched_waking", "where": {"pid": "$victim"}}
    entry, leave = {"event": "irq:irq_handler_entry"}, {"event": "irq:irq_handler_exit"}
    segs = [seg("handler_first", entry, leave), seg("handler_last", entry, leave, "last"),
            # the interrupt that came last before the wake-up, not the job's first
            seg("irq_to_wake", entry, to_wake),
            seg("timer", {"event": "irq:irq_handler_entry", "where": {"irq": 11}}, to_wake),
            seg("timer_by_name", {"event": "irq:irq_handler_entry", "where": {"name": "timer"}}, to_wake),
            seg("timer_handler", {"event": "irq:irq_handler_entry", "where": {"irq": 11}},
                {"event": "irq:irq_handler_exit", "where": {"irq": 11}}),
            # logged in the victim's context (the interrupts here are), vs a switch logged by pid 0
            seg("own", {"event": "irq:irq_handler_entry", "victim": True},
                {"event": "sched:sched_switch", "victim": True})]
    got = lengths(events, jobs, V, segs)
    assert got["seg_handler_first_ns"].tolist() == [10] * 4
    assert got["seg_handler_last_ns"].tolist() == [30] * 4
    assert got["seg_irq_to_wake_ns"].tolist() == [500] * 4
    assert got["seg_timer_ns"].tolist() == [1_300 - k for k in range(4)]
    assert got["seg_timer_by_name_ns"].tolist() == got["seg_timer_ns"].tolist()
    assert got["seg_timer_handler_ns"].tolist() == [20 + k for k in range(4)]
    assert got["seg_own_ns"].isna().all()


def test_a_switch_in_after_a_preemption_is_no_wakeup():
    # In job 1 the victim is preempted and switched in again: that switch-in has no waking of
    # its own (the first switch-in came between), so it ends no segment, first or last.
    events, jobs = planted()
    r1 = T0 + PERIOD
    rows = events.to_dict("records") + [switch_in(r1 + 50_000, OTHER, prev=V), switch_in(r1 + 60_000, V, prev=OTHER)]
    last = seg("wake", WAKE.start.model_dump(), WAKE.end.model_dump(), "last")
    want = [3_000 + 1_117 * k for k in range(6)]
    assert lengths(table(rows, 1), jobs, V, [WAKE])["seg_wake_ns"].tolist() == want
    assert lengths(table(rows, 1), jobs, V, [last])["seg_wake_ns"].tolist() == want


def test_a_field_no_record_carries_is_said_and_matches_nothing():
    events, jobs = planted()
    notes: list[str] = []
    bad = seg("bad", {"event": "sched:sched_waking", "where": {"no_such_field": 1}}, {"event": "sched:sched_switch"})
    assert lengths(events, jobs, V, [bad], notes)["seg_bad_ns"].isna().all()
    assert len(notes) == 1 and "no_such_field" in notes[0] and "sched:sched_waking" in notes[0]


def test_a_pair_must_end_in_its_jobs_window():
    # The victim's switch-in comes after the next release: the job's window ends there (the
    # job itself ended before), so the pair is refused, not stretched over two jobs.
    rows = [waking(T0 + 2_000, V), switch_in(T0 + PERIOD + 10, V)]
    jobs = pd.DataFrame({"job": [0, 1], "release_ns": [T0, T0 + PERIOD], "end_ns": [T0 + 5_000, T0 + PERIOD + 9_000]})
    assert lengths(table(rows, 1), jobs, V, [WAKE])["seg_wake_ns"].isna().all()
    # A job that overruns the next release keeps its window to its own end.
    jobs.loc[0, "end_ns"] = T0 + PERIOD + 50
    assert lengths(table(rows, 1), jobs, V, [WAKE])["seg_wake_ns"].tolist()[0] == PERIOD + 10 - 2_000


def test_segment_statistics_are_the_execution_times():
    rng = np.random.default_rng(1)
    rows, runs = [], []
    for scen, scale in (("solo", 1.0), ("noisy", 2.0)):
        for rep in range(3):
            rid = f"{scen}-{rep}"
            runs.append({"run_id": rid, "scenario": scen, "configuration": "default", "status": "completed"})
            v = np.round(rng.uniform(1_000, 2_000, 50) * scale)
            v[:5] = np.nan  # five jobs of every run lack the segment
            rows.append(pd.DataFrame({"run_id": rid, "scenario": scen, "configuration": "default",
                                      "seg_wake_ns": pd.array(v, dtype="Float64")}))
    jobs = pd.concat(rows, ignore_index=True)
    got = segment_cells(jobs, pd.DataFrame(runs), n_boot=200)
    assert got[["scenario", "segment"]].values.tolist() == [["solo", "wake"], ["noisy", "wake"]]
    for scen, g in jobs.groupby("scenario"):
        row = got[got.scenario == scen].iloc[0]
        v = g["seg_wake_ns"].dropna().to_numpy(dtype=float)
        assert (row.jobs, row.missing) == (135, 15)
        assert (row.median_ns, row.p99_ns, row.max_ns) == (np.quantile(v, .5), np.quantile(v, .99), v.max())
    solo = jobs[jobs.scenario == "solo"]["seg_wake_ns"].dropna().to_numpy(dtype=float)
    noisy = got[got.scenario == "noisy"].iloc[0]
    noisy_v = jobs[jobs.scenario == "noisy"]["seg_wake_ns"].dropna().to_numpy(dtype=float)
    assert noisy.slowdown_median == pytest.approx(np.median(noisy_v) / np.median(solo))
    assert noisy.slowdown_median_lo <= noisy.slowdown_median <= noisy.slowdown_median_hi
    assert got[got.scenario == "solo"].iloc[0].slowdown_median == 1.0
    assert segment_cells(jobs.drop(columns="seg_wake_ns"), pd.DataFrame(runs)).empty


def test_the_plan_carries_segments_and_checks_their_events():
    t = Trace(events=["sched:sched_waking", "sched:sched_switch"], segments=[WAKE])
    assert Trace.model_validate_json(t.model_dump_json()).segments == [WAKE]
    with pytest.raises(ValueError, match=r"segments\[0\]\.end\.event: 'sched:sched_switch' is not traced"):
        Trace(events=["sched:sched_waking"], segments=[WAKE])


EXP = """name = "seg"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 10
[trace]
{events}
[[trace.segment]]
{segment}
"""


@pytest.mark.parametrize("events,segment,field,hint", [
    ('events = ["sched:sched_switch"]',
     'name = "wake"\nstart = { event = "sched:sched_waking" }\nend = { event = "sched:sched_switch" }',
     "trace.segment[0].start.event", "is not traced"),
    ("", 'name = "x"\nstart = { event = "sched:sched_waking" }\nend = { event = "no:such" }',
     "trace.segment[0].end.event", "is not traced"),
    ("", 'name = "Wake-up"\nstart = { event = "sched:sched_waking" }\nend = { event = "sched:sched_switch" }',
     "trace.segment[0].name", "lower-case letters"),
    ("", 'name = "w"\nstart = { event = "../../x" }\nend = { event = "sched:sched_switch" }',
     "trace.segment[0].start.event", "subsystem:event"),
    ("", 'name = "w"\nstart = { event = "sched:sched_waking", when = 1 }\nend = { event = "sched:sched_switch" }',
     "trace.segment[0].start.when", ""),
    ("", 'name = "w"\nstart = { event = "sched:sched_waking" }\nend = { event = "sched:sched_switch" }\noccurrence = "all"',
     "trace.segment[0].occurrence", "first"),
    ("", 'name = "w"\nstart = { event = "sched:sched_waking", where = { "a/b" = 1 } }\nend = { event = "sched:sched_switch" }',
     "trace.segment[0].start.where.a/b", "field of the event"),
])
def test_bad_segments_are_refused_in_one_line_naming_the_field(tmp_path, events, segment, field, hint):
    exp = tmp_path / "seg.toml"
    exp.write_text(EXP.format(events=events, segment=segment))
    out = xtalk("plan", exp, timeout=60)
    assert out.returncode == 2, out
    line = out.stderr.strip()
    assert "\n" not in line, line
    assert field in line and hint in line, line
    assert not (tmp_path / "results").exists()


def test_two_segments_with_one_name_are_refused(tmp_path):
    one = 'name = "w"\nstart = { event = "sched:sched_waking" }\nend = { event = "sched:sched_switch" }'
    exp = tmp_path / "seg.toml"
    exp.write_text(EXP.format(events="", segment=one + "\n[[trace.segment]]\n" + one))
    out = xtalk("plan", exp, timeout=60)
    assert out.returncode == 2 and "trace.segment[1].name: 'w' is given twice" in out.stderr, out.stderr


def test_a_traced_run_gets_its_segment_column_and_the_report_and_query_show_it(tmp_path):
    # Synthetic results (testing/synthetic.py): the first run of each scenario has a text trace in
    # which the victim is switched in 1 µs before each job's start and blocks ("S") 1 µs after
    # its end, preempted ("R+") inside its slow jobs. The planted segment: its switch-in out of
    # idle → its blocking switch-out, whatever preempted it in between.
    from xtalk.outcome import load_outcome, write_outcome
    from xtalk.results import tables as tb
    from xtalk.testing.synthetic import Scenario, write_results
    from xtalk.safepath import write_parquet
    from xtalk.trace.run import analyze
    import pyarrow as pa

    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("noisy", slowdown=1.5, spike_every=7)], repetitions=2,
                         jobs=40, trace=True)
    held = seg("held", {"event": "sched:sched_switch", "where": {"next_pid": "$victim", "prev_pid": 0}},
               {"event": "sched:sched_switch", "where": {"prev_pid": "$victim", "prev_state": "S"}})
    planted = {}
    for d in sorted((root / "runs").iterdir()):
        if not (d / "trace.txt").exists():
            continue
        meta = load_outcome(d)
        meta.plan.trace = Trace(events=["sched:sched_switch"], segments=[held])
        write_outcome(d, meta)
        jobs = pd.read_parquet(d / "jobs.parquet")
        metrics, _ = analyze(d, meta, jobs)
        # The text trace's stamps are whole µs (truncated by the synthetic writer).
        want = ((jobs.end_ns + 1_000) // 1_000 - (jobs.start_ns - 1_000) // 1_000) * 1_000
        assert metrics["seg_held_ns"].tolist() == want.tolist()
        write_parquet(pa.Table.from_pandas(jobs.merge(metrics[["job", "seg_held_ns"]], on="job"), preserve_index=False),
                      d / "jobs.parquet")
        planted[meta.plan.labels["scenario"]] = want[~jobs.warmup].to_numpy(dtype=float)
    table = tb.segments(tb.load(root), n_boot=200)
    assert table[["scenario", "segment", "jobs", "missing"]].values.tolist() == [["solo", "held", 38, 38],
                                                                                 ["noisy", "held", 38, 38]]
    for r in table.itertuples():
        assert r.median_ns == np.median(planted[r.scenario]) and r.max_ns == planted[r.scenario].max()
    out = xtalk("query", root, "SELECT scenario, jobs, median_ns FROM segments ORDER BY scenario", "--csv", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == [f"noisy,38,{np.median(planted['noisy'])}", f"solo,38,{np.median(planted['solo'])}"]
    out = xtalk("query", root, "SELECT count(seg_held_ns) AS n FROM jobs WHERE NOT warmup", "--csv", timeout=120)
    assert out.stdout.splitlines()[1:] == ["76"], out


def test_the_experiments_segments_go_into_every_runs_plan(tmp_path):
    from xtalk.config.experiment import load
    from xtalk.config.processes import trace_of

    exp = tmp_path / "seg.toml"
    exp.write_text(EXP.format(events="", segment='name = "wakeup"\nstart = { event = "sched:sched_waking", where = '
                                                 '{ pid = "$victim" } }\nend = { event = "sched:sched_switch", where = '
                                                 '{ next_pid = "$victim" } }\noccurrence = "last"'))
    t = trace_of(load(exp))
    assert t.segments == [seg("wakeup", {"event": "sched:sched_waking", "where": {"pid": "$victim"}},
                              {"event": "sched:sched_switch", "where": {"next_pid": "$victim"}}, "last")]
