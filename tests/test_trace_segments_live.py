"""Trace segments on a real traced run (root, tracefs): the victim's own wake-up latency,
planted as the segment sched_waking of the victim → its switch-in, comes out per job as the
trace's wake-up analysis (trace/wakers.py, its own code) measures it, within what the job
records bound it by; and the agent's check refuses a segment naming an event it does not trace."""

import subprocess

import numpy as np

from conftest import small_plan, write_plan
from xtalk.store.jobs import convert_run

WAKEUP = {"name": "wakeup", "start": {"event": "sched:sched_waking", "where": {"pid": "$victim"}},
          "end": {"event": "sched:sched_switch", "where": {"next_pid": "$victim"}}}


def test_the_victims_wakeup_latency_as_a_segment(agent, tmp_path, last_cpu, needs_tracefs, needs_fifo):
    # A SCHED_OTHER hog keeps the victim's CPU busy: its switch-ins come from a task (a KVM
    # guest's trace may lack those out of idle), and the victim at FIFO 90 preempts it at once.
    plan = small_plan(jobs=120, period_ns=4_000_000, cpus=[last_cpu], sched={"policy": "fifo", "priority": 90})
    plan["victim"]["body"] = {"kind": "pi", "iterations": 100_000}
    plan["enemies"] = [{"name": "hog", "load": {"kind": "pi"}, "placement": {"cpus": [last_cpu]}}]
    plan["trace"] = {"segments": [WAKEUP]}
    run = tmp_path / "exp" / "runs" / "r"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", run], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    jobs = convert_run(run)
    m = jobs[~jobs.warmup]
    seg = m["seg_wakeup_ns"].astype("Float64")
    have = seg.notna().to_numpy(dtype=bool)
    assert have.mean() > 0.9, f"{(~have).sum()} of {len(m)} jobs without the segment"
    v = seg[have].to_numpy(dtype=float)
    # The waking comes after the release, the switch-in before the victim reads its wake-up time.
    assert (v > 0).all() and (v <= m["wakeup_latency_ns"][have].to_numpy(dtype=float)).all()
    # trace/wakers.py derives the same latency on its own (its switch-in, or the victim's own first
    # event where the trace lacks one): equal on every job where both have a value.
    both = have & m["trace_wakeup_ns"].notna().to_numpy(dtype=bool)
    assert both.sum() > 0.9 * len(m)
    same = v[both[have]] == m["trace_wakeup_ns"][both].to_numpy(dtype=float)
    assert same.mean() > 0.95, np.c_[v[both[have]], m["trace_wakeup_ns"][both].to_numpy(dtype=float)][~same][:5]


def test_the_agent_refuses_a_segment_of_an_untraced_event(agent, tmp_path):
    plan = small_plan()
    plan["trace"] = {"events": ["sched:sched_switch"], "segments": [WAKEUP]}
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p
    line = p.stderr.strip()
    assert "\n" not in line and line.startswith("xtalk-agent: plan: trace.segments[0].start.event"), line
    assert "is not traced" in line, line
