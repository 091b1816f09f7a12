"""bench/teardown_trials: the issue's counts for "nothing survives a run": 20 back-to-back
double-SIGTERM trials and 10 agent SIGKILLs followed by `xtalk-agent recover`, each checked to
leave the machine as found (processes, cgroups, IRQ affinities, sched_rt_runtime_us, tracefs
instances, /dev/shm, /run/xtalk) with run.json never `running`. Runs the trials of
tests/test_teardown.py with XTALK_TEARDOWN_TRIALS=20 (root only; about two minutes)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if os.geteuid() != 0:
    print("teardown trials: skipped (needs root)")
    sys.exit(0)
env = {**os.environ, "XTALK_TEARDOWN_TRIALS": "20"}
p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(ROOT / "tests/test_teardown.py"),
                    "-k", "second_sigterm or sigkill"], cwd=ROOT, env=env, capture_output=True, text=True)
for line in p.stdout.splitlines():
    if "left the machine as found" in line or "passed" in line or "failed" in line:
        print(line.strip(". "))
if p.returncode != 0:
    print(p.stdout[-4000:], p.stderr[-2000:])
sys.exit(p.returncode)
