"""Ground truth for `xtalk worst`: the exhaustive sweep and the search, on one victim, in one run.

The sweep: every searchable kind of the catalog (space.py's space on this machine) alone,
the same enemy on every enemy CPU, at every footprint of its `bytes` axis (the other axes at
their first value; a kind without a footprint once), all interleaved with solo in one
experiment, SWEEP_REPS runs each of the confirmation's length; each slowdown against solo
with its 95 % CI (confirm.ratio). The search: `xtalk worst` with its stopping rule (default
margin and confidence), SEARCH_BUDGET, without stress-ng (the sweep has none either), its
confirmation at SWEEP_REPS runs each (the same precision as the sweep's estimates).

Printed: sweep-best and search-best (the confirmed worst) with their CIs, whether the
search's worst is within the sweep-best's CI or above it, search-best / sweep-best (point
estimates: two experiments, so no joint CI), what stopped the search (its rule or its
budget), search time / sweep time (each side's wall time, everything included), the runs of
each and the search's time by phase (pilot, exploration, halving, confirmation: runs, their
own seconds, wall seconds). Both halves run on the same machine in the same run, the sweep
first (XTALK_BENCH_SEARCH_FIRST=1 reverses them); XTALK_BENCH_OUT=DIR keeps the runs there.

Run: PYTHONPATH=src .venv/bin/python bench/worst_vs_sweep.py
Environment: XTALK_BENCH_VICTIM ("chase ½LLC", "chase 2×L2", "sum 4×LLC", "C pointer chase";
default chase ½LLC), XTALK_BENCH_SEARCH_BUDGET (10m), XTALK_BENCH_SWEEP_REPS (5),
XTALK_BENCH_KINDS (comma-separated: narrows both sides alike, to try the bench quickly).
About (kinds × footprints + 1) × SWEEP_REPS runs of 1-2 s plus the search: 20-40 minutes on
the 2-vCPU VM with the full catalog.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))
from potency import VICTIMS, pointer_chase  # noqa: E402  (bench/potency.py, beside this script)

from xtalk import catalog  # noqa: E402
from xtalk.characterize import _toml_value  # noqa: E402
from xtalk.targets.agent import local_facts  # noqa: E402
from xtalk.worst import space as space_mod  # noqa: E402
from xtalk.worst.confirm import ci_dict, ratio  # noqa: E402
from xtalk.worst.driver import MEMORY_SHARE, _available_memory  # noqa: E402
from xtalk.worst.output import ci_text  # noqa: E402
from xtalk.worst.runs import CONFIRM_RUN_S, Victim, experiment_text, refused, run_round  # noqa: E402

VICTIM = os.environ.get("XTALK_BENCH_VICTIM", "chase ½LLC")
SEARCH_BUDGET = os.environ.get("XTALK_BENCH_SEARCH_BUDGET", "10m")
SWEEP_REPS = int(os.environ.get("XTALK_BENCH_SWEEP_REPS", "5"))
KINDS = [k for k in os.environ.get("XTALK_BENCH_KINDS", "").split(",") if k] or None
SEED = 7


def victim_table(work: Path) -> dict:
    """The victim's experiment-file keys (the pointer chase compiled into `work`)."""
    if VICTIM == "C pointer chase":
        return pointer_chase(work, local_facts().caches["llc"])
    if VICTIM not in VICTIMS:
        sys.exit(f"XTALK_BENCH_VICTIM: {VICTIM!r} is not one of {', '.join([*VICTIMS, 'C pointer chase'])}")
    v, period, jobs = VICTIMS[VICTIM]
    return {**v, "period": period, "jobs": jobs}


def sweep_candidates(sp: space_mod.Space) -> dict[str, space_mod.Candidate]:
    """Every searchable kind at every footprint, alone and the same on every enemy CPU; its
    other axes at the catalog's default where the space holds it (a `buslock` splits its
    locks, as it does by default: the first value, false, is the aligned control), else at
    their first value."""
    out = {}
    for ks in sp.kinds.values():
        axes = {a.key: a.values for a in ks.axes}
        for b in axes.get("bytes", (None,)):
            params = [(a.key, b if a.key == "bytes" else sp.default(ks, a)) for a in ks.axes]
            e = space_mod.Enemy(ks.kind, sp.within(ks, params))
            c = space_mod.Candidate(sp.cpus, tuple((e,) for _ in sp.cpus))
            if c.footprint(sp) <= sp.memory_cap:
                out[f"{ks.kind}-{b or 'fixed'}".replace("*", "x").replace("/", "_")] = c
    return out


def sweep(work: Path, victim: Victim, sp: space_mod.Space) -> tuple[dict, float, int]:
    """The sweep's slowdowns (scenario -> (label, CI dict)), its seconds, its scenarios."""
    start = time.monotonic()
    cands = sweep_candidates(sp)
    # What the agent refuses on this machine (an llcsets footprint below two lines per set
    # of its LLC way, ...) would refuse the whole sweep: each checked alone, left out, said.
    for n, why in refused(victim, {n: c.tables() for n, c in cands.items()}, work, SEED).items():
        print(f"    sweep: {n} left out, refused by the agent: {why}", flush=True)
        del cands[n]
    text = experiment_text("worst-vs-sweep", victim, {n: c.tables() for n, c in cands.items()}, SWEEP_REPS, SEED,
                           CONFIRM_RUN_S, "bench/worst_vs_sweep.py: every searchable kind at every footprint")
    res = run_round(text, work, "sweep", "exec")
    solo = res.samples.get("solo", [])
    out = {n: (cands[n].label(), ci_dict(ratio(v, solo, "median"))) for n, v in res.samples.items() if n != "solo" and solo}
    out["_phase"] = phase([work / "sweep"])
    return out, time.monotonic() - start, len(cands)


def phase(dirs: list[Path]) -> tuple[int, float, float]:
    """Runs, their own seconds (each run's start to end) and the wall seconds from the first
    run's start to the last one's end, over the run directories under `dirs`."""
    spans = []
    for d in dirs:
        for rj in sorted(d.glob("runs/*/run.json")):
            m = json.loads(rj.read_text())
            if m.get("started_unix_ns") and m.get("ended_unix_ns"):
                spans.append((m["started_unix_ns"], m["ended_unix_ns"]))
    if not spans:
        return 0, 0.0, 0.0
    return len(spans), sum(e - s for s, e in spans) / 1e9, (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9


def search_phases(out: Path, batches: int) -> dict[str, tuple[int, float, float]]:
    """The search's time by phase: its solo pilot, the first round's batches (the stopping
    rule's exploration), the later rounds (halving), the confirmation."""
    rounds = sorted((d for d in (out / "rounds").glob("round*") if d.is_dir()), key=lambda d: int(d.name[5:]))
    return {"pilot": phase([out / "rounds" / "pilot"]), "exploration": phase(rounds[:batches]),
            "halving": phase(rounds[batches:]), "confirmation": phase([out / "rounds" / "confirm"])}


def search(work: Path, victim_text: str) -> tuple[dict, float]:
    """`xtalk worst`'s result.json and its seconds. Its confirmation runs SWEEP_REPS runs of
    each scenario, as the sweep does: the two estimates have the same precision."""
    from xtalk.worst.driver import run as run_worst
    from xtalk.worst.inputs import request

    start = time.monotonic()
    req = request(None, victim_text, SEARCH_BUDGET, "median", "exec", work / "search", KINDS, False, SEED,
                  confirm_repetitions=SWEEP_REPS)
    out = run_worst(req, Console(quiet=True))
    doc = json.loads((out / "result.json").read_text())
    doc["_phases"] = search_phases(out, len(doc["stopping"].get("history") or []))
    return doc, time.monotonic() - start


def main() -> None:
    facts = local_facts()
    cpus = facts.online_cpus
    if len(cpus) < 2:
        sys.exit("bench: needs two CPUs")
    victim_cpu, others = cpus[-1], cpus[:-1]
    keep = os.environ.get("XTALK_BENCH_OUT")  # a new directory that keeps the runs, else a temporary one
    with (contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory(prefix="xtalk-worst-vs-sweep-")) as tmp:
        work = Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        table = victim_table(work)
        victim = Victim(table, [victim_cpu])
        text = ", ".join(f"{k} = {_toml_value(v)}" for k, v in {**table, "cpus": [victim_cpu]}.items())
        sp = space_mod.build(catalog.current(), facts.caches, others, int(_available_memory() * MEMORY_SHARE), KINDS,
                             facts.environment.get("kernel", {}).get("machine"))
        print(f"worst vs sweep: {VICTIM} on CPU {victim_cpu}, enemies on {others}; {len(sp.kinds)} kinds; "
              f"sweep {SWEEP_REPS} interleaved runs each; search budget {SEARCH_BUDGET}", flush=True)
        if os.environ.get("XTALK_BENCH_SEARCH_FIRST") == "1":
            doc, t_search = search(work, text)
            sw, t_sweep, n = sweep(work, victim, sp)
        else:
            sw, t_sweep, n = sweep(work, victim, sp)
            doc, t_search = search(work, text)
    sweep_phase = sw.pop("_phase")
    phases = doc.pop("_phases")
    best = max((k for k in sw if sw[k][1]), key=lambda k: sw[k][1]["estimate"])
    label, b = sw[best]
    w = doc["worst"]["vs_solo"]
    stop = doc["stopping"]
    e = stop.get("estimate") or {}
    where = ("above" if w["estimate"] > b["high"] else "within" if w["estimate"] >= b["low"] else "BELOW")
    print(f"sweep ({n} scenarios, {t_sweep:.0f} s): best {label} {ci_text(b)}")
    print(f"search ({t_search:.0f} s, stopped by its {stop['stopped_by']}, {e.get('tried', 0)} random candidates, "
          f"p ≤ {e.get('beyond', 1):.1%}): worst {doc['worst']['label']} {ci_text(w)}")
    print(f"search-best / sweep-best: {w['estimate'] / b['estimate']:.2f} (the search's estimate is {where} the sweep-best's CI); "
          f"search time / sweep time: {t_search / t_sweep:.2f}")
    runs = sum(p[0] for p in phases.values())
    print(f"runs: search {runs}, sweep {sweep_phase[0]} (search / sweep {runs / max(1, sweep_phase[0]):.2f}); "
          f"a search run {sum(p[1] for p in phases.values()) / max(1, runs):.2f} s, a sweep run "
          f"{sweep_phase[1] / max(1, sweep_phase[0]):.2f} s (each run's own time, start to end)")
    print("search by phase (runs, their own s, wall s): " + "; ".join(
        f"{k} {n}, {own:.0f}, {wall:.0f}" for k, (n, own, wall) in phases.items())
          + f"; outside the runs (plan checks, waits for the machine lock) {doc.get('outside_runs_s', 0):.0f} s")
    print(f"sweep (runs, their own s, wall s): {sweep_phase[0]}, {sweep_phase[1]:.0f}, {sweep_phase[2]:.0f}; "
          f"outside the runs {t_sweep - sweep_phase[1]:.0f} s (the agent's check of each scenario alone and of the plans, "
          "lock waits)")
    res = doc.get("residual") or {}
    if res.get("residual"):
        r = res["residual"]
        print(f"search's residual ({res['finalist']}, {res['label']}): {res['slowdown']['estimate']:.2f}× against "
              f"{res['explained']['estimate']:.2f}× from its channels alone, added: {r['estimate']:+.2f}× "
              f"[{r['low']:+.2f}, {r['high']:+.2f}]: {res['reading']}")
    elif res:
        print(f"search's residual: {res.get('why')}")
    print("    sweep, all: " + ", ".join(f"{sw[k][0]} {sw[k][1]['estimate']:.2f}" for k in
                                         sorted((k for k in sw if sw[k][1]), key=lambda k: -sw[k][1]["estimate"])))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
