"""How long `xtalk report` takes on 10^7 jobs, against DuckDB's own describe of the same Parquet files.

    PYTHONPATH=src .venv/bin/python bench/report_scale.py [--runs 100] [--jobs 100000] [--keep DIR] [--repeat 3] [--no-csv-only]

Synthesizes a results directory (two scenarios, `--runs` runs in all, `--jobs` jobs per run,
Parquet written directly, periodic spikes and a slowdown planted), then times, `--repeat`
times alternated and on the same data, each as a subprocess with its wall time, CPU time
(user + system, its threads and children included: on a shared machine it moves much less
than wall time) and peak RSS, with xtalk's bytecode compiled first, as pip does at install:

- the peer: DuckDB over every run's jobs.parquet, the measured jobs' execution time
  described per scenario (count, mean, std, min, quartiles, max: pandas' `describe`, exact
  `quantile_cont`) — the columnar engine on its own, what the report's aggregations are
  measured against;
- `xtalk report RESULTS --no-csv` and `xtalk report RESULTS` (CSV export included, unless
  `--no-csv-only`), on every core of this machine (2 here).

Prints each run, then the median and spread (min–max) of each, and the report's ratio to the
peer measured in the same round. Goals for 10^7 jobs (issue 33): the report ≤ 10 s CPU on 2
cores, ≤ 3 GiB. `--keep DIR` reuses results already there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


#: The peer, run as a subprocess as the report is: DuckDB's describe of the measured jobs'
#: execution time per scenario, straight from the Parquet files (the scenario is the run
#: directory's second field, as synthesize() names them).
PEER = """
import sys, duckdb
con = duckdb.connect()
print(con.sql(f\"\"\"
    SELECT regexp_extract(filename, '/runs/[^-/]+-([^-/]+)-[^/]+/jobs[.]parquet$', 1) AS scenario,
           count(exec_ns) AS count, avg(exec_ns) AS mean, stddev_samp(exec_ns) AS std, min(exec_ns) AS min,
           quantile_cont(exec_ns, 0.25) AS "25%", quantile_cont(exec_ns, 0.5) AS "50%",
           quantile_cont(exec_ns, 0.75) AS "75%", max(exec_ns) AS max
    FROM read_parquet('{sys.argv[1]}/runs/*/jobs.parquet', filename = true)
    WHERE NOT warmup GROUP BY scenario ORDER BY scenario\"\"\").df().round(0).to_string(index=False))
"""


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


def measure(argv: list[str]) -> tuple[float, float, float, str, str]:
    """Wall s, CPU s, peak RSS (GiB), stdout and stderr of one command, started by LAUNCHER."""
    # this checkout's sources first, whatever else the caller's path holds (dependencies)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure the report as installed: bytecode compiled (see main)
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "res.json"
        subprocess.run([sys.executable, "-c", LAUNCHER, str(res), *argv], env=env, check=True)
        r = json.loads(res.read_text())
        stdout, stderr = Path(f"{res}.out").read_text(), Path(f"{res}.err").read_text()
    if r["rc"] != 0:
        sys.exit(f"{' '.join(argv[:4])} failed ({r['rc']}): {stderr[-2000:]}")
    return r["wall"], r["cpu"], r["maxrss_kib"] / 2**20, stdout, stderr


def run_report(root: Path, out: Path, *extra: str) -> tuple[float, float, float, str]:
    """Wall s, CPU s, peak RSS (GiB) and the report's own timing line of one `xtalk report`."""
    shutil.rmtree(out, ignore_errors=True)
    wall, cpu, rss, stdout, _ = measure([sys.executable, "-m", "xtalk.cli", "report", str(root), "-o", str(out), *extra])
    line = next((ln for ln in stdout.splitlines() if ln.startswith("report:")), "").split(": ", 2)[-1]
    return wall, cpu, rss, line


def spread(xs: list[float], unit: str = " s", digits: int = 1) -> str:
    """Median and range of a measurement over the repeats."""
    f = f".{digits}f"
    return (f"{statistics.median(xs):{f}}{unit} (min {min(xs):{f}}, max {max(xs):{f}})" if len(xs) > 1
            else f"{xs[0]:{f}}{unit}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="write the results here and keep them")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of peer and reports, alternated (median and spread)")
    ap.add_argument("--no-csv-only", action="store_true", help="leave out the report with the CSV export")
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
        # pip compiles a package's bytecode at install; a checkout run with PYTHONDONTWRITEBYTECODE
        # (set on some machines) would compile xtalk's sources again in every measured report.
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1] / "src")],
                       env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, check=True)
        cases = [("peer", "DuckDB describe per scenario", None),
                 ("nocsv", "xtalk report --no-csv", ("--no-csv",))]
        if not a.no_csv_only:
            cases.append(("csv", "xtalk report (with the CSV export)", ()))
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k, _, _ in cases}
        for i in range(a.repeat):
            for key, label, extra in cases:
                if extra is None:
                    wall, cpu, rss, stdout, _ = measure([sys.executable, "-c", PEER, str(root)])
                    if i == 0:
                        print(stdout.rstrip())
                    line = ""
                else:
                    wall, cpu, rss, line = run_report(root, root / f"report-{key}", *extra)
                got[key].append((wall, cpu, rss))
                print(f"[{i + 1}/{a.repeat}] {label}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.2f} GiB"
                      + (f"; report / peer {cpu / got['peer'][-1][1]:.1f} (CPU)" if key != "peer" else ""), flush=True)
                if line:
                    print("  " + line)
        print(f"median of {a.repeat} (min, max), {os.cpu_count()} cores:")
        for key, label, _ in cases:
            walls, cpus, rsss = ([x[k] for x in got[key]] for k in range(3))
            ratio = "" if key == "peer" else \
                f"; report / peer (CPU, same round) {spread([c / p[1] for c, p in zip(cpus, got['peer'])], '')}"
            goal = " (goal ≤ 10 s CPU, ≤ 3 GiB)" if key == "nocsv" else ""
            print(f"  {label}: {spread(walls)} wall, {spread(cpus)} CPU, peak RSS {spread(rsss, ' GiB', 2)}{goal}{ratio}")
        if not a.no_csv_only:
            html = root / "report-csv" / "index.html"
            csv = root / "report-csv" / "csv" / "jobs.csv"
            print(f"  index.html {html.stat().st_size / 1e6:.2f} MB, {len(list((root / 'report-csv' / 'figures').glob('*.png')))} "
                  f"figures, jobs.csv {csv.stat().st_size / 1e9:.2f} GB")
    finally:
        if a.keep is None:
            shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
