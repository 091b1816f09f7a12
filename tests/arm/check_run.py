"""Read back a run of the aarch64 agent made under qemu-user, as the host reads any run, and
check it: run.json says the run completed on aarch64 with every planned job recorded, and
jobs.bin holds exactly those jobs, in order, one period apart, each with a consistent row.
Usage: check_run.py RUN_DIR JOBS PERIOD_NS. Exit 1 naming the first thing wrong."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from xtalk.store.jobs import read_job_log


def check(run_dir: Path, jobs: int, period_ns: int) -> list[str]:
    """What is wrong with the run in `run_dir` (empty when nothing is)."""
    doc = json.loads((run_dir / "run.json").read_text())
    wrong = []
    if doc["status"] != "completed":
        wrong.append(f"status {doc['status']!r} ({doc.get('reason')})")
    if doc["jobs_recorded"] != jobs:
        wrong.append(f"jobs_recorded {doc['jobs_recorded']}, planned {jobs}")
    machine = doc["environment"]["kernel"]["machine"]
    if machine != "aarch64":
        wrong.append(f"the agent saw machine {machine!r}, not aarch64: not the arm64 agent under emulation")
    if not doc["configuration"]["restored"] or doc["configuration"]["restore_errors"]:
        wrong.append(f"machine not restored: {doc['configuration']['restore_errors']}")
    group = (doc["configuration"].get("run_group") or {}).get("dir")
    if group and Path(group).exists():
        wrong.append(f"run cgroup {group} left behind")
    df = read_job_log(run_dir / "jobs.bin")
    if len(df) != jobs:
        return wrong + [f"jobs.bin holds {len(df)} rows, planned {jobs}"]
    if df["job"].tolist() != list(range(jobs)):
        wrong.append(f"job numbers {df['job'].tolist()}")
    steps = df["release_ns"].diff().dropna().unique().tolist()
    if steps != [period_ns]:
        wrong.append(f"releases not one period ({period_ns} ns) apart: steps {steps}")
    order = (df["release_ns"] <= df["wakeup_ns"]) & (df["wakeup_ns"] <= df["start_ns"]) & (df["start_ns"] < df["end_ns"])
    if not order.all():
        wrong.append(f"rows out of order (release <= wake-up <= start < end): jobs {df['job'][~order].tolist()}")
    if (df["cpu_time_ns"] <= 0).any() or (df["cpu_start"] < 0).any() or df["failed"].any():
        wrong.append("rows with no CPU time, no CPU or a failed job")
    return wrong


def main() -> int:
    run_dir, jobs, period_ns = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    wrong = check(run_dir, jobs, period_ns)
    for w in wrong:
        print(f"check_run: {run_dir}: {w}", file=sys.stderr)
    if not wrong:
        print(f"check_run: {run_dir}: {jobs} jobs recorded on aarch64 under qemu-user, rows consistent")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
