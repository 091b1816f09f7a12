"""Start-up bench: how much CPU does a command of the command line cost before it does anything?

Each command runs in a fresh process, `--runs` times, the commands interleaved round by round
(so that the machine's load falls on all of them alike); a run's cost is its CPU time, user +
system of the process and of any it waited for (`xtalk plan` asks the agent to check its plans),
read with `resource.getrusage(RUSAGE_CHILDREN)` around it. Printed per command: the median
[min, max] in ms and the ratio of the medians to the peer measured in the same rounds,
`python -c "import typer, rich"` (the libraries every command needs); `python -c pass` is the
floor. Goals (issue 33): `xtalk --help` within 2× of the peer, `xtalk plan
examples/quickstart.toml` within 4×; the bench exits 1 when one is missed.

The commands run with bytecode caching on (`PYTHONDONTWRITEBYTECODE` taken out of their
environment), so that the warm-up round writes xtalk's .pyc files as a first run writes them on a
user's machine (pip writes those of an installed xtalk, and of typer and rich, at install): with
it set, as on the project's 2-vCPU guest, every run compiled xtalk's sources again (about 180 ms
of `plan`) while the peer's libraries loaded from their installed .pyc.

Run: .venv/bin/python bench/cli_startup.py [--runs 9]   (about 30 s on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
#: `xtalk` as installed beside this Python (the console script), else the module.
XTALK = [str(Path(PY).with_name("xtalk"))] if Path(PY).with_name("xtalk").exists() else [PY, "-m", "xtalk.cli"]
PEER = "import typer, rich"
#: The commands' environment: bytecode cached (see the docstring).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
COMMANDS = {
    "python -c pass (floor)": [PY, "-c", "pass"],
    f'python -c "{PEER}" (peer)': [PY, "-c", PEER],
    "xtalk --help": [*XTALK, "--help"],
    "xtalk --version": [*XTALK, "--version"],
    "xtalk plan examples/quickstart.toml": [*XTALK, "plan", "examples/quickstart.toml"],
    "xtalk campaign --help": [*XTALK, "campaign", "--help"],
    "xtalk sched --help": [*XTALK, "sched", "--help"],
}
#: command -> the most it may cost, in peers.
GOALS = {"xtalk --help": 2.0, "xtalk plan examples/quickstart.toml": 4.0}


def cpu_seconds(argv: list[str]) -> float:
    """User + system CPU time of one run of `argv` (and of the processes it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _plan_here() -> None:
    """Where the quickstart's SCHED_FIFO is refused (a container with no real-time runtime),
    `plan` exits 2 before its work is done: plan a copy under SCHED_OTHER instead (the same
    models and checks), and say so."""
    name = "xtalk plan examples/quickstart.toml"
    r = subprocess.run(COMMANDS[name], cwd=ROOT, capture_output=True, text=True, env=ENV)
    if r.returncode == 0:
        return
    import tempfile

    text = (ROOT / "examples/quickstart.toml").read_text()
    other = "\n".join("policy = \"other\"" if line.startswith("policy = ") else line
                      for line in text.splitlines() if not line.startswith("priority = "))
    copy = Path(tempfile.mkdtemp(prefix="xtalk-bench-")) / "quickstart-other.toml"
    copy.write_text(other + "\n")
    print(f"note: {name} refused here ({r.stderr.strip().splitlines()[-1][-160:]}); planning a copy with "
          f"policy = \"other\" instead")
    COMMANDS[name] = [*XTALK, "plan", str(copy)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="runs of each command (default 9)")
    args = ap.parse_args()
    if shutil.which(XTALK[0]) is None and XTALK[0] != PY:
        sys.exit(f"bench: {XTALK[0]} not found; run `make setup` first")
    _plan_here()
    for argv in COMMANDS.values():  # one run each first: files in the page cache, .pyc written
        cpu_seconds(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():
            times[name].append(cpu_seconds(argv))
    peer = statistics.median(times[f'python -c "{PEER}" (peer)'])
    print(f"CPU time per command, {args.runs} runs each, interleaved: median [min, max] ms; ratio of medians to the peer")
    width = max(map(len, COMMANDS))
    missed = []
    for name, t in times.items():
        m = statistics.median(t)
        ratio = m / peer
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"  goal ≤ {goal:g}×: {'met' if ratio <= goal else 'NOT MET'}"
        if goal is not None and ratio > goal:
            missed.append(name)
        print(f"  {name:<{width}}  {m * 1e3:7.1f} [{min(t) * 1e3:6.1f}, {max(t) * 1e3:6.1f}]  {ratio:5.2f}×{verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
