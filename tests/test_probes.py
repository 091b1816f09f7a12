"""User probes: the ring under several writer threads (drops counted, never a stall, only
complete records read), the instrumented example run as a victim, the preload library's
syscall probes, and the probes' no-op behaviour outside xtalk."""

import json
import subprocess

import pandas as pd
import pytest

from conftest import ROOT, write_plan
from xtalk.store.jobs import convert_run
from xtalk.store.probes import read_probe_events


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    out = tmp_path_factory.mktemp("native")
    built = {}
    for name, src, extra in (("ring_writers", ROOT / "tests/native/ring_writers.c", ["-pthread"]),
                             ("probe_demo", ROOT / "examples/probes/probe_demo.c", ["-pthread"]),
                             ("libxtalk_preload.so", ROOT / "preload/xtalk_preload.c", ["-shared", "-fPIC", "-ldl"])):
        p = subprocess.run(["cc", "-O2", "-Wall", "-I", ROOT / "include", src, "-o", out / name, *extra], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        built[name] = out / name
    return built


def command_plan(argv, **body):
    return {"version": 1, "run_id": "p", "timeout_s": 60, "settle_ms": 10,
            "victim": {"body": {"kind": "command", "argv": [str(a) for a in argv], **body}, "period_ns": 30_000_000_000, "jobs": 1}}


def run(agent, tmp_path, plan):
    out = tmp_path / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True, timeout=120)
    return p, out


def test_ring_with_many_writers_keeps_every_probe(agent, tmp_path, native, last_cpu):
    plan = command_plan([native["ring_writers"], 4, 5000])
    plan["victim"]["placement"] = {"cpus": [last_cpu]}
    p, out = run(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["probes"]["records"] == 40_000 and meta["probes"]["dropped"] == 0
    ev = read_probe_events(out)
    assert len(ev) == 40_000
    assert (ev.cpu == last_cpu).all(), "each probe carries the CPU it ran on"
    per_thread = ev.groupby("tid").id.agg(["nunique", "count"])
    assert len(per_thread) == 4 and (per_thread["nunique"] == 1).all() and (per_thread["count"] == 10_000).all()
    # Each thread's probes alternate begin/end in time order.
    for _, g in ev.groupby("tid"):
        assert (g.kind.to_numpy()[::2] == "begin").all() and (g.kind.to_numpy()[1::2] == "end").all()


def test_full_ring_counts_drops_and_never_stalls(agent, tmp_path, native):
    p, out = run(agent, tmp_path, command_plan([native["ring_writers"], 4, 5000], probe_capacity=1000))
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["probes"]["records"] == 1000
    assert meta["probes"]["dropped"] == 40_000 - 1000
    assert len(read_probe_events(out)) == 1000


def test_instrumented_example_as_victim(agent, tmp_path, native):
    p, out = run(agent, tmp_path, command_plan([native["probe_demo"], 60, 2]))
    assert p.returncode == 0, p.stderr
    jobs = convert_run(out)
    assert len(jobs) == 1 and jobs.exec_ns.iloc[0] > 60 * 1_000_000 * 0.9  # 60 periods of 1 ms
    assert pd.isna(jobs.cpu_end.iloc[0]), "CPU at the end of a command is not read: missing, not -1 or 0"
    samples = pd.read_parquet(out / "probes.parquet")
    counts = samples.groupby("probe").size()
    assert counts[1] == 120 and counts[2] == 120
    assert (samples.duration_ns > 0).all()
    start, end = jobs.start_ns.iloc[0], jobs.end_ns.iloc[0]
    assert samples.begin_ns.min() >= start and samples.end_ns.max() <= end, "probes on the job time base"


def test_preload_probes_system_calls(agent, tmp_path, native):
    p, out = run(agent, tmp_path, command_plan([native["probe_demo"], 30, 1], preload=str(native["libxtalk_preload.so"])))
    assert p.returncode == 0, p.stderr
    convert_run(out)
    samples = pd.read_parquet(out / "probes.parquet")
    sleeps = samples[samples.name == "clock_nanosleep"]
    assert len(sleeps) == 30
    assert sleeps.duration_ns.median() > 100_000, "the sleeps are in the OS, not in the program's sections"


def test_probes_are_no_ops_outside_xtalk(native):
    p = subprocess.run([native["ring_writers"], "2", "1000"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "0"


def test_bad_command_is_refused(agent, tmp_path):
    p = subprocess.run([agent, "check", write_plan(tmp_path, command_plan(["/no/such/program"]))], capture_output=True, text=True)
    assert p.returncode == 2 and "victim.body.argv[0]" in p.stderr
    plan = command_plan(["true"])
    plan["victim"]["jobs"] = 5
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    assert p.returncode == 2 and "victim.jobs" in p.stderr


def test_failing_command_fails_the_run(agent, tmp_path):
    p, out = run(agent, tmp_path, command_plan(["false"]))
    meta = json.loads((out / "run.json").read_text())
    assert p.returncode == 1 and meta["status"] == "failed" and "status 1" in meta["reason"]
