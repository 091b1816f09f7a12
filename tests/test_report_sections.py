"""The single-run report says what its headers say, for every victim (issue 15, defects 7,
8, 9, 13): the Gantt chart gives the victim its own colour and legend entry; the platform
section names the kernel, the hypervisor, the missing PMU, skipped counters and migrated
jobs, which the counter statistics exclude; probes and system calls get their portfolio;
latency, task-set and AOCS victims get sections (and terminal summaries) of their own.

Results directories are planted (testing/synthetic.py plus the run.json fields the agent
writes), so every expected number is known; one test runs the agent and skips when not root.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from conftest import is_root, xtalk
from xtalk.outcome import load_outcome, parse_outcome, write_outcome
from xtalk.plan import Victim
from xtalk.report import figures as fg
from xtalk.results import tables as tb
from xtalk.report import victim_kinds as vk
from xtalk.report.build import build
from xtalk.store.frames import load
from xtalk.report.summary import write_summary
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.store import Results

#: An environment document as the agent writes it (every field the outcome model requires).
ENV = {"kernel": {"release": "6.1.0-test", "version": "#1 SMP PREEMPT_DYNAMIC", "machine": "x86_64", "cmdline": "quiet",
                  "config_available": False, "config": {}, "preempt_rt": False, "hz": 250, "rt_group_sched": False,
                  "isolcpus": None, "nohz_full": None, "sched_rt_runtime_us": 950000, "sched_rt_period_us": 1000000},
       "cpu": {"model": "Test CPU", "vendor": "TestVendor", "online": "0-1", "count": 2, "isolated": "", "topology": [],
               "caches": [], "numa": []},
       "memory_bytes": 1 << 33, "memory_available_bytes": 1 << 32,
       "clocksource": {"current": "tsc", "available": "tsc"},
       "virtualization": {"hypervisor": True, "vendor": "KVMKVMKVM", "container": False},
       "time_sync_services": [],
       "capabilities": {"pmu": {"core_pmu": None, "sysfs_events": None, "rdpmc": None, "perf_event_paranoid": 2,
                                "countable": ["task-clock"]},
                        "tracefs": {"mount": None, "events": None},
                        "cgroups": {"v1": [], "v2": [], "rt_group_scheduling": False},
                        "sched_deadline": True, "deadline_group_servers": {"available": False, "reason": "no patch"},
                        "resctrl": {"supported": False, "mount": None}},
       "agent_version": "0.1.0"}


def _patch_runs(root: Path, **fields) -> None:
    """Add run.json fields (those the agent writes) to every run of a planted directory;
    ``victim`` replaces fields of the plan's victim. Written through the outcome model, so a
    fixture the agent could not have written fails here."""
    for p in (root / "runs").glob("*/run.json"):
        meta = load_outcome(p.parent).to_dict()
        for k, v in fields.items():
            if k == "victim":
                meta["plan"]["victim"].update(v)
            else:
                meta[k] = v
        write_outcome(p.parent, parse_outcome(meta))


def _rewrite_jobs(root: Path, change) -> None:
    for p in (root / "runs").glob("*/jobs.parquet"):
        df = change(pd.read_parquet(p), p.parent.name)
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), p)


# --------------------------------------------------------------------------- defect 7: Gantt


def test_timeline_styles_reserve_the_victim_colour_and_never_repeat():
    names = [f"enemy e{i}" for i in range(70)] + ["victim"]
    st = fg.timeline_styles(names)
    assert st["victim"] == (fg.VICTIM_COLOR, "")
    others = [st[n] for n in names if n != "victim"]
    assert all(c != fg.VICTIM_COLOR for c, _ in others)
    assert len(set(others)) == len(others)  # 70 names: distinct colour or hatch each, far beyond 8
    assert len({c for c, _ in others[:len(fg.OTHER_COLORS)]}) == len(fg.OTHER_COLORS) >= 20


def _intervals(n_enemies: int) -> pd.DataFrame:
    rows = []
    for k in range(n_enemies):  # each enemy runs more often than the victim: the old legend dropped it
        for j in range(3):
            t = (k * 3 + j) * 10_000
            rows.append({"cpu": k % 2, "pid": 100 + k, "name": f"enemy e{k}", "kind": "process", "rel_start_ns": t,
                         "rel_end_ns": t + 8_000})
    rows.append({"cpu": 1, "pid": 4242, "name": "victim", "kind": "process", "rel_start_ns": 5_000, "rel_end_ns": 60_000})
    iv = pd.DataFrame(rows)
    iv.attrs.update(release_ns=0, start_ns=5_000, end_ns=60_000)
    return iv


def test_gantt_draws_the_victim_in_its_colour_first_in_the_legend():
    fig = fg.gantt(_intervals(12), "t")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "victim (victim)"
    faces = {tuple(np.round(c.get_facecolor()[0], 3)) for c in ax.collections if len(c.get_facecolor())}
    victim_rgba = tuple(np.round(np.array(fg.matplotlib.colors.to_rgba(fg.VICTIM_COLOR)), 3))
    assert victim_rgba in faces
    # 12 enemies + the victim: 13 distinct looks (the old palette wrapped after 8)
    looks = {(tuple(np.round(c.get_facecolor()[0], 3)), c.get_hatch()) for c in ax.collections if len(c.get_facecolor())}
    assert len(looks) == 13
    fg.plt.close(fig)


def test_gantt_legend_counts_names_beyond_its_length():
    fig = fg.gantt(_intervals(fg.LEGEND_NAMES + 5), "t")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == "victim (victim)" and labels[-1].startswith("+5 more")
    fg.plt.close(fig)


# --------------------------------------------------------------------------- defect 8: platform


@pytest.fixture(scope="module")
def platform_report(tmp_path_factory):
    root = write_results(tmp_path_factory.mktemp("plat") / "res",
                         [Scenario("solo"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.3)],
                         repetitions=2, jobs=200, counters=True)

    def plant(df, run):  # jobs 50..54 of every run migrate, with absurd page-fault counts
        df["ctr_zero"] = pd.array(np.zeros(len(df), dtype=np.int64), dtype="Int64")
        mig = df["job"].between(50, 54)
        df.loc[mig, "cpu_end"] = 0
        df.loc[mig, "ctr_page_faults"] = 10**9
        return df

    _rewrite_jobs(root, plant)
    _patch_runs(root, environment=ENV, counters={
        "events": ["task-clock", "cpu-clock", "page-faults", "zero"], "core_pmu": None, "read_with": "read(2)",
        "skipped": [{"event": "cache-misses", "reason": "no hardware PMU"}]})
    return build(root, csv=False, n_boot=200, svg=True)  # the tests read the figures' labels in the SVGs


def test_platform_section_names_kernel_vm_pmu_skipped_counters_and_migrations(platform_report):
    html = platform_report.read_text()
    assert "<h2>Platform</h2>" in html
    assert "6.1.0-test x86_64 (not PREEMPT_RT, HZ=250)" in html and "hypervisor KVMKVMKVM" in html
    assert "no hardware PMU" in html and "cache-misses (no hardware PMU)" in html
    assert "Migrated jobs (ended on another CPU than they started on): 20 of 792" in html  # 4 runs × 5, 198 measured each
    mig = pd.read_csv(platform_report.parent / "tables" / "migrations.csv")
    assert mig.migrated.tolist() == [10, 10]
    md = (platform_report.parent / "summary.md").read_text()
    assert "## Platform" in md and "KVMKVMKVM" in md


def test_counter_statistics_exclude_migrated_jobs(platform_report):
    cs = pd.read_csv(platform_report.parent / "tables" / "counters.csv")
    pf = cs[cs.counter == "ctr_page_faults"]
    assert (pf.worst < 10**6).all() and pf.migrated_excluded.eq(10).all()
    assert set(cs.unit[cs.counter == "ctr_task_clock"]) == {"ns"} and set(pf.unit) == {"faults"}
    data = load(platform_report.parent.parent)
    assert tb.counter_correlation(data).loc["ctr_page_faults", "ctr_page_faults"] == 1.0
    assert tb.counter_summary(data)["worst"].max() < 10**9


def test_constant_counters_are_explained_not_plotted_and_axes_have_units(platform_report):
    out = platform_report.parent
    figs = {p.stem for p in (out / "figures").glob("*.png")}
    assert "hist_ctr_zero" not in figs and "scatter_ctr_zero" not in figs and "hist_ctr_task_clock" in figs
    html = platform_report.read_text()
    assert "Constant counters, not plotted" in html and "zero = 0 events in every job" in html
    assert "r undefined" not in (out / "figures" / "scatter_ctr_task_clock.svg").read_text()
    assert "task_clock (ns per job)" in (out / "figures" / "hist_ctr_task_clock.svg").read_text()
    assert "page_faults (faults per job)" in (out / "figures" / "scatter_ctr_page_faults.svg").read_text()


def test_log_axes_are_labelled_in_plain_text(platform_report):
    """Log axes say 10⁰, 10¹… in Unicode superscripts (the labels matplotlib's mathtext would
    typeset, without its parser), whichever module drew the figure."""
    f = fg.PlainLogFormatter(10, labelOnlyBase=False)
    assert [f(x) for x in (1e-3, 1.0, 100.0, 0.2, 3e5)] == ["10⁻³", "10⁰", "10²", "2×10⁻¹", "3×10⁵"]
    for name in ("hist_exec_0", "ecdf_exec", "pwcet_0"):
        svg = (platform_report.parent / "figures" / f"{name}.svg").read_text()
        assert re.search("10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+", svg) and "mathdefault" not in svg, name


# --------------------------------------------------------------------------- defect 9: portfolio


def _probes(run: int, user_ns: list[int], calls: list[tuple[int, int]]) -> pd.DataFrame:
    rows, t = [], 1_000_000
    for d in user_ns:
        rows.append((7, "", 11, 1, 1, t, t + d))
        t += d + 5_000
    for pid, d in calls:
        rows.append((pid, "", 11, 1, 1, t, t + d))
        t += d + 2_000
    df = pd.DataFrame(rows, columns=["probe", "name", "tid", "cpu_begin", "cpu_end", "begin_ns", "end_ns"])
    df["duration_ns"] = df.end_ns - df.begin_ns
    df["migrated"] = df.cpu_begin != df.cpu_end
    return df


@pytest.fixture(scope="module")
def portfolio_report(tmp_path_factory):
    root = write_results(tmp_path_factory.mktemp("port") / "res", [Scenario("solo"), Scenario("pi", slowdown=1.2)],
                         repetitions=1, jobs=50)
    # solo: probe 7 lasts 50, 10, 20, 30, 40 µs (first 50: the warm-up one); pi: 100 µs each
    pq.write_table(pa.Table.from_pandas(_probes(0, [50_000, 10_000, 20_000, 30_000, 40_000],
                                                [(1001, 3_000), (1000, 2_000), (1008, 1_000_000)] * 4)),
                   root / "runs" / "0-solo-r0" / "probes.parquet")
    pq.write_table(pa.Table.from_pandas(_probes(1, [100_000] * 3, [(1001, 9_000)] * 6)),
                   root / "runs" / "1-pi-r0" / "probes.parquet")
    return build(root, csv=False, n_boot=200, svg=True)


def test_probe_histograms_with_markers(portfolio_report):
    out = portfolio_report.parent
    st = pd.read_csv(out / "tables" / "probe_statistics.csv")
    solo7 = st[(st.scenario == "solo") & (st.probe == 7)].iloc[0]
    assert (solo7.n, solo7.first_us, solo7.best_us, solo7.median_us, solo7.mean_us, solo7.worst_us) == (5, 50, 10, 30, 30, 50)
    assert solo7.p99_us == pytest.approx(49.6)
    assert set(st.name) == {"probe 7", "write", "read", "nanosleep"}
    assert set(st.kind[st.probe >= 1000]) == {"syscall"}
    svg = (out / "figures" / "probe_hist_7.svg").read_text()
    # One row per scenario with its own markers (they were pooled: "median 45 µs" of 8 samples).
    assert "solo (n=5)" in svg and "pi (n=3)" in svg
    for marker in ("best 10 µs", "median 30 µs", "first 50 µs", "worst 50 µs", "median 100 µs"):
        assert marker in svg, marker
    assert "median 45 µs" not in svg
    # A 1 ms call reads in ms, not as 1000 µs on a µs axis.
    assert "worst 1 ms" in (out / "figures" / "probe_hist_1008.svg").read_text()


def test_syscall_boxplots_and_timeline(portfolio_report):
    out = portfolio_report.parent
    figs = {p.stem for p in (out / "figures").glob("*.png")}
    assert {"syscall_box", "syscall_timeline", "probe_hist_1001", "probe_hist_1008"} <= figs
    box = (out / "figures" / "syscall_box.svg").read_text()
    assert "write · solo (n=4)" in box and "write · pi (n=6)" in box and "nanosleep · solo (n=4)" in box
    tl = (out / "figures" / "syscall_timeline.svg").read_text()
    assert "run 0-solo-r0" in tl and "probe 7" in tl and "nanosleep" in tl
    html = portfolio_report.read_text()
    assert "<h2>Probes and system calls</h2>" in html


def test_no_portfolio_without_probes(platform_report):
    assert "Probes and system calls" not in platform_report.read_text()


# --------------------------------------------------------------------------- defect 13: victim kinds


@pytest.fixture(scope="module")
def latency_root(tmp_path_factory):
    root = write_results(tmp_path_factory.mktemp("lat") / "res", [Scenario("solo"), Scenario("write")], repetitions=2,
                         jobs=300)

    def plant(df, run):  # latency 10 µs + (job mod 10) µs, +50 µs under the enemy; an empty job
        lat = 10_000 + (df["job"] % 10) * 1_000 + (50_000 if "write" in run else 0)
        df["wakeup_ns"] = df["release_ns"] + lat
        df["start_ns"] = df["wakeup_ns"] + 100
        df["end_ns"] = df["start_ns"] + 200
        df["exec_ns"] = df["end_ns"] - df["start_ns"]
        df["response_ns"] = df["end_ns"] - df["release_ns"]
        df["wakeup_latency_ns"] = lat
        df["missed"] = False
        return df

    _rewrite_jobs(root, plant)
    _patch_runs(root, victim={"body": {"kind": "latency"}, "period_ns": 1_000_000, "sched": {"policy": "fifo", "priority": 90}})
    return root


def test_latency_report_has_latency_section_not_execution_slowdown(latency_root):
    html_path = build(latency_root, csv=False, n_boot=200, svg=True)
    html = html_path.read_text()
    assert "<h2>Timer latency</h2>" in html
    for generic in ("Slowdown, noise floor, misses", "Distributions", "pWCET", "Per-job time series"):
        assert f"<h2>{generic}</h2>" not in html
    lt = pd.read_csv(html_path.parent / "tables" / "latency.csv")
    solo = lt[lt.scenario == "solo"].iloc[0]
    assert (solo["samples"], solo.min_us, solo.max_us, solo.avg_us) == (2 * 298, 10.0, 19.0, pytest.approx(14.5, abs=0.05))
    assert lt[lt.scenario == "write"].max_us.iloc[0] == 69.0
    v = pd.read_csv(html_path.parent / "tables" / "verdicts.csv")
    w = v[v.scenario == "write"].verdict.iloc[0]
    assert "wake-up latency p50" in w and "max 69.0 µs" in w and "exec median" not in w and "slowdown" not in w
    assert "latency_histogram" in {p.stem for p in (html_path.parent / "figures").glob("*.png")}
    svg = (html_path.parent / "figures" / "latency_histogram.svg").read_text()
    assert "samples (log)" in svg and "write (max 69 µs)" in svg
    md = (html_path.parent / "summary.md").read_text()
    assert "## Timer latency (µs)" in md and "Slowdown against solo" not in md


def test_latency_terminal_summary_shows_latency_not_slowdown(latency_root):
    buf = io.StringIO()
    write_summary(Results(latency_root), Console(file=buf, width=200))
    out = buf.getvalue()
    assert "timer latency" in out and "p99_us" in out and "slowdown median" not in out
    assert "timer latency" in (latency_root / "summary.md").read_text()


TASKS = [{"name": "fast", "period_ns": 10_000_000, "wcet_ns": 2_000_000},
         {"name": "mid", "period_ns": 20_000_000, "wcet_ns": 4_000_000},
         {"name": "slow", "period_ns": 40_000_000, "wcet_ns": 6_000_000}]


def _victim(**fields) -> Victim:
    return Victim.model_validate({"period_ns": 40_000_000, "jobs": 10, **fields})


def test_rta_bounds_of_the_rm_example():
    bounds, how = vk.rta_bounds(_victim(body={"kind": "taskset", "tasks": TASKS, "policy": "rm"},
                                        sched={"policy": "fifo", "priority": 80}, placement={"cpus": [1]}))
    assert bounds == {0: 2.0, 1: 6.0, 2: 14.0} and "on one CPU" in how  # seed 001 Table 4.1-style RTA by hand
    # explicit SCHED_FIFO priorities reverse the order: higher number, higher priority
    rev = [dict(t, priority=p) for t, p in zip(TASKS, (10, 20, 30))]
    bounds, _ = vk.rta_bounds(_victim(body={"kind": "taskset", "tasks": rev}, sched={"policy": "fifo", "priority": 80}))
    assert bounds[2] == 6.0 and bounds[1] == 10.0
    dl, how = vk.rta_bounds(_victim(body={"kind": "taskset", "tasks": TASKS, "policy": "deadline"}))
    assert dl == {0: 10.0, 1: 20.0, 2: 40.0} and "SCHED_DEADLINE" in how


@pytest.fixture(scope="module")
def taskset_root(tmp_path_factory):
    root = write_results(tmp_path_factory.mktemp("ts") / "res", [Scenario("solo"), Scenario("pi")], repetitions=1, jobs=40)

    def plant(df, run):  # records of 3 tasks; under pi the slow task responds in 16 ms (> its 14 ms bound)
        task = df["job"] % 3
        resp = np.select([task == 0, task == 1, task == 2], [1_800_000, 5_000_000, 16_000_000 if "pi" in run else 12_000_000])
        df["task"] = task.astype(np.int64)
        df["period_ns"] = df["deadline_ns"] = 40_000_000  # as the agent writes it: the hyperperiod
        df["start_ns"] = df["release_ns"] + 50_000
        df["end_ns"] = df["release_ns"] + resp
        df["exec_ns"] = df["end_ns"] - df["start_ns"]
        df["response_ns"] = df["end_ns"] - df["release_ns"]
        df["missed"] = ("pi" in run) & (task == 0) & (df["job"] == 30)  # the agent's per-task flag
        df["cpu_time_ns"] = np.select([task == 0, task == 1, task == 2], [1_500_000, 3_000_000, 7_000_000 if "pi" in run
                                                                            else 6_000_000])
        return df

    _rewrite_jobs(root, plant)
    _patch_runs(root, victim={"body": {"kind": "taskset", "tasks": TASKS, "policy": "rm"}, "period_ns": 40_000_000,
                              "sched": {"policy": "fifo", "priority": 80}, "placement": {"cpus": [1]}})
    return root


def test_taskset_report_is_per_task_beside_the_rta_bound(taskset_root):
    html_path = build(taskset_root, csv=False, n_boot=200)
    html = html_path.read_text()
    assert "<h2>Task set: per task</h2>" in html and "<h2>Slowdown, noise floor, misses</h2>" not in html
    t = pd.read_csv(html_path.parent / "tables" / "tasks.csv")
    assert len(t) == 6 and list(t[t.scenario == "solo"].name) == ["fast", "mid", "slow"]
    assert list(t.rta_bound_ms[:3]) == [2.0, 6.0, 14.0]
    assert t[t.scenario == "pi"].set_index("name").resp_max_ms["slow"] == 16.0
    assert list(t.within_bound) == [True, True, True, True, True, False]
    assert list(t.wcet_ms[:3]) == [2.0, 4.0, 6.0] and list(t.cpu_max_ms) == [1.5, 3.0, 6.0, 1.5, 3.0, 7.0]
    assert list(t.rta_measured_ms) == [1.5, 4.5, 12.0, 1.5, 4.5, 13.0]  # RTA by hand with the measured CPU times
    v = pd.read_csv(html_path.parent / "tables" / "verdicts.csv").set_index("scenario")
    assert v.status["pi"] == "DEADLINE MISSES, above RTA bound"  # the agent's flag, though 1.8 ms < the hyperperiod
    assert "slow: resp max 16.00 ms > bound 14.00 ms" in v.verdict["pi"] and "fast: resp max 1.80 ms ≤ bound 2.00 ms, 1/13 missed" in v.verdict["pi"]
    assert "fast: resp max 1.80 ms ≤ bound 2.00 ms" in v.verdict["solo"] and v.status["solo"] == "ok"
    assert "task_response" in {p.stem for p in (html_path.parent / "figures").glob("*.png")}


def test_taskset_terminal_summary_is_per_task(taskset_root):
    buf = io.StringIO()
    write_summary(Results(taskset_root), Console(file=buf, width=250))
    out = buf.getvalue()
    assert "per task" in out and "rta_bound_ms" in out and "slowdown median" not in out
    assert len(re.findall(r"\b(fast|mid|slow)\b", out)) == 6


def test_aocs_report_counts_steps_and_mismatches(tmp_path):
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("read")], repetitions=1, jobs=40)
    _patch_runs(root, victim={"body": {"kind": "aocs", "input": "aocs-in.bin", "expected": "aocs-out.bin"},
                             "period_ns": 1_000_000})
    (root / "runs" / "0-solo-r0" / "aocs.json").write_text(json.dumps({"compared": 800, "mismatches": 0,
                                                                       "first_mismatch_step": None}))
    (root / "runs" / "1-read-r0" / "aocs.json").write_text(json.dumps({"compared": 800, "mismatches": 3,
                                                                       "first_mismatch_step": 3120}))
    html = build(root, csv=False, n_boot=200).read_text()
    assert "<h2>AOCS outputs</h2>" in html and "<h2>Distributions</h2>" in html  # the step is the job: generic stats hold
    assert "1600 steps compared over 2 runs, 3 mismatches (runs 1-read-r0)" in html
    v = pd.read_csv(root / "report" / "tables" / "verdicts.csv").set_index("scenario")
    assert v.verdict["read"].endswith("800 AOCS steps compared, 3 mismatches")
    buf = io.StringIO()
    write_summary(Results(root), Console(file=buf, width=200))
    assert "slowdown median" in buf.getvalue() and "3 mismatches" in buf.getvalue()


def test_periodic_victim_keeps_the_generic_report(platform_report):
    html = platform_report.read_text()
    assert "<h2>Slowdown, noise floor, misses</h2>" in html and 'id="victim"' not in html


# --------------------------------------------------------------------------- on the agent


def test_latency_experiment_on_the_agent(tmp_path):
    """A short real latency run: the report's platform section names this kernel, and both
    the report and the terminal summary speak of latency."""
    if not is_root():
        pytest.skip("needs root: the latency victim runs SCHED_FIFO with locked memory")
    f = tmp_path / "lat.toml"
    f.write_text('name = "lat"\nrepetitions = 1\nsettle = "20ms"\n[victim]\nbody = "latency"\nperiod = "1ms"\njobs = 200\n'
                 'warmup_jobs = 5\ncpus = "last"\npolicy = "fifo"\npriority = 90\nlock_memory = true\n')
    r = xtalk("run", f, "--results", tmp_path / "res", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "timer latency" in r.stdout and "slowdown median" not in r.stdout
    (res,) = (tmp_path / "res").iterdir()
    r = xtalk("report", res, timeout=120)
    assert r.returncode == 0, r.stderr
    html = (res / "report" / "index.html").read_text()
    assert "<h2>Timer latency</h2>" in html and os.uname().release in html and "<h2>pWCET</h2>" not in html


def test_probe_portfolio_of_a_command_victim_on_the_agent(tmp_path):
    """The instrumented example under the preload library, run by the agent: the report
    shows its probes' histograms and the system calls' boxplots and timeline."""
    if not is_root():
        pytest.skip("needs root: the agent forks the victim and enemies and pins them")
    root = Path(__file__).resolve().parent.parent
    demo, preload = root / "build" / "probe_demo", root / "build" / "libxtalk_preload.so"
    if not (demo.exists() and preload.exists()):
        pytest.skip("build/probe_demo or build/libxtalk_preload.so missing: run `make setup`")
    f = tmp_path / "cmd.toml"
    f.write_text(f'name = "probes"\nrepetitions = 1\nsettle = "20ms"\n[victim]\nbody = "command"\n'
                 f'argv = ["{demo}", "40", "1"]\npreload = "{preload}"\ncpus = "last"\n')
    r = xtalk("run", f, "--results", tmp_path / "res", timeout=120)
    assert r.returncode == 0, r.stderr
    (res,) = (tmp_path / "res").iterdir()
    r = xtalk("report", res, "--no-csv", timeout=300)
    assert r.returncode == 0, r.stderr
    st = pd.read_csv(res / "report" / "tables" / "probe_statistics.csv")
    assert {"probe 1", "clock_nanosleep"} <= set(st.name) and (st.n > 0).all()
    assert (st.best_us <= st.median_us).all() and (st.median_us <= st.worst_us).all() and (st.p99_us <= st.worst_us).all()
    figs = {p.stem for p in (res / "report" / "figures").glob("*.png")}
    assert {"probe_hist_1", "syscall_box", "syscall_timeline"} <= figs


@pytest.mark.parametrize("values", [
    np.sort(np.random.default_rng(3).normal(2e5, 1e4, 20_000)) / 1e6,      # a sorted group, as the report passes it
    np.sort(np.random.default_rng(4).integers(0, 40, 5_000).astype(float)),  # many values on the edges
    np.sort(np.r_[np.random.default_rng(5).random(300), [np.nan] * 4]),      # NaN sorted last
    np.random.default_rng(6).random(300),                                    # not sorted
    np.full(5, 3.0),                                                         # one value
])
def test_histogram_of_sorted_values_draws_the_bars_ax_hist_draws(values):
    import matplotlib.pyplot as plt

    for bins in (10, 120, 200):
        fig, (mine, theirs) = plt.subplots(1, 2)
        fg._hist(mine, values, bins)
        theirs.hist(values, bins=bins)
        if mine.patches:  # not sorted: ax.hist itself
            drawn = [p.get_patch_transform().transform_path(p.get_path()).vertices for p in mine.patches]
        else:  # sorted: one collection of the same rectangles
            (bars,) = mine.collections
            drawn = [path.vertices for path in bars.get_paths()]
        theirs_drawn = [p.get_patch_transform().transform_path(p.get_path()).vertices for p in theirs.patches]
        assert len(drawn) == len(theirs_drawn) and all(np.array_equal(a, b) for a, b in zip(drawn, theirs_drawn))
        assert mine.get_xlim() == theirs.get_xlim() and mine.get_ylim() == theirs.get_ylim()
        plt.close(fig)


@pytest.mark.parametrize("log", [False, True])
def test_histogram_of_sorted_values_has_ax_hists_pixels(log):
    """The collection of bars is drawn as ax.hist's bars are, pixel for pixel (a log count
    axis as the report's figures have, and a linear one)."""
    import matplotlib.pyplot as plt

    values = np.sort(np.random.default_rng(8).lognormal(0, 0.6, 30_000))
    pixels = []
    for draw in (lambda ax: fg._hist(ax, values, 150), lambda ax: ax.hist(values, bins=150, color="#8ab6d6", edgecolor="none")):
        fig, ax = plt.subplots(figsize=(4, 2.5))
        draw(ax)
        if log:
            ax.set_yscale("log")
        fig.canvas.draw()
        pixels.append(np.asarray(fig.canvas.buffer_rgba()).copy())
        plt.close(fig)
    assert np.array_equal(*pixels)


def test_quantiles_in_ms_are_those_of_the_converted_values_bit_for_bit():
    from xtalk.analysis import stats as st

    v = np.sort(np.random.default_rng(7).normal(2e5, 1e4, 10_001))
    for qs in ([0.01, 0.25, 0.5, 0.75, 0.99], np.linspace(0, 1, 2000), [0.0, 1.0]):
        assert np.array_equal(fg._ms_quantiles(v, qs), st.sorted_quantiles(v / 1e6, qs))
