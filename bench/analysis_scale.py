"""bench/analysis_scale: 10^8 job rows → per-configuration percentiles through the store.

Builds a synthetic campaign store (100 runs × 10^6 jobs, 4 configurations; each run a
`run.json` with its labels and a `jobs.parquet` with the job table's timing columns), then
times `xtalk.open(store).connect()` + one DuckDB query of p50/p99/p99.9 of `exec_ns` per
configuration over measured jobs (goal ≤ 10 s on 2 cores), and the same answer in pandas.
Pandas holds the two columns it needs (configuration as a category, exec_ns as int64: about
0.9 GB for 10^8 rows), read file by file with only those columns, so no sampling is needed
within 24 GiB. The store is written under a temporary directory and removed at the end."""

from __future__ import annotations

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

RUNS, ROWS = 100, 1_000_000
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
        (d / "run.json").write_text(json.dumps({"run_id": d.name, "status": "completed", "plan": {"labels": labels}}))
        job = np.arange(ROWS, dtype=np.int64)
        exec_ns = (rng.lognormal(13.0 + 0.1 * (i % len(CONFIGS)), 0.3, ROWS)).astype(np.int64)
        release = job * 1_000_000
        table = pa.table({"job": job, "warmup": job < 10, "release_ns": release, "start_ns": release + 2_000,
                          "end_ns": release + 2_000 + exec_ns, "exec_ns": exec_ns})
        pq.write_table(table, d / "jobs.parquet")
        runs.append({"run_id": d.name, "labels": labels})
    (store / "campaign.json").write_text(json.dumps({"name": "scale", "runs": runs}))
    (store / "journal.jsonl").write_text("")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="xtalk-scale-", dir=os.environ.get("TMPDIR", "/tmp")) as d:
        store = Path(d) / "scale"
        t = time.monotonic()
        build(store)
        size = sum(f.stat().st_size for f in store.rglob("jobs.parquet"))
        print(f"built {RUNS} runs × {ROWS:,} jobs = {RUNS * ROWS:,} rows ({size / 2**30:.2f} GiB Parquet) in {time.monotonic() - t:.1f} s")

        t = time.monotonic()
        con = xtalk.open(store).connect()
        duck = con.execute("""SELECT configuration, quantile_cont(exec_ns, [0.5, 0.99, 0.999]) AS q, count(*) AS n
                              FROM jobs WHERE NOT warmup GROUP BY configuration ORDER BY configuration""").df()
        t_duck = time.monotonic() - t
        print(f"DuckDB through the store (exact percentiles): {t_duck:.2f} s (goal ≤ 10 s)")

        t = time.monotonic()
        parts = []
        for f in sorted((store / "runs").glob("*/jobs.parquet")):
            df = pq.read_table(f, columns=["warmup", "exec_ns"]).to_pandas()
            df = df.loc[~df.warmup, ["exec_ns"]]
            df["configuration"] = pd.Categorical([f.parent.name.split("-")[2]] * len(df), categories=CONFIGS)
            parts.append(df)
        jobs = pd.concat(parts, ignore_index=True)
        del parts
        pand = jobs.groupby("configuration", observed=True).exec_ns.quantile(QUANTILES).unstack()
        t_pandas = time.monotonic() - t
        print(f"pandas (all rows in memory, 2 columns): {t_pandas:.2f} s → pandas / DuckDB = {t_pandas / t_duck:.1f}")
        for row in duck.itertuples():
            ours = np.array(row.q)
            theirs = pand.loc[row.configuration].to_numpy()
            assert np.allclose(ours, theirs, rtol=1e-9), (row.configuration, ours, theirs)
            print(f"  {row.configuration:9s} n={row.n:,} p50={ours[0] / 1e3:.1f} µs p99={ours[1] / 1e3:.1f} µs "
                  f"p99.9={ours[2] / 1e3:.1f} µs (pandas agrees)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
