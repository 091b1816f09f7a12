"""Potency bench: are xtalk's enemies at least as hurtful as the best open stressor?

Part 1, slowdown. Three reference victims, each pinned to the last CPU: a chase over
2 × L2, a chase over ½ LLC and a sequential sum over 4 × LLC. Against each, xtalk's memory
and cache enemies (and bus locks) and stress-ng's stream, cache, memrate, vm, memcpy, l1cache,
matrix, cpu and lockbus stressors (as `external` enemies) run one copy per other CPU, all scenarios of a victim
interleaved in one experiment, REPETITIONS times. Printed: the strongest of each side (median
slowdown against solo, 95 % CI) and their ratio (> 1: xtalk hurts more).

Part 2, bandwidth. xtalk's read, write, ntstore and copy enemies (rate over the victim's
window) versus stress-ng stream and memrate (their own MB/s metrics), one instance on one
CPU, in BW_ROUNDS interleaved rounds; medians per figure. memrate reports a dozen methods per
side: each method's median over the rounds, then the best method (taking the best of single
runs would favour memrate by picking its luckiest sample). Like is compared with like: the
best write-class enemy (write, whose store method is measured fastest at start, or ntstore)
against memrate's best write method; the store method each chose is printed.

Part 3, the search (`xtalk worst`). Per reference victim, and per a victim the project did
not write (bench/pointer_chase.c, a plain C pointer chase compiled here and run as a `command`
victim), the worst combination the search finds within WORST_BUDGET, confirmed against the
best stress-ng stressor in interleaved runs: printed worst-found / best stressor (median
execution time) with its 95 % CI, and both slowdowns against solo.

Run: PYTHONPATH=src .venv/bin/python bench/potency.py   (about 25 minutes on 2 cores, and
WORST_BUDGET per victim of part 3); `bench/potency.py worst` runs part 3 alone.
stress-ng is installed with apt-get when missing (root needed), and the bench says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import _peers as peers  # bench/_peers.py, beside this script
from rich.console import Console

from xtalk.analysis.slowdown import SOLO, ratio_ci
from xtalk.characterize import _toml_value
from xtalk.runner import run_experiment
from xtalk.store import open as open_results
from xtalk.targets.agent import local_facts

REPETITIONS = int(os.environ.get("XTALK_BENCH_REPETITIONS", "10"))  # >= 10 for the record; less only to try the bench
BW_ROUNDS = int(os.environ.get("XTALK_BENCH_BW_ROUNDS", "5"))
XTALK = {
    "x-l2": {"kind": "l2"},
    "x-llc": {"kind": "llc"},
    "x-tlb": {"kind": "tlb", "pages": 16384},
    "x-read": {"kind": "read", "bytes": "4*llc"},
    "x-write": {"kind": "write", "bytes": "4*llc"},
    "x-copy": {"kind": "copy", "bytes": "8*llc"},
    "x-ntstore": {"kind": "ntstore", "bytes": "4*llc"},
    "x-chase-mlp": {"kind": "chase", "bytes": "4*llc", "chains": 8},
    # CPU-side peers of stress-ng cpu and l1cache: on a VM whose vCPUs may be SMT siblings
    # on the host, the core itself can be the channel.
    "x-pi": {"kind": "pi"},
    # Bus locks (split locked adds), against stress-ng's lockbus.
    "x-buslock": {"kind": "buslock"},
    "x-l1d": {"kind": "l1d"},
}
STRESS_NG = ["stream", "cache", "memrate", "vm", "memcpy", "l1cache", "matrix", "cpu", "lockbus"]
VICTIMS = {
    "chase 2×L2": ({"body": "chase", "bytes": "2*l2", "accesses": 20000}, "10ms", 40),
    "chase ½LLC": ({"body": "chase", "bytes": "llc/2", "accesses": 20000}, "10ms", 40),
    "sum 4×LLC": ({"body": "sum", "bytes": "4*llc"}, "100ms", 12),
}


def ensure_stress_ng() -> str:
    return peers.ensure("stress-ng", "stress-ng")


def experiment(name: str, victim: dict, period: str, jobs: int, cpu: int, others: list[int]) -> str:
    lines = [f'name = "potency-{name}"', f"repetitions = {REPETITIONS}", "seed = 7", 'settle = "400ms"', "",
             "[victim]", *(f"{k} = {_toml_value(v)}" for k, v in victim.items()),
             f'period = "{period}"', f"jobs = {jobs}", "warmup_jobs = 3", f"cpus = [{cpu}]"]
    scen = {n: {**t, "cpus": others, "per_cpu": True} for n, t in XTALK.items()}
    for s in STRESS_NG:
        # Affinity is inherited through exec: each copy's stress-ng stays on its CPU.
        scen[f"sng-{s}"] = {"kind": "external", "argv": ["stress-ng", f"--{s}", "1"], "cpus": others, "per_cpu": True}
    for n, t in scen.items():
        lines += ["", "[[scenario]]", f'name = "{n}"', f"enemies = [{_toml_value(t)}]"]
    return "\n".join(lines) + "\n"


def slowdowns(results: Path) -> dict[str, tuple[float, float, float]]:
    jobs = open_results(results).jobs()
    jobs = jobs[~jobs.warmup]
    groups = {s: [g.exec_ns.to_numpy() for _, g in d.groupby("run_id")] for s, d in jobs.groupby("scenario")}
    return {s: ratio_ci(g, groups[SOLO], "median", n_boot=1000) for s, g in groups.items() if s != SOLO}


def xtalk_bandwidth(work: Path, cpu: int, victim_cpu: int, round_: int, methods: dict[str, list[str]] | None = None) -> dict[str, float]:
    """MB/s of xtalk's read, write, ntstore and copy enemies, alone on `cpu` for 2 s each;
    the store method each write-class enemy chose (run.json's notes) appended to `methods`."""
    text = "\n".join([
        f'name = "bandwidth{round_}"', "repetitions = 1", 'settle = "200ms"', "", "[victim]", 'body = "pi"', "iterations = 1000",
        'period = "10ms"', "jobs = 200", f"cpus = [{victim_cpu}]",
        *[f'\n[[scenario]]\nname = "{k}"\nenemies = [{_toml_value({"kind": k, "bytes": "8*llc", "cpus": [cpu]})}]'
          for k in ("read", "write", "ntstore", "copy")],
    ]) + "\n"
    f = work / f"bandwidth{round_}.toml"
    f.write_text(text)
    out = run_experiment(f, work / "runs", Console(quiet=True))
    mbs = {}
    for d in (out / "runs").iterdir():
        meta = json.loads((d / "run.json").read_text())
        for e in meta.get("enemies", []):
            mbs[e["kind"]] = e["window_rate"] / 1e6
            for n in meta.get("notes") or []:
                if methods is not None and n.startswith(f"enemy {e['name']}: store method "):
                    methods.setdefault(e["kind"], []).append(n.split("store method ")[1].split()[0])
    return mbs


def stress_ng_bandwidth(cpu: int) -> dict[str, float]:
    """stress-ng stream and every memrate method, MB/s, one instance on `cpu`, from their own metrics."""
    out = {}
    for _ in range(2):  # stream sometimes says "run duration too short to determine memory rate": once more
        r = subprocess.run(["stress-ng", "--stream", "1", "--taskset", str(cpu), "--timeout", "8", "--metrics"],
                           capture_output=True, text=True, timeout=60)
        m = re.search(r"memory rate: ([0-9.]+) MB read/sec, ([0-9.]+) MB write/sec", r.stdout + r.stderr)
        if m:
            break
    if m:
        out["stream read"], out["stream write"] = float(m.group(1)), float(m.group(2))
        # STREAM convention: copy traffic = read + write.
        out["stream read+write"] = float(m.group(1)) + float(m.group(2))
    r = subprocess.run(["stress-ng", "--memrate", "1", "--taskset", str(cpu), "--timeout", "4", "--metrics"],
                       capture_output=True, text=True, timeout=60)
    for v, k in re.findall(r"memrate\s+([0-9.]+) (\w+) MB per sec", r.stdout + r.stderr):
        out[f"memrate {k}"] = float(v)
    return out


def bandwidth(work: Path, cpu: int, victim_cpu: int) -> None:
    """Part 2: interleaved rounds, medians, ratios."""
    xs: dict[str, list[float]] = {}
    ss: dict[str, list[float]] = {}
    chosen: dict[str, list[str]] = {}
    for r in range(BW_ROUNDS):
        for k, v in xtalk_bandwidth(work, cpu, victim_cpu, r, chosen).items():
            xs.setdefault(k, []).append(v)
        for k, v in stress_ng_bandwidth(cpu).items():
            ss.setdefault(k, []).append(v)
    x = {k: float(np.median(v)) for k, v in xs.items()}
    # Like with like: the best write-class enemy against memrate's best write method.
    writers = {k: x[k] for k in ("write", "ntstore") if k in x}
    if writers:
        best_w = max(writers, key=writers.get)
        x[f"write-class (best: {best_w})"] = writers[best_w]
    s = {k: float(np.median(v)) for k, v in ss.items()}
    for side in ("read", "write"):
        methods = {k: v for k, v in s.items() if k.startswith(f"memrate {side}")}
        if methods:
            best = max(methods, key=methods.get)
            s[f"memrate {side} (best: {best.split()[1]})"] = methods[best]
    print(f"\nbandwidth, one instance on CPU {cpu}, median of {BW_ROUNDS} interleaved rounds (MB/s)")
    for k, v in x.items():
        if k in xs:
            print(f"  xtalk {k:<7} {v:10.0f}   rounds: {', '.join(f'{a:.0f}' for a in xs[k])}"
                  + (f"   store method: {', '.join(chosen[k])}" if k in chosen else ""))
    for k, v in s.items():
        if not k.startswith("memrate") or "best" in k:
            print(f"  stress-ng {k:<28} {v:10.0f}")
    pairs = [("read", "stream read"), ("write", "stream write"), ("copy", "stream read+write")]
    best_write = [k for k in x if k.startswith("write-class (best")]
    pairs += [("read", k) for k in s if k.startswith("memrate read (best")]
    pairs += [(w, k) for w in best_write for k in s if k.startswith("memrate write (best")]
    for a, b in pairs:
        if a in x and b in s:
            print(f"  ratio xtalk {a} / stress-ng {b}: {x[a] / s[b]:.2f}")


def main() -> None:
    ensure_stress_ng()
    facts = local_facts()
    cpus = facts.online_cpus
    if len(cpus) < 2:
        sys.exit("bench: needs two CPUs")
    victim_cpu, others = cpus[-1], cpus[:-1]
    console = Console(quiet=True)
    with tempfile.TemporaryDirectory(prefix="xtalk-potency-") as tmp:
        work = Path(tmp)
        print(f"potency: victims on CPU {victim_cpu}, enemies on {others}, {REPETITIONS} interleaved repetitions")
        print(f"{'victim':<12} {'xtalk strongest':<34} {'stress-ng strongest':<34} {'ratio':>6}")
        for vname, (victim, period, jobs) in VICTIMS.items():
            f = work / f"{len(list(work.iterdir()))}.toml"
            f.write_text(experiment(re.sub(r"[^A-Za-z0-9]", "", vname), victim, period, jobs, victim_cpu, others))
            res = slowdowns(run_experiment(f, work / "runs", console))
            bx = max((s for s in res if s.startswith("x-")), key=lambda s: res[s][0])
            bs = max((s for s in res if s.startswith("sng-")), key=lambda s: res[s][0])
            fmt = lambda s: f"{s} {res[s][0]:.2f}× [{res[s][1]:.2f}, {res[s][2]:.2f}]"  # noqa: E731
            print(f"{vname:<12} {fmt(bx):<34} {fmt(bs):<34} {res[bx][0] / res[bs][0]:>6.2f}", flush=True)
            print("    all: " + ", ".join(f"{s} {v[0]:.2f}" for s, v in sorted(res.items(), key=lambda kv: -kv[1][0])))
        bandwidth(work, others[0], victim_cpu)
        worst_part(work, victim_cpu)


# ---- Part 3: the search's worst combination per victim (xtalk worst) ----------------------

WORST_BUDGET = os.environ.get("XTALK_BENCH_WORST_BUDGET", "10m")  # per victim; <= 10 min for the record
#: The pointer chase's footprint and steps: half the LLC, like the reference chase ½LLC.
CHASE_STEPS = int(os.environ.get("XTALK_BENCH_CHASE_STEPS", "1000000"))


def pointer_chase(work: Path, llc: int) -> dict:
    """bench/pointer_chase.c compiled into `work`, as a `command` victim's keys."""
    exe = work / "pointer_chase"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(Path(__file__).parent / "pointer_chase.c")], check=True)
    return {"body": "command", "argv": [str(exe), str(llc // 2), str(CHASE_STEPS)]}


def worst_part(work: Path, victim_cpu: int) -> None:
    """Part 3: `xtalk worst` per victim; worst-found / best stress-ng stressor with CIs."""
    from xtalk.worst.driver import run as run_worst
    from xtalk.worst.inputs import request
    from xtalk.worst.output import ci_text

    facts = local_facts()
    victims = {"C pointer chase": pointer_chase(work, facts.caches["llc"])}
    victims.update({name: {**v, "period": period, "jobs": jobs} for name, (v, period, jobs) in VICTIMS.items()})
    print(f"\nthe search (xtalk worst, budget {WORST_BUDGET} per victim, median execution time, victim on CPU {victim_cpu})")
    print(f"{'victim':<16} {'worst / best stressor':<26} {'worst vs solo':<22} {'best stressor vs solo':<30} worst found")
    for k, (name, table) in enumerate(victims.items()):
        text = ", ".join(f"{key} = {_toml_value(v)}" for key, v in {**table, "cpus": [victim_cpu]}.items())
        req = request(None, text, WORST_BUDGET, "median", "exec", Path(os.environ.get("XTALK_BENCH_WORST_OUT", work)) / f"worst{k}",
                      None, True, 7)
        out = run_worst(req, Console(quiet=True))
        doc = json.loads((out / "result.json").read_text())
        w, b = doc["worst"], doc.get("best_stressor") or {}
        best = f"{b.get('scenario', '-').removeprefix('sng-')} {ci_text(b.get('vs_solo'))}"
        print(f"{name:<16} {ci_text(w.get('vs_best_stressor')):<26} {ci_text(w['vs_solo']):<22} {best:<30} {w['label']}",
              flush=True)
        if doc["stress_ng"] != "present":
            print(f"    stress-ng {doc['stress_ng']}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    if sys.argv[1:] == ["worst"]:
        ensure_stress_ng()
        with tempfile.TemporaryDirectory(prefix="xtalk-potency-") as tmp:
            worst_part(Path(tmp), local_facts().online_cpus[-1])
    else:
        main()
