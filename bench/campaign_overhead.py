"""bench/campaign_overhead: what a campaign costs beyond its measurements.

Runs a campaign of 10 runs of 1 s (a sum victim, 100 jobs of 10 ms, 10 ms settle, one warm-up
job) through `xtalk campaign run`, and prints wall time / sum of the runs' measured windows
(jobs × period), for the whole command (Python start-up, checks, creation included) and for
the run loop alone (first `running` to last `done` in the journal). Goal: ≤ 1.05."""

from __future__ import annotations

import json
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
                             capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
