"""The latency victim (cyclictest's measurement): an empty job on absolute releases, every
sample recorded; `xtalk summary --view latency` gives min / avg / max, percentiles and the 1 µs histogram."""

import subprocess

import numpy as np
import pandas as pd

from conftest import fifo_or_other, is_root, write_plan, xtalk
from xtalk.report.latency import histogram, latency_table
from xtalk.store.jobs import read_job_log


def test_latency_victim_records_every_sample(agent, tmp_path, last_cpu):
    sched = fifo_or_other(90)
    plan = {"version": 1, "run_id": "lat", "timeout_s": 30, "settle_ms": 20,
            "victim": {"body": {"kind": "latency"}, "period_ns": 500_000, "jobs": 1000, "warmup_jobs": 5,
                       "placement": {"cpus": [last_cpu]}, "sched": sched, "lock_memory": is_root()}}
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", tmp_path / "r"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    j = read_job_log(tmp_path / "r" / "jobs.bin")
    assert len(j) == 1005 and (np.diff(j.release_ns) == 500_000).all()
    assert (j.wakeup_latency_ns > 0).all(), "a timer never fires early"
    assert j.exec_ns.median() < 20_000, "the job body does no work"


def test_table_and_histogram_from_known_samples():
    lat_us = np.array([3, 3, 4, 10, 5, 3], dtype=np.int64)
    jobs = pd.DataFrame({"scenario": ["a"] * 4 + ["b"] * 2, "run_id": ["r1", "r1", "r2", "r2", "r3", "r3"],
                         "wakeup_latency_ns": lat_us * 1000 + 500})
    t = latency_table(jobs).set_index("scenario")
    assert t.loc["a", "samples"] == 4 and t.loc["a", "runs"] == 2
    assert t.loc["a", "min_us"] == 3.5 and t.loc["a", "max_us"] == 10.5 and t.loc["a", "avg_us"] == 5.5
    h = histogram(jobs)
    assert list(h.index) == list(range(11))
    assert h.loc[3, "a"] == 2 and h.loc[4, "a"] == 1 and h.loc[10, "a"] == 1 and h.loc[3, "b"] == 1 and h.loc[5, "b"] == 1
    assert h["a"].sum() == 4 and h["b"].sum() == 2


def test_latency_view_of_an_experiment(tmp_path, last_cpu):
    exp = tmp_path / "lat.toml"
    exp.write_text(f"""
name = "lat"
repetitions = 1
settle = "20ms"
[victim]
body = "latency"
period = "1ms"
jobs = 300
warmup_jobs = 2
cpus = [{last_cpu}]
""")
    assert xtalk("run", exp, "--results", tmp_path / "res").returncode == 0
    (res,) = list((tmp_path / "res").iterdir())
    p = xtalk("summary", res, "--view", "latency")
    assert p.returncode == 0, p.stderr
    assert "max_us" in p.stdout and "solo" in p.stdout
    h = pd.read_csv(res / "latency-histogram.csv", index_col=0)
    assert h["solo"].sum() == 300
    assert "| solo | 1 | 300 |" in (res / "latency.md").read_text()
    p = xtalk("summary", tmp_path / "nothing", "--view", "latency")
    assert p.returncode == 2 and "not an xtalk results directory" in p.stderr
