"""xtalk's latency victim against cyclictest (rt-tests) on the same CPU, policy, priority and
interval, interleaved round by round: medians, p99 and max of both (µs). Goal: medians
within 2 µs, i.e. the victim's periodic loop measures timer latency as cyclictest does.

    PYTHONPATH=src .venv/bin/python bench/latency_vs_cyclictest.py [--rounds 3] [--samples 5000]

Both tools sleep with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on an absolute grid,
as SCHED_FIFO, memory locked. cyclictest normally holds /dev/cpu_dma_latency at 0 while it
runs; here the bench holds it for both tools (as root, released at the end) and passes
--laptop so that the power-management state is the same for both. cyclictest reports whole
µs (truncated), so xtalk's ns samples are compared both exact and truncated to µs.
xtalk's run directory (its file-backed job log) goes to a tmpfs (/dev/shm) by default, like
cyclictest's in-memory histogram: on ext4 the log's pages, once written back, fault again on
the next record (page_mkwrite, which can wait for the journal), which adds millisecond tails
to the samples on a busy disk (--run-dir /tmp to see it).
Installs rt-tests with apt-get when cyclictest is missing (and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import _peers as peers  # bench/_peers.py, beside this script

from xtalk.store.jobs import read_job_log
from xtalk.targets.agent import find_agent, local_facts


def ensure_cyclictest() -> str:
    return peers.ensure("cyclictest", "rt-tests")


def run_xtalk(agent: Path, work: Path, name: str, cpu: int, prio: int, interval_us: int, samples: int) -> np.ndarray:
    """Wake-up latencies (ns) of one run of the latency victim."""
    plan = {"version": 1, "run_id": name, "timeout_s": samples * interval_us / 1e6 + 30, "settle_ms": 10,
            "victim": {"body": {"kind": "latency"}, "period_ns": interval_us * 1000, "jobs": samples, "warmup_jobs": 10,
                       "placement": {"cpus": [cpu]}, "sched": {"policy": "fifo", "priority": prio}, "lock_memory": True}}
    (work / f"{name}.json").write_text(json.dumps(plan))
    p = subprocess.run([str(agent), "run", str(work / f"{name}.json"), "--out", str(work / name)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"xtalk-agent: {p.stderr.strip()}")
    jobs = read_job_log(work / name / "jobs.bin")
    return jobs[~jobs.warmup].wakeup_latency_ns.to_numpy()


def run_cyclictest(exe: str, cpu: int, prio: int, interval_us: int, samples: int) -> np.ndarray:
    """Latencies (µs, as cyclictest counts them) rebuilt from its 1 µs histogram."""
    cmd = [exe, "-t1", f"-p{prio}", f"-i{interval_us}", f"-l{samples}", "-m", f"-a{cpu}", "-q", "-h4000", "--laptop"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cyclictest: {p.stderr.strip()}")
    bins, counts = [], []
    for line in p.stdout.splitlines():
        m = re.match(r"^(\d+)\s+(\d+)\s*$", line)
        if m:
            bins.append(int(m.group(1)))
            counts.append(int(m.group(2)))
    lat = np.repeat(np.array(bins), np.array(counts))
    over = re.search(r"# Histogram Overflows:\s*(\d+)", p.stdout)
    overflows = int(over.group(1)) if over else 0
    mx = re.search(r"# Max Latencies:\s*(\d+)", p.stdout)
    if overflows and mx:  # samples past the histogram: count them at the reported maximum
        lat = np.concatenate([lat, np.full(overflows, int(mx.group(1)))])
    if len(lat) != samples:
        sys.exit(f"cyclictest: {len(lat)} samples in its histogram, expected {samples}")
    return lat


def stats(us: np.ndarray) -> str:
    return f"median {np.median(us):7.2f}  p99 {np.percentile(us, 99):7.2f}  max {us.max():8.2f}  (n={len(us)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--interval-us", type=int, default=1000)
    ap.add_argument("--priority", type=int, default=90)
    ap.add_argument("--cpu", type=int, default=None, help="default: the last online CPU")
    ap.add_argument("--run-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where xtalk's run directories go (a temporary directory inside it; default /dev/shm)")
    a = ap.parse_args()
    if a.rounds < 3:
        sys.exit("--rounds: at least 3 rounds per tool")
    if os.geteuid() != 0:
        sys.exit("needs root (SCHED_FIFO, mlock)")
    agent = find_agent()
    cpu = a.cpu if a.cpu is not None else local_facts(agent).online_cpus[-1]
    exe = ensure_cyclictest()
    version = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout.splitlines()[:1]
    print(f"CPU {cpu}, SCHED_FIFO {a.priority}, interval {a.interval_us} us, {a.samples} samples x {a.rounds} rounds per tool, "
          f"interleaved; {' '.join(version) or exe}; xtalk run directory under {a.run_dir or tempfile.gettempdir()}")
    dma = None
    if os.path.exists("/dev/cpu_dma_latency"):
        dma = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
        os.write(dma, (0).to_bytes(4, "little"))  # held for both tools, released at exit
    xt_ns, ct_us = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="xtalk-latbench-", dir=a.run_dir) as tmp:
            for r in range(a.rounds):
                # Alternate which tool goes first, so a slow drift of the machine favours neither.
                order = ("xtalk", "cyclictest") if r % 2 == 0 else ("cyclictest", "xtalk")
                for tool in order:
                    if tool == "xtalk":
                        x = run_xtalk(agent, Path(tmp), f"r{r}", cpu, a.priority, a.interval_us, a.samples)
                        xt_ns.append(x)
                        print(f"round {r}: xtalk      {stats(x / 1e3)}", flush=True)
                    else:
                        c = run_cyclictest(exe, cpu, a.priority, a.interval_us, a.samples)
                        ct_us.append(c)
                        print(f"round {r}: cyclictest {stats(c.astype(float))}", flush=True)
    finally:
        if dma is not None:
            os.close(dma)
    x = np.concatenate(xt_ns) / 1e3
    xt = np.floor(x)
    c = np.concatenate(ct_us).astype(float)
    print("\nall rounds (us):")
    print(f"  xtalk (exact ns)       {stats(x)}")
    print(f"  xtalk (truncated us)   {stats(xt)}")
    print(f"  cyclictest             {stats(c)}")
    per_round = [abs(np.median(np.floor(xr / 1e3)) - np.median(cr)) for xr, cr in zip(xt_ns, ct_us)]
    diff = abs(np.median(xt) - np.median(c))
    print(f"median difference (truncated us): {diff:.2f} us overall, per round {', '.join(f'{d:.1f}' for d in per_round)}; "
          f"goal <= 2 us: {'met' if diff <= 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
