"""Spike attribution on a real run: a periodic disturber planted on the victim's CPU (a pi
enemy at a higher real-time priority, working 20 % of every window) must be what the kernel
trace blames for the victim's slow jobs."""

import subprocess

import pandas as pd

from conftest import small_plan, write_plan, xtalk
from xtalk.store.jobs import convert_run


def test_planted_periodic_disturber_is_blamed(agent, tmp_path, last_cpu, needs_tracefs, needs_fifo):
    plan = small_plan(jobs=100, period_ns=10_000_000, cpus=[last_cpu], sched={"policy": "fifo", "priority": 50})
    plan["victim"]["body"] = {"kind": "pi", "iterations": 3_000_000}  # a few ms: longer than the disturber's 1 ms window
    plan["enemies"] = [{"name": "hog", "load": {"kind": "pi"}, "placement": {"cpus": [last_cpu]},
                        "sched": {"policy": "fifo", "priority": 60}, "intensity": 20.0}]
    plan["trace"] = {}
    run = tmp_path / "exp" / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", run], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    jobs = convert_run(run)
    culprits = pd.read_parquet(run / "culprits.parquet")
    top = culprits.groupby("name").ns.sum().sort_values(ascending=False)
    assert top.index[0] == "enemy hog", top.head()
    measured = jobs[~jobs.warmup]
    assert measured.trace_preemptions.sum() > 20, "the disturber preempts the victim again and again"
    slow = measured[measured.exec_ns >= measured.exec_ns.quantile(0.9)].job
    hit = culprits[(culprits.name == "enemy hog")].job
    assert slow.isin(hit).mean() > 0.8, "the slowest jobs are the ones the disturber hit"
    out = xtalk("blame", run)
    assert out.returncode == 0, out.stderr
    assert "enemy hog" in out.stdout.split("\n", 5)[4] or "enemy hog" in out.stdout[:2000]
