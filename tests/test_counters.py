"""Per-job counters: software events are read around every job; hardware events the machine
lacks are refused with what it offers, or skipped (optional) with one note; no zero is
written for a value that was not read."""

import json
import subprocess

import numpy as np
import pandas as pd

from conftest import small_plan, write_plan
from xtalk import store
from xtalk.store.jobs import counter_column, read_counter_log


def has_hardware_pmu(agent) -> bool:
    env = json.loads(subprocess.run([agent, "sysinfo"], capture_output=True, text=True).stdout)
    return bool(env.get("capabilities", {}).get("pmu", {}).get("core_pmu"))


def test_software_counters_per_job(agent, tmp_path):
    plan = small_plan(jobs=30, counters=[{"event": "task-clock"}, {"event": "page-faults"},
                                         {"event": "cycles", "optional": True}])
    run = tmp_path / "exp" / "runs" / "r0"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", run], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    meta = json.loads((run / "run.json").read_text())
    jobs = store.open(tmp_path / "exp").jobs()
    assert len(jobs) == 30
    # task-clock over the job is the job's CPU time, within the cost of the reads around it;
    # on a loaded host an interrupt between the two reads may put one job outside that.
    tc = jobs["ctr_task_clock"].astype(float)
    close = abs(tc - jobs.cpu_time_ns) < 0.2 * jobs.cpu_time_ns + 20_000
    assert (tc > 0).all() and close.mean() >= 0.9, pd.DataFrame({"task_clock": tc, "cpu_time": jobs.cpu_time_ns})[~close]
    assert (jobs.ctr_running_ns > 0).all() and (jobs.ctr_enabled_ns >= jobs.ctr_running_ns).all()
    assert meta["counters"]["read_with"] == "read(2)", "software events have no rdpmc path"
    if "cycles" in meta["counters"]["events"]:
        assert (jobs.ctr_cycles.astype(float) > 0).all()
    else:
        assert "ctr_cycles" not in jobs.columns, "a counter not read must not appear as zeros"
        assert any("cycles" in n for n in meta["notes"]), meta["notes"]


def test_missing_hardware_event_is_refused_with_the_offer(agent, tmp_path):
    if has_hardware_pmu(agent):
        import pytest
        pytest.skip("this machine has a hardware PMU: cycles is available")
    plan = small_plan(counters=[{"event": "cycles"}])
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "victim.counters[0].event" in p.stderr and "no hardware PMU" in p.stderr and "task-clock" in p.stderr


def test_unknown_and_duplicate_events(agent, tmp_path):
    for counters, needle in (([{"event": "warp-drive-misses"}], "unknown event"),
                             ([{"event": "task-clock"}, {"event": "task-clock"}], "listed twice")):
        p = subprocess.run([agent, "check", write_plan(tmp_path, small_plan(counters=counters))], capture_output=True, text=True)
        assert p.returncode == 2 and needle in p.stderr, p.stderr


def test_counter_log_reader_leaves_unread_values_missing(tmp_path):
    n = 2
    head = bytearray(64)
    head[:8] = b"XTCNTR01"
    head[8:12] = (1).to_bytes(4, "little")
    head[12:16] = (24 + 8 * n).to_bytes(4, "little")
    head[16:24] = (3).to_bytes(8, "little")
    head[24:32] = (2).to_bytes(8, "little")  # two published records of three
    head[32:36] = n.to_bytes(4, "little")
    recs = np.array([[0, 100, 100, 7, 9], [1, 100, 0, 0, 0], [2, 5, 5, 5, 5]], dtype="<u8")
    f = tmp_path / "counters.bin"
    f.write_bytes(bytes(head) + recs.tobytes())
    df = read_counter_log(f, ["task-clock", "LLC-load-misses"])
    assert list(df.job) == [0, 1]
    assert df[counter_column("task-clock")].tolist()[0] == 7
    assert pd.isna(df[counter_column("LLC-load-misses")].iloc[1]), "running 0: not read, not zero"
