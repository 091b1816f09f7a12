"""bench/probe_overhead: a probe pair against its own floors, measured in the same process and
interleaved (bench/probe_overhead.c), the program run by the agent as a command victim with its
real probe buffer. Floors: the probe's clock reads alone (rdtsc + rdpid on x86-64, the generic
timer on arm64) and the same reads plus two 32-byte record stores into a pre-faulted buffer.
Five runs; prints the median of the runs' medians with the spread (min-max). Goal: probe pair
<= 1.2 x the clock+store floor (docs/observe.md says what the rest is)."""

import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from xtalk.targets.agent import find_agent, local_facts  # noqa: E402

RUNS, SAMPLES = 5, 2_000  # samples of 100 pairs each, per run
ROWS = (("probe pair", "probe_ns"), ("floor: clock reads", "clock_ns"), ("floor: clock + 2 stores", "clock_store_ns"),
        ("clock_gettime pair", "clock_gettime_ns"))


def one_run(agent: Path, exe: Path, tpn: float, cpu: int, d: Path, k: int) -> dict:
    plan = {"version": 1, "run_id": f"probe-overhead-{k}", "timeout_s": 120, "settle_ms": 10,
            "victim": {"body": {"kind": "command", "argv": [str(exe), str(SAMPLES), str(tpn)],
                                "probe_capacity": 200 * SAMPLES + 64},
                       "period_ns": 60_000_000_000, "jobs": 1, "placement": {"cpus": [cpu]}}}
    (d / "plan.json").write_text(json.dumps(plan))
    out = d / f"run{k}"
    p = subprocess.run([str(agent), "run", str(d / "plan.json"), "--out", str(out)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"probe_overhead: run {k} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # the command inherits the agent's standard output


def spread(values: list[float], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}, {max(values):.{digits}f}]"


def main() -> int:
    if platform.machine() not in ("x86_64", "aarch64"):
        print(f"probe_overhead: the probe counter is x86-64's or arm64's, not {platform.machine()}; skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        exe = d / "probe_overhead"
        subprocess.run(["cc", "-O2", "-I", ROOT / "include", ROOT / "bench" / "probe_overhead.c", "-o", exe], check=True)
        agent = find_agent()
        tpn = 0.0  # arm64: the counter's stated rate, read by the program
        if platform.machine() == "x86_64":
            cal = json.loads(subprocess.run([str(agent), "calibrate", "--pairs", "1000", "--drift-ms", "1"],
                                            capture_output=True, text=True, check=True).stdout)
            tpn = cal["clocks"]["ticks_per_ns"]
        cpu = local_facts(agent).online_cpus[-1]
        runs = [one_run(agent, exe, tpn, cpu, d, k) for k in range(RUNS)]
    bad = [r for r in runs if r["attached"] != 1 or r["dropped"]]
    if bad:
        sys.exit(f"probe_overhead: the probes did not write into the agent's buffer: {bad[0]}")
    print(f"{platform.machine()}, CPU {cpu}: {RUNS} runs x {SAMPLES} samples x {runs[0]['batch']} pairs, interleaved; "
          "median of the runs' medians [min, max], ns per pair")
    for label, key in ROWS:
        print(f"  {label:26s} {spread([r[key] for r in runs]):>20s}")
    vs_store = [r["probe_ns"] / r["clock_store_ns"] for r in runs]
    vs_clock = [r["probe_ns"] / r["clock_ns"] for r in runs]
    print(f"  probe / clock+store floor  {spread(vs_store, 2):>20s}  (goal <= 1.2)")
    print(f"  probe / clock floor        {spread(vs_clock, 2):>20s}")
    faults = [r["probe_minor_faults"] for r in runs]
    print(f"  minor page faults in the probe batches: {statistics.median(faults):.0f} per run "
          f"({statistics.median(faults) / (SAMPLES * runs[0]['batch']) * 1000:.1f} per 1000 pairs); populating the "
          f"buffer's pages ({(200 * SAMPLES + 64) * 32 / 2**20:.1f} MiB, at attach) {spread([r['populate_us'] for r in runs], 0)} us")
    return 0 if statistics.median(vs_store) <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
