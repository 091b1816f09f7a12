"""Check what `make guest-test` (board/guest-test.sh) measured and left: the three latency
campaigns (native, guest, guest under the reservation) complete, with every job row; the
guest's runs made by an x86_64 agent on its PREEMPT_RT kernel under the hypervisor the guest
was booted with (TCG recorded as emulated); the comparison with latency rows (min, p50, p99,
max µs) for each label and scenario; the SCHED_DEADLINE reservation on every vCPU thread
during the reserved run (read back by sched_getattr right after it was set and just before it
was removed, and from /proc/TID/sched by the run's own command) and each thread's previous
policy back after it; the guest left clean (no agent, victim or enemy process, no xtalk
cgroup, nothing in /run/xtalk but its furniture: check_board.RUN_KEEP).

    python board/check_guest.py SSH_TARGET_URL RESULTS_DIR

Prints what it found; exit 1 naming every thing wrong. Whether qemu is gone after the guest
went down is checked by board/guest-test.sh (the guest is still needed here).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from check_board import left_behind, verdict

from xtalk.outcome import read_outcome
from xtalk.sched.reserve import SCHED_DEADLINE, Policy, same_policy
from xtalk.store.jobs import convert_run

PARTS = ("native", "guest", "guest-deadline")
STATS = ("min_us", "p50_us", "p99_us", "max_us")


def newest(d: Path) -> Path | None:
    stores = sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime) if d.is_dir() else []
    return stores[-1] if stores else None


def check_store(part: str, store: Path, accel: str) -> list[str]:
    """What is wrong with one campaign's runs (all of them complete, every job row there;
    in the guest: x86_64, PREEMPT_RT, the hypervisor it was booted with)."""
    wrong, runs = [], sorted((store / "runs").iterdir())
    if not runs:
        return [f"{part}: no run in {store}"]
    for run_dir in runs:
        where = f"{part}/{run_dir.name}"
        meta = read_outcome(run_dir)
        doc = json.loads((run_dir / "run.json").read_text())
        if meta is None or meta.status != "completed":
            wrong.append(f"{where}: status {doc.get('status')!r} ({doc.get('reason')})")
            continue
        if not doc["configuration"]["restored"] or doc["configuration"]["restore_errors"]:
            wrong.append(f"{where}: machine not restored: {doc['configuration']['restore_errors']}")
        df = convert_run(run_dir)
        if df is None or len(df) != doc["jobs_recorded"] or doc["jobs_recorded"] == 0:
            wrong.append(f"{where}: {0 if df is None else len(df)} job rows, run.json says {doc['jobs_recorded']}")
        if part == "native":
            continue
        env = doc["environment"]
        if env["kernel"]["machine"] != "x86_64" or not env["kernel"]["preempt_rt"]:
            wrong.append(f"{where}: the guest's kernel is {env['kernel']['machine']} PREEMPT_RT={env['kernel']['preempt_rt']}")
        virt = env["virtualization"]
        if not virt.get("hypervisor"):
            wrong.append(f"{where}: run.json saw no hypervisor in the guest ({virt})")
        if (accel == "tcg") != bool(virt.get("emulated")):
            wrong.append(f"{where}: booted with {accel} but run.json says emulated={virt.get('emulated')!r}")
    return wrong


def check_compare(csv_path: Path, labels: list[str]) -> list[str]:
    """Latency rows with min / p50 / p99 / max for every label, solo and the enemy scenario."""
    if not csv_path.is_file():
        return [f"no comparison at {csv_path}"]
    rows = list(csv.DictReader(csv_path.open()))
    wrong = [] if {r["scenario"] for r in rows} >= {"solo", "write"} else [f"compare: scenarios {sorted({r['scenario'] for r in rows})}"]
    for r in rows:
        for lb in labels:
            missing = [s for s in STATS if not r.get(f"{lb}: {s}")]
            if missing:
                wrong.append(f"compare: {r['cell']}/{r['scenario']}: no {', '.join(missing)} for {lb}")
    print(f"guest-check: compare.csv: {len(rows)} latency rows × {len(labels)} labels ({', '.join(labels)})")
    return wrong


def check_overheads(csv_path: Path, labels: list[str]) -> list[str]:
    """The measured scheduler overheads (the runs' kernel traces) for every label: each Δ and
    Δ^relEv with a mean, solo and the enemy scenario."""
    if not csv_path.is_file():
        return [f"no scheduler overheads at {csv_path} (did the runs carry a [trace]?)"]
    rows = list(csv.DictReader(csv_path.open()))
    wrong = []
    for sc in ("solo", "write"):
        for delta in ("Δevent", "Δrel", "Δsched", "Δcxs", "Δ^relEv"):
            row = next((r for r in rows if r["scenario"] == sc and r["overhead"] == delta), None)
            missing = [lb for lb in labels if row is None or not row.get(f"{lb}: mean µs")]
            if missing:
                wrong.append(f"overheads: {sc} {delta}: no mean for {', '.join(missing)}")
    print(f"guest-check: overheads.csv: {len(rows)} rows (scenario × Δ) × {len(labels)} labels")
    return wrong


def check_reservation(results: Path) -> list[str]:
    """Every vCPU thread under (Θ, Π) during the run, as set, and its old policy after."""
    rec = json.loads((results / "reserve.json").read_text())
    vcpus = (results / "vcpus.txt").read_text().split()
    wrong = []
    if sorted(rec["threads"]) != sorted(vcpus):
        wrong.append(f"reservation on threads {sorted(rec['threads'])}, the vCPUs are {vcpus}")
    want = (SCHED_DEADLINE, rec["budget_ns"], rec["period_ns"], rec["period_ns"])
    for tid, e in rec["threads"].items():
        for when in ("during", "end"):
            p = Policy(**e[when])
            if (p.policy, p.runtime_ns, p.deadline_ns, p.period_ns) != want:
                wrong.append(f"thread {tid} {when} the run: {p.describe()}, not Θ={want[1]} Π={want[2]} ns")
        if e.get("after") != "gone" and not same_policy(Policy(**e["before"]), Policy(**e["after"])):
            wrong.append(f"thread {tid}: was {Policy(**e['before']).describe()}, left {Policy(**e['after']).describe()}")
    if not rec.get("restored"):
        wrong.append("xtalk sched reserve says the threads were not all restored")
    if rec.get("status") != 0:
        wrong.append(f"the reserved campaign exited {rec.get('status')}")
    during = dict(line.split() for line in (results / "policy-during.txt").read_text().splitlines() if line.strip())
    after = dict(line.split() for line in (results / "policy-after.txt").read_text().splitlines() if line.strip())
    for tid in vcpus:
        if during.get(tid) != str(SCHED_DEADLINE):
            wrong.append(f"/proc/{tid}/sched during the run: policy {during.get(tid)}, not {SCHED_DEADLINE}")
        if tid in rec["threads"] and after.get(tid) != str(rec["threads"][tid]["before"]["policy"]):
            wrong.append(f"/proc/{tid}/sched after the run: policy {after.get(tid)}")
    print(f"guest-check: reservation Θ={rec['budget_ns']} ns Π={rec['period_ns']} ns on vCPU threads {' '.join(vcpus)}: "
          f"/proc/TID/sched policy during {sorted(set(during.values()))}, after {sorted(set(after.values()))}")
    return wrong


def vcpu_share(results: Path) -> None:
    """Print how much of a host CPU each vCPU thread took during each guest campaign
    (vcpu-cpu.txt: /proc/TID/schedstat's CPU time around it); information, not a check."""
    path = results / "vcpu-cpu.txt"
    marks = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, wall, *cpus = line.split()
        marks[name] = (int(wall), {t: int(ns) for t, ns in (c.split(":") for c in cpus)})
    for part in ("guest", "guest-deadline"):
        if f"{part}-start" in marks and f"{part}-end" in marks:
            (w0, c0), (w1, c1) = marks[f"{part}-start"], marks[f"{part}-end"]
            shares = " ".join(f"{t} {(c1[t] - c0[t]) / (w1 - w0):.2f}" for t in c0 if t in c1)
            print(f"guest-check: {part}: CPU per wall second of each vCPU thread over {(w1 - w0) / 1e9:.0f} s: {shares}")


def main(url: str, results: Path) -> int:
    accel = "tcg" if "name=guest-tcg" in url else "kvm"
    wrong, labels = [], ["native", f"guest-{accel}", "guest-deadline"]
    for part in PARTS:
        store = newest(results / part)
        if store is None:
            wrong.append(f"{part}: no campaign under {results / part}")
            continue
        found = check_store(part, store, accel)
        print(f"guest-check: {part}: {len(list((store / 'runs').iterdir()))} runs, {'ok' if not found else 'WRONG'}")
        wrong += found
    wrong += check_compare(results / "compare" / "compare.csv", labels)
    wrong += check_overheads(results / "compare" / "overheads.csv", labels)
    wrong += check_reservation(results)
    vcpu_share(results)
    wrong += left_behind(url, "guest-check", "in the guest")
    return verdict(wrong, "guest-check")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: check_guest.py SSH_TARGET_URL RESULTS_DIR")
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
