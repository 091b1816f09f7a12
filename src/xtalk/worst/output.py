"""What `xtalk worst` leaves in its output directory:

    worst.toml    the worst combination as an experiment (with the runner-ups and the best
                  stress-ng stressor as scenarios): `xtalk plan worst.toml`, `xtalk run worst.toml`
    result.json   the victim, the statistic, the worst combination and runner-ups with their
                  slowdowns (95 % CI) against solo and against the best stressor
    trace.json    every round of the search: candidates, scores, who was kept
    trace.png     the search as a figure: each candidate's score per round, the finalists'
                  confirmed slowdowns with their CIs
    stopping.png  best-so-far against candidates tried in the first round, the stopping
                  rule's threshold and where it fired (or that the budget ran out)
    rounds/       every round's experiment file and runs (the evidence behind each number)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .. import safepath
from .runs import Victim, experiment_text


def write_experiment(path: Path, victim: Victim, scenarios: dict[str, list[dict]], repetitions: int, seed: int,
                     description: str) -> Path:
    """The reproducing experiment: the victim as given (its own jobs) and `scenarios`."""
    from .runs import CONFIRM_RUN_S

    safepath.write_text(path, experiment_text("worst", victim, scenarios, repetitions, seed, CONFIRM_RUN_S, description))
    return path


def write_json(path: Path, doc: dict) -> Path:
    safepath.write_text(path, json.dumps(doc, indent=2, default=str) + "\n")
    return path


def figure(path: Path, trace: dict, confirmed: dict[str, dict], statistic: str, metric: str) -> Path:
    """The search trace: one line per candidate through the rounds it survived (its score in
    each round, against that round's solo), the finalists' confirmed slowdowns with CIs at
    the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120, layout="tight")  # its own engine: the report's style may set another
    rounds = trace.get("rounds", [])
    paths: dict[str, list[tuple[int, float]]] = {}
    for r in rounds:
        for c in r["candidates"]:
            if c["score"] is not None:
                paths.setdefault(c["key"], []).append((r["round"], c["score"]))
    labels = {c["key"]: c["label"] for r in rounds for c in r["candidates"]}
    finalists = {v["key"] for v in confirmed.values() if v.get("key")}
    for key, pts in paths.items():
        xs, ys = zip(*pts)
        fin = key in finalists
        ax.plot(xs, ys, "-o", ms=3 if not fin else 5, lw=0.6 if not fin else 1.6, alpha=0.35 if not fin else 1.0,
                color=None if fin else "grey", label=labels[key][:90] if fin else None)
    x = len(rounds) + 1
    for i, (name, v) in enumerate(confirmed.items()):
        s = v.get("vs_solo")
        if not s:
            continue
        ax.errorbar([x + 0.1 * i], [s["estimate"]], yerr=[[s["estimate"] - s["low"]], [s["high"] - s["estimate"]]],
                    fmt="s", capsize=3, color="black" if name.startswith("sng-") else "tab:red", ms=4)
        ax.annotate(name, (x + 0.1 * i, s["high"]), fontsize=6, rotation=60)
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xticks(list(range(1, len(rounds) + 1)) + [x], [f"round {r['round']}\n×{r['repetitions']}" for r in rounds] + ["confirmed"])
    ax.set_ylabel(f"{statistic} {metric} / solo")
    ax.set_title("xtalk worst: search trace")
    if finalists:
        ax.legend(fontsize=6, loc="upper left")
    safepath.save_figure(fig, path)
    plt.close(fig)
    return path


def stopping_figure(path: Path, stop: dict, statistic: str, metric: str) -> Path:
    """Best-so-far against candidates tried (the first round, in the order tried): every
    candidate's first score (seeded ones grey), the best so far, the rule's threshold
    after each batch, and the candidate where it fired."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120, layout="tight")  # its own engine: the report's style may set another
    pts = [c for b in stop.get("history", []) for c in b.get("batch", [])]
    xs = list(range(1, len(pts) + 1))
    if pts:
        seeded = [(x, c["score"]) for x, c in zip(xs, pts) if c["seeded"]]
        drawn = [(x, c["score"]) for x, c in zip(xs, pts) if not c["seeded"]]
        if seeded:
            ax.plot(*zip(*seeded), "s", ms=3, color="grey", alpha=0.6, label="each kind alone (seeded)")
        if drawn:
            ax.plot(*zip(*drawn), "o", ms=3, color="tab:blue", alpha=0.6, label="random candidates")
        best, run = [], float("-inf")
        for c in pts:
            run = max(run, c["score"])
            best.append(run)
        ax.step(xs, best, where="post", color="tab:red", lw=1.6, label="best so far")
        ends = [b["candidates"] for b in stop["history"]]
        ax.hlines([b["threshold"] for b in stop["history"]], [0.5] + [e + 0.5 for e in ends[:-1]], [e + 0.5 for e in ends],
                  color="tab:red", ls="--", lw=0.8, label=f"best × {1 + stop['margin']:g} after each round (the claim's threshold)")
        e = stop["estimate"]
        word = (f"rule met: p ≤ {e['beyond']:.1%}" if stop["stopped_by"] == "rule"
                else f"{'candidates ran out' if stop['stopped_by'] == 'exhausted' else 'budget ran out'}: "
                     f"p ≤ {e['beyond']:.1%} (needs ≤ {e['target']:.0%})")
        ax.axvline(ends[-1], color="black", lw=0.8, ls=":")
        ax.annotate(word, (ends[-1], e["threshold"]), fontsize=7, ha="right", va="bottom")
        ax.legend(fontsize=6, loc="best")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xlabel("candidates tried (first round, in the order tried)")
    ax.set_ylabel(f"{statistic} {metric} / solo (first score)")
    ax.set_title(f"xtalk worst: when to stop ({stop.get('confidence', 0):.0%} confidence, margin {stop.get('margin', 0):.0%})")
    safepath.save_figure(fig, path)
    plt.close(fig)
    return path


def ci_text(ci: dict | None) -> str:
    if not ci or not math.isfinite(ci.get("estimate", float("nan"))):
        return "n/a"
    return f"{ci['estimate']:.2f}× [{ci['low']:.2f}, {ci['high']:.2f}]"


def _ratio(ci: dict | None) -> dict | None:
    """A slowdown of result.json ({estimate, low, high, level}) as the verdict document
    writes a ratio: {value, ci_low, ci_high, level}."""
    if not ci:
        return None
    return {"value": ci.get("estimate"), "ci_low": ci.get("low"), "ci_high": ci.get("high"), "level": ci.get("level")}


def json_document(out: Path) -> dict:
    """`xtalk worst --json`: the verdict document's header (report/verdicts.table_document's)
    and one row per confirmed combination (the worst, the runner-ups, each stress-ng
    stressor) with its slowdown against solo and against the best stressor, ratio and CI as
    fields; result.json whole as ``result``."""
    from ..report.verdicts import SCHEMA_VERSION, provenance

    res = json.loads((Path(out) / "result.json").read_text())
    entries = [("worst", res["worst"])] + [(r["scenario"], r) for r in res.get("runner_ups") or []] \
        + [("stressor", s) for s in (res.get("stressors") or {}).values()]
    rows = [{"role": role, "label": e.get("label"), "metric": res.get("metric"), "statistic": res.get("statistic"),
             "vs_solo": _ratio(e.get("vs_solo")), "vs_best_stressor": _ratio(e.get("vs_best_stressor")),
             "search_score": e.get("search_score")} for role, e in entries]
    return {"schema_version": SCHEMA_VERSION, "kind": "worst", "results": str(out), "provenance": provenance(),
            "rows": rows, "result": res}
