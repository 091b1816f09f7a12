"""Check what `make board-test` brought back from the board, as the host reads any campaign:
every run completed by an aarch64 agent on the emulated board (run.json says so), each run's
job rows all there and consistent, the board's PMU counters in the job rows (cycles at least;
the others reported as found), and the board left clean (no agent, victim or enemy process,
no xtalk cgroup, nothing in /run/xtalk but the agent's lock and its countable-events cache).

    python board/check_board.py SSH_TARGET_URL CAMPAIGN_DIR...

Prints what it found (the counters the emulated PMU gave, per event); exit 1 naming every
thing wrong."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import xtalk
from xtalk.outcome import read_outcome
from xtalk.store.jobs import convert_run
from xtalk.targets.ssh import SshTarget

#: What /run/xtalk keeps between runs, xtalk's furniture, not leftovers: the agent's locks, its
#: per-boot cache of the countable perf events (observe/capabilities.rs) and the agents'
#: agreement on mounting tracefs (observe/tracefs.rs). tests/leftovers.py's RUN_KEEP is the same
#: set (tests/test_board_scripts.py checks they agree).
RUN_KEEP = ("lock", "target.lock", "countable.json", "tracefs.lock", "tracefs.users")

# Checked on the board after the runs: each line names what it found (empty when clean).
CLEAN = {
    "processes": "ps -eo comm= | grep -E '^(xt-victim|xt-enemy|xtalk-agent)' || true",
    "cgroups": "find /sys/fs/cgroup -maxdepth 3 -name 'xtalk-*' -type d || true",
    "/run/xtalk": "ls -A /run/xtalk 2>/dev/null | grep -vx " + " ".join(f"-e {n}" for n in RUN_KEEP) + " || true",
}


def check_run(run_dir: Path, counters_seen: dict[str, list[int]]) -> list[str]:
    """What is wrong with one finished run of the board."""
    where = run_dir.name
    meta = read_outcome(run_dir)
    doc = json.loads((run_dir / "run.json").read_text())
    wrong = []
    if meta is None or meta.status != "completed":
        return [f"{where}: status {doc.get('status')!r} ({doc.get('reason')})"]
    env = doc["environment"]
    if env["kernel"]["machine"] != "aarch64":
        wrong.append(f"{where}: the agent saw machine {env['kernel']['machine']!r}, not aarch64")
    if not env["virtualization"].get("emulated"):
        wrong.append(f"{where}: run.json does not say the board is emulated ({env['virtualization']})")
    if not doc["configuration"]["restored"] or doc["configuration"]["restore_errors"]:
        wrong.append(f"{where}: machine not restored: {doc['configuration']['restore_errors']}")
    df = convert_run(run_dir)
    if df is None or len(df) != doc["jobs_recorded"] or doc["jobs_recorded"] == 0:
        return wrong + [f"{where}: {0 if df is None else len(df)} job rows, run.json says {doc['jobs_recorded']}"]
    if df["job"].tolist() != list(range(len(df))):
        wrong.append(f"{where}: job numbers not 0..{len(df) - 1}")
    order = (df["release_ns"] <= df["wakeup_ns"]) & (df["wakeup_ns"] <= df["start_ns"]) & (df["start_ns"] < df["end_ns"])
    if not order.all():
        wrong.append(f"{where}: {int((~order).sum())} rows out of order (release ≤ wake-up ≤ start < end)")
    for col in (c for c in df.columns if c.startswith("ctr_") and c not in ("ctr_enabled_ns", "ctr_running_ns")):
        counters_seen.setdefault(col[4:], []).extend(int(v) for v in df[col].dropna())
    return wrong


def main(url: str, stores: list[Path]) -> int:
    """Check every run of `stores` and the board behind `url`; print the findings."""
    wrong, seen, runs = [], {}, 0
    for store in stores:
        for run_dir in sorted((store / "runs").iterdir()):
            runs += 1
            wrong += check_run(run_dir, seen)
        frame = xtalk.open(store).runs()
        if len(frame) == 0 or set(frame.status) != {"completed"}:
            wrong.append(f"{store.name}: run statuses {sorted(set(frame.status))}")
    print(f"board-check: {runs} runs read back from {len(stores)} campaign(s)")
    for event, values in sorted(seen.items()):
        nonzero = [v for v in values if v > 0]
        print(f"board-check: counter {event}: {len(values)} job values, {len(nonzero)} non-zero"
              + (f", median {sorted(nonzero)[len(nonzero) // 2]}" if nonzero else ""))
    if not any(v > 0 for v in seen.get("cycles", [])):
        wrong.append("no job row has a non-zero cycles count from the board's PMU")
    wrong += left_behind(url, "board-check", "on the board")
    return verdict(wrong, "board-check")


def left_behind(url: str, tag: str, where: str) -> list[str]:
    """What xtalk left on the machine behind ``url`` (CLEAN), each thing printed."""
    machine, wrong = SshTarget.from_url(url), []
    for what, command in CLEAN.items():
        left = machine._call(command).stdout.decode().split()
        print(f"{tag}: left {where}, {what}: {' '.join(left) or 'nothing'}")
        if left:
            wrong.append(f"left {where}: {what}: {' '.join(left)}")
    return wrong


def verdict(wrong: list[str], tag: str) -> int:
    """Print every thing wrong and the verdict; the exit status (1 when anything is wrong)."""
    for w in wrong:
        print(f"{tag}: WRONG: {w}", file=sys.stderr)
    print(f"{tag}: {'ok' if not wrong else f'{len(wrong)} thing(s) wrong'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: check_board.py SSH_TARGET_URL CAMPAIGN_DIR...")
    sys.exit(main(sys.argv[1], [Path(p) for p in sys.argv[2:]]))
