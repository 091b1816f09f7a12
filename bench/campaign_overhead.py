"""bench/campaign_overhead: what a campaign costs beyond its measurements.

Runs a campaign of 10 runs of 1 s (a sum victim, 100 jobs of 10 ms, 10 ms settle, one warm-up
job) through `xtalk campaign run`, and prints wall time / sum of the runs' measured windows
(jobs × period), for the whole command (Python start-up, checks, creation included) and for
the run loop alone (first `running` to last `done` in the journal). Goal: ≤ 1.05 (issue 21:
≤ 1.03).

Then where each run's time beyond its window goes, as the mean over the runs (ms), from the
journal (`running`, the attempt's `started`/`ended`, `done`), run.json (the agent's
`started_unix_ns` after its start-up and machine description, `ended_unix_ns`) and the job
table (releases and ends, CLOCK_MONOTONIC, mapped to the wall clock). The plan itself asks
for settle + warm-up jobs (20 ms here) on top of the window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CAMPAIGN = """
name = "overhead"
repetitions = 5
settle = "10ms"
[[application]]
name = "sum"
criticality = "D"
epsilon = { relative = 2.0 }
victim = { body = "sum", bytes = "64KiB", period = "10ms", jobs = 100, warmup_jobs = 1, cpus = "last" }
[[scenario]]
name = "pi"
enemies = [{ kind = "pi", cpus = "others" }]
"""


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="xtalk-bench-") as d:
        f = Path(d) / "overhead.toml"
        f.write_text(CAMPAIGN)
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "xtalk.cli", "campaign", "run", str(f), "--results", str(Path(d) / "res")],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))})
        wall = time.monotonic() - t0
        if out.returncode != 0:
            print(out.stderr)
            return 1
        (store,) = [p for p in (Path(d) / "res").iterdir() if not p.name.startswith(".")]
        doc = json.loads((store / "campaign.json").read_text())
        window = sum(r["plan"]["victim"]["jobs"] * r["plan"]["victim"]["period_ns"] / 1e9 for r in doc["runs"])
        events = [json.loads(line) for line in (store / "journal.jsonl").read_text().splitlines()]
        first = min(e["t"] for e in events if e.get("state") == "running")
        last = max(e["t"] for e in events if e.get("state") == "done")
        loop = last - first
        runs = len(doc["runs"])
        print(f"{runs} runs of {window / runs:.2f} s measured window each (sum {window:.2f} s)")
        print(f"whole command: {wall:.2f} s → ratio {wall / window:.3f}")
        print(f"run loop:      {loop:.2f} s → ratio {loop / window:.3f} (goal ≤ 1.05); "
              f"{(loop - window) / runs * 1e3:.0f} ms per run beyond the window")
        print("per run, mean ms: " + ", ".join(f"{k} {v:.1f}" for k, v in breakdown(store, events).items()))
    return 0


def breakdown(store: Path, events: list[dict]) -> dict[str, float]:
    """Mean ms per run of each part of a run's wall time (see the module's docstring)."""
    import pyarrow.parquet as pq

    from xtalk.store.jobs import convert_run

    off = time.time() - time.monotonic()  # CLOCK_MONOTONIC → wall clock, this machine
    running = {e["run"]: e["t"] for e in events if e.get("state") == "running"}
    done = {e["run"]: e for e in events if e.get("state") == "done"}
    order = sorted(running, key=running.get)
    parts: dict[str, list[float]] = {}
    for i, rid in enumerate(order):
        d = store / "runs" / rid
        o = json.loads((d / "run.json").read_text())
        if not (d / "jobs.parquet").exists():
            convert_run(d)
        j = pq.read_table(d / "jobs.parquet", columns=["release_ns", "end_ns", "warmup"]).to_pandas()
        v = o["plan"]["victim"]
        first = j["release_ns"].iloc[0] / 1e9 + off
        window = first + v.get("warmup_jobs", 0) * v["period_ns"] / 1e9
        last = j["end_ns"].iloc[-1] / 1e9 + off
        agent0, agent1 = o["started_unix_ns"] / 1e9, o["ended_unix_ns"] / 1e9
        e = done[rid]
        t = {"journal → attempt": e["started"] - running[rid],
             "host + agent start-up": agent0 - e["started"],
             "agent set-up + settle": first - agent0,
             "warm-up jobs": window - first,
             "window": last - window,
             "teardown": agent1 - last,
             "agent exit → host": e["ended"] - agent1,
             "publish + journal": e["t"] - e["ended"]}
        if i + 1 < len(order):
            t["→ next run"] = running[order[i + 1]] - e["t"]
        for k, x in t.items():
            parts.setdefault(k, []).append(x * 1e3)
    return {k: sum(x) / len(x) for k, x in parts.items()}


if __name__ == "__main__":
    sys.exit(main())
