"""bench/analysis_scale: 10^8 job rows → per-configuration percentiles through the store.

Builds a synthetic campaign store (100 runs × 10^6 jobs, 4 configurations; each run a
`run.json` with its labels and a `jobs.parquet` with the job table's timing columns), then
times p50/p99/p99.9 of `exec_ns` per configuration over measured jobs through
`xtalk.store.aggregate.group_quantiles` (DuckDB, one scan of each configuration's files; goal
≤ 5 s on 2 cores, exact percentiles), and the same answer in pandas, in the same run; prints
pandas / DuckDB. `--old-view` also times the former path (one query over the store's `jobs`
view, which joins labels on file names per row).

    PYTHONPATH=src nice .venv/bin/python bench/analysis_scale.py [--keep DIR] [--old-view]

Pandas holds the two columns it needs (configuration as a category, exec_ns as int64: about
0.9 GB for 10^8 rows), read file by file with only those columns, so no sampling is needed
within 24 GiB. The store is written under a temporary directory and removed at the end."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import xtalk  # noqa: E402
from xtalk.analysis.stats import quantile_name  # noqa: E402
from xtalk.outcome import write_outcome  # noqa: E402
from xtalk.testing.synthetic import outcome  # noqa: E402
from xtalk.store.aggregate import group_quantiles  # noqa: E402

RUNS, ROWS = int(os.environ.get("XTALK_BENCH_RUNS", 100)), int(os.environ.get("XTALK_BENCH_ROWS", 1_000_000))
CONFIGS = ["other", "fifo", "rr", "deadline"]
QUANTILES = [0.5, 0.99, 0.999]


def build(store: Path) -> None:
    rng = np.random.default_rng(1)
    (store / "runs").mkdir(parents=True)
    runs = []
    for i in range(RUNS):
        conf = CONFIGS[i % len(CONFIGS)]
        d = store / "runs" / f"{i:03d}-app-{conf}-solo-r{i // len(CONFIGS)}"
        d.mkdir()
        labels = {"application": "app", "criticality": "B", "configuration": conf, "variant": "default",
                  "scenario": "solo", "repetition": str(i // len(CONFIGS))}
        job = np.arange(ROWS, dtype=np.int64)
        write_outcome(d, outcome(d.name, labels, pd.DataFrame({"warmup": job[:20] < 10, "period_ns": 1_000_000})))
        exec_ns = (rng.lognormal(13.0 + 0.1 * (i % len(CONFIGS)), 0.3, ROWS)).astype(np.int64)
        release = job * 1_000_000
        table = pa.table({"job": job, "warmup": job < 10, "release_ns": release, "start_ns": release + 2_000,
                          "end_ns": release + 2_000 + exec_ns, "exec_ns": exec_ns})
        pq.write_table(table, d / "jobs.parquet")
        runs.append({"run_id": d.name, "labels": labels})
    (store / "campaign.json").write_text(json.dumps({"name": "scale", "runs": runs}))
    (store / "journal.jsonl").write_text("")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="build the store here (or reuse it when already built) and keep it")
    ap.add_argument("--old-view", action="store_true", help="also time the former path: one query over the store's "
                                                             "`jobs` view (labels joined on file names)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="xtalk-scale-", dir=os.environ.get("TMPDIR", "/tmp")) as d:
        store = a.keep or Path(d) / "scale"
        t = time.monotonic()
        if not (store / "campaign.json").exists():
            build(store)
        size = sum(f.stat().st_size for f in store.rglob("jobs.parquet"))
        print(f"store: {RUNS} runs × {ROWS:,} jobs = {RUNS * ROWS:,} rows ({size / 2**30:.2f} GiB Parquet), "
              f"ready in {time.monotonic() - t:.1f} s; {os.cpu_count()} cores")

        t, c = time.monotonic(), time.process_time()
        runs = xtalk.open(store).runs()
        duck = group_quantiles(runs, "exec_ns", QUANTILES, by=("configuration",), moments=False)
        t_duck, c_duck = time.monotonic() - t, time.process_time() - c
        print(f"DuckDB over Parquet, one scan per configuration (store.aggregate, exact): {t_duck:.2f} s wall, "
              f"{c_duck:.2f} s CPU (goal ≤ 5 s)")

        if a.old_view:
            t, c = time.monotonic(), time.process_time()
            con = xtalk.open(store).connect()
            con.execute("""SELECT configuration, quantile_cont(exec_ns, [0.5, 0.99, 0.999]) AS q, count(*) AS n
                           FROM jobs WHERE NOT warmup GROUP BY configuration ORDER BY configuration""").df()
            t_view, c_view = time.monotonic() - t, time.process_time() - c
            print(f"former path, one query over the store's jobs view: {t_view:.2f} s wall, {c_view:.2f} s CPU → "
                  f"view / store.aggregate = {t_view / t_duck:.1f} (wall), {c_view / c_duck:.1f} (CPU)")

        t, c = time.monotonic(), time.process_time()
        parts = []
        for f in sorted((store / "runs").glob("*/jobs.parquet")):
            df = pq.read_table(f, columns=["warmup", "exec_ns"]).to_pandas()
            df = df.loc[~df.warmup, ["exec_ns"]]
            df["configuration"] = pd.Categorical.from_codes(
                np.full(len(df), CONFIGS.index(f.parent.name.split("-")[2]), dtype=np.int8), categories=CONFIGS)
            parts.append(df)
        jobs = pd.concat(parts, ignore_index=True)
        del parts
        pand = jobs.groupby("configuration", observed=True).exec_ns.quantile(QUANTILES).unstack()
        t_pandas, c_pandas = time.monotonic() - t, time.process_time() - c
        print(f"pandas (all rows in memory, 2 columns): {t_pandas:.2f} s wall, {c_pandas:.2f} s CPU → pandas / DuckDB = "
              f"{t_pandas / t_duck:.1f} (wall), {c_pandas / c_duck:.1f} (CPU)")
        names = [quantile_name(q) for q in QUANTILES]
        for conf, n, ours in zip(duck["configuration"], duck["n"], duck[names].to_numpy()):
            theirs = pand.loc[conf].to_numpy()
            assert np.allclose(ours, theirs, rtol=1e-12), (conf, ours, theirs)
            print(f"  {conf:9s} n={n:,} p50={ours[0] / 1e3:.1f} µs p99={ours[1] / 1e3:.1f} µs "
                  f"p99.9={ours[2] / 1e3:.1f} µs (pandas agrees)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
