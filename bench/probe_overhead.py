"""bench/probe_overhead: a probe pair against a bare rdtscp pair and a clock_gettime pair,
measured in the same process, interleaved, run by the agent as a command victim with its
real probe buffer. Prints the ratios (goal: probe pair <= 1.2 x bare rdtscp pair)."""

import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from xtalk.targets.agent import find_agent, local_facts  # noqa: E402


def main() -> int:
    if platform.machine() != "x86_64":
        print("probe_overhead: x86-64 only (rdtscp); skipped")
        return 0
    rounds = 3_000  # samples of 100 pairs each
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / "probe_overhead"
        subprocess.run(["cc", "-O2", "-I", ROOT / "include", ROOT / "bench" / "probe_overhead.c", "-o", exe], check=True)
        agent = find_agent()
        cal = json.loads(subprocess.run([str(agent), "calibrate", "--pairs", "1000", "--drift-ms", "1"], capture_output=True,
                                        text=True, check=True).stdout)
        cpu = local_facts(agent).online_cpus[-1]
        plan = {"version": 1, "run_id": "probe-overhead", "timeout_s": 120, "settle_ms": 10,
                "victim": {"body": {"kind": "command", "argv": [str(exe), str(rounds), str(cal["clocks"]["ticks_per_ns"])],
                                    "probe_capacity": 200 * rounds + 16},
                           "period_ns": 60_000_000_000, "jobs": 1, "placement": {"cpus": [cpu]}}}
        (Path(d) / "plan.json").write_text(json.dumps(plan))
        out = Path(d) / "run"
        p = subprocess.run([str(agent), "run", str(Path(d) / "plan.json"), "--out", str(out)], capture_output=True, text=True)
        print(p.stdout, end="")  # the command inherits the agent's standard output
        if p.returncode != 0:
            print(p.stderr, (out / "run.json").read_text() if (out / "run.json").exists() else "")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
