"""How long `xtalk report` takes on 10^7 jobs, against a plain pandas groupby-describe.

    PYTHONPATH=src .venv/bin/python bench/report_scale.py [--runs 100] [--jobs 100000] [--keep DIR]

Synthesizes a results directory (two scenarios, `--runs` runs in all, `--jobs` jobs per run,
Parquet written directly, periodic spikes and a slowdown planted), then times, in the same
process run and on the same data:

- the baseline: read every run's jobs.parquet with pandas, concatenate, and
  `groupby("scenario").exec_ns.describe()` — what anyone would do first;
- `xtalk report RESULTS --no-csv` and `xtalk report RESULTS` (CSV export included) as
  subprocesses, on every core of this machine (2 here), each with its wall time, CPU time
  (user + system: on a shared machine it moves much less than wall time) and peak RSS.

Prints the times, their ratios to the baseline, and the report's size. Goals for 10^7 jobs:
≤ 15 s, ≤ 30 s with the CSV export, ≤ 4 GiB. `--keep DIR` reuses results already there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from xtalk.testing.synthetic import job_table, write_run  # noqa: E402


def synthesize(root: Path, runs: int, jobs: int) -> int:
    """`runs` runs (solo and pi alternating) of `jobs` jobs each; returns the job count."""
    (root / "runs").mkdir(parents=True)
    order = []
    for i in range(runs):
        scen = "solo" if i % 2 == 0 else "pi"
        j = job_table(jobs, period_ns=1_000_000, slowdown=1.0 if scen == "solo" else 1.3, spike_every=1000,
                      spike_ns=150_000, warmup=10, seed=i, t0_ns=10**12 + i * 10**12)
        run_id = f"{i}-{scen}-r{i // 2}"
        write_run(root, run_id, scen, i // 2, j)
        order.append({"run_id": run_id, "scenario": scen, "repetition": i // 2})

    (root / "experiment.json").write_text(json.dumps({"experiment": {
        "name": "scale", "description": f"{runs} runs × {jobs} jobs (synthetic)", "victim": {"body": "sum"},
        "scenario": [{"name": "pi", "enemies": [{"kind": "pi"}]}]}, "order": order}))
    return runs * jobs


def baseline(root: Path) -> tuple[float, pd.DataFrame]:
    t = time.perf_counter()
    parts = []
    for d in sorted((root / "runs").iterdir()):
        df = pd.read_parquet(d / "jobs.parquet")
        df["scenario"] = d.name.split("-")[1]
        parts.append(df)
    jobs = pd.concat(parts, ignore_index=True)
    desc = jobs[~jobs.warmup].groupby("scenario").exec_ns.describe()
    return time.perf_counter() - t, desc


#: Started by the bench, this small process starts the report and reaps it with os.wait4
#: (that child's own CPU time, its forked children's included, and peak RSS). The bench does
#: not start the report itself: Linux carries the peak RSS of the process that forks into the
#: child's ru_maxrss across exec, and the bench holds 10^7 jobs of its own baseline by then
#: (the report's 4.3 GiB measured before 2026-11-27 was that, not the report's).
LAUNCHER = """
import json, os, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[2:], stdout=open(sys.argv[1] + ".out", "w"), stderr=open(sys.argv[1] + ".err", "w"))
_, status, ru = os.wait4(p.pid, 0)
json.dump({"wall": time.perf_counter() - t, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss,
           "rc": os.waitstatus_to_exitcode(status)}, open(sys.argv[1], "w"))
"""


def run_report(root: Path, out: Path, *extra: str) -> tuple[float, float, float, str]:
    """Wall s, CPU s, peak RSS (GiB) and the report's own timing line of one `xtalk report`."""
    # this checkout's sources first, whatever else the caller's path holds (dependencies)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "res.json"
        subprocess.run([sys.executable, "-c", LAUNCHER, str(res), sys.executable, "-m", "xtalk.cli", "report", str(root),
                        "-o", str(out), *extra], env=env, check=True)
        r = json.loads(res.read_text())
        stdout, stderr = Path(f"{res}.out").read_text(), Path(f"{res}.err").read_text()
    if r["rc"] != 0:
        sys.exit(f"xtalk report {' '.join(extra)} failed ({r['rc']}): {stderr[-2000:]}")
    line = next((ln for ln in stdout.splitlines() if ln.startswith("report:")), "").split(": ", 2)[-1]
    return r["wall"], r["cpu"], r["maxrss_kib"] / 2**20, line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="write the results here and keep them")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="xtalk-report-scale-")) / "scale"
    try:
        t = time.perf_counter()
        if (root / "experiment.json").exists():
            n = a.runs * a.jobs
            print(f"reusing {root} ({n:,} jobs in {a.runs} runs)")
        else:
            n = synthesize(root, a.runs, a.jobs)
            print(f"synthesized {n:,} jobs in {a.runs} runs in {time.perf_counter() - t:.1f} s → {root}")
        c = time.process_time()
        base_s, desc = baseline(root)
        base_c = time.process_time() - c
        print(f"baseline (pandas read + groupby-describe): {base_s:.1f} s wall, {base_c:.1f} s CPU")
        print(desc.round(0).to_string())
        for label, out, extra, goal in (("xtalk report --no-csv", root / "report-nocsv", ("--no-csv",), 15),
                                        ("xtalk report (with the CSV export)", root / "report", (), 30)):
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu, rss, line = run_report(root, out, *extra)
            print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.2f} GiB on {os.cpu_count()} cores "
                  f"(goal ≤ {goal} s, ≤ 4 GiB); report / baseline {wall / base_s:.2f} (wall), {cpu / base_c:.2f} (CPU)")
            print("  " + line)
        html = root / "report" / "index.html"
        csv = root / "report" / "csv" / "jobs.csv"
        print(f"  index.html {html.stat().st_size / 1e6:.2f} MB, {len(list((root / 'report' / 'figures').glob('*.png')))} figures, "
              f"jobs.csv {csv.stat().st_size / 1e9:.2f} GB")
    finally:
        if a.keep is None:
            shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
