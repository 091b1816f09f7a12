"""Estimates bench: does `xtalk plan` say how long `xtalk run` takes?

For each example below, `xtalk plan` prints "about N s" (runs, settle times, the calibration
and feasibility passes, the measured per-run overhead); then `xtalk run` is timed by the
wall clock, whole (start-up, recovery, passes, runs, summary). Printed: estimate / actual per
example. The goal (issue "Right on any machine"): every ratio in [0.75, 1.25]; the bench
exits 1 when one is outside.

Run: PYTHONPATH=src .venv/bin/python bench/estimates.py   (about 13 minutes on 2 cores;
`--no-characterize` leaves out `characterize --quick`, about 5 of them).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
XTALK = [sys.executable, "-m", "xtalk.cli"]
EXAMPLES = ["quickstart.toml", "regulator.toml", "configurations.toml", "taskset_rm.toml", "latency.toml"]
FLAGS = ["--skip-unavailable"]
#: `xtalk characterize --quick` is estimated by its own `--plan` (the total on its last line).
CHARACTERIZE = "characterize --quick"
GOAL = (0.75, 1.25)


def estimate(path: Path) -> float | None:
    p = subprocess.run([*XTALK, "plan", str(path), *FLAGS], capture_output=True, text=True, cwd=ROOT)
    m = re.search(r"about (\d+) s", p.stdout)
    if p.returncode != 0 or not m:
        print(f"  {path.name}: plan failed: {p.stderr.strip() or p.stdout.strip()}")
        return None
    return float(m.group(1))


def actual(path: Path, results: Path) -> float | None:
    t0 = time.perf_counter()
    p = subprocess.run([*XTALK, "run", str(path), "--results", str(results), *FLAGS], capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - t0
    if p.returncode not in (0, 4):  # 4: some runs failed, still a duration
        print(f"  {path.name}: run failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        return None
    return took


def characterize_estimate() -> float | None:
    p = subprocess.run([*XTALK, "characterize", "--quick", "--plan"], capture_output=True, text=True, cwd=ROOT)
    m = re.findall(r"about (\d+) s", p.stdout)
    if p.returncode != 0 or not m:
        print(f"  characterize: plan failed: {p.stderr.strip() or p.stdout.strip()}")
        return None
    return float(m[-1])  # the last line: every probe together


def characterize_actual(results: Path) -> float | None:
    t0 = time.perf_counter()
    p = subprocess.run([*XTALK, "characterize", "--quick", "--results", str(results)], capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        print(f"  characterize: failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        return None
    return took


def main() -> int:
    bad = 0
    names = [*EXAMPLES, *([CHARACTERIZE] if "--no-characterize" not in sys.argv else [])]
    print(f"{'example':<24} {'estimate s':>10} {'actual s':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="xtalk-estimates-") as tmp:
        for name in names:
            if name == CHARACTERIZE:
                est = characterize_estimate()
                took = characterize_actual(Path(tmp) / "characterize") if est is not None else None
            else:
                path = ROOT / "examples" / name
                est = estimate(path)
                took = actual(path, Path(tmp) / name) if est is not None else None
            if est is None or took is None:
                bad += 1
                continue
            ratio = est / took
            ok = GOAL[0] <= ratio <= GOAL[1]
            bad += not ok
            print(f"{name:<24} {est:>10.0f} {took:>9.1f} {ratio:>6.2f}{'' if ok else '  outside ' + str(GOAL)}")
    print(f"estimates: {len(names) - bad} of {len(names)} within {GOAL}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
