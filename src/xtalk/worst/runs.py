"""Experiments of `xtalk worst`: made as ordinary experiment files, checked by the agent
before their first run, run in interleaved order through the local target (each run holds
the machine lock, targets/lock.py) and read back through the store.

A round is one experiment: `solo` and every candidate as scenarios, `repetitions` runs each,
shuffled within every repetition (config/expand.py), so the candidates of a round see the
same machine and a score is the ratio to the same round's solo runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .. import safepath
from ..analysis.slowdown import SOLO
from ..characterize import _toml_value
from ..runner import RUN_OVERHEAD_S, prepare
from ..targets.base import LocalTarget

#: Job columns of the two metrics.
METRICS = {"exec": "exec_ns", "response": "response_ns"}
#: Statistics a search can maximise.
STATISTICS = ("p99", "median", "max")
#: Search runs are short: at most this much measured time per run (and at least MIN_JOBS jobs).
SEARCH_RUN_S = 0.6
#: Confirmation runs measure at most this long each.
CONFIRM_RUN_S = 2.0
MIN_JOBS = 20


@dataclass
class Victim:
    """The application searched against: its experiment-file `[victim]` keys (without
    `cpus`), the CPUs it runs on, the settle time of its experiments, and where it came from."""

    table: dict
    cpus: list[int]
    settle: str = "200ms"
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def periodic(self) -> bool:
        return self.table.get("body") not in ("command", "attach")

    def with_jobs(self, measured_s: float) -> dict:
        """Its table with `jobs` cut so a run measures at most `measured_s` (a command runs
        once per run: unchanged)."""
        t = dict(self.table)
        if not self.periodic or t.get("body") == "taskset":
            return t
        from ..units import duration_ns

        period_s = duration_ns(t.get("period", "10ms"), "victim.period") / 1e9
        jobs = int(t.get("jobs", MIN_JOBS))
        t["jobs"] = max(min(jobs, MIN_JOBS), min(jobs, int(measured_s / period_s)))
        t["warmup_jobs"] = min(int(t.get("warmup_jobs", 10)), 3)
        return t


def experiment_text(name: str, victim: Victim, scenarios: dict[str, list[dict]], repetitions: int, seed: int,
                    measured_s: float | None = None, description: str = "") -> str:
    """An experiment file: the victim (jobs cut to `measured_s` per run when given) and one
    scenario per entry of `scenarios` (name -> enemy tables)."""
    table = victim.with_jobs(measured_s) if measured_s else dict(victim.table)
    lines = [f'name = "{name}"']
    if description:
        lines.append(f"description = {_toml_value(description)}")
    lines += [f"repetitions = {repetitions}", f"seed = {seed}", f"settle = {_toml_value(victim.settle)}", "",
              "[victim]", *(f"{k} = {_toml_value(v)}" for k, v in table.items()), f"cpus = {_toml_value(victim.cpus)}"]
    for sname, enemies in scenarios.items():
        lines += ["", "[[scenario]]", f'name = "{sname}"', f"enemies = [{', '.join(_toml_value(e) for e in enemies)}]"]
    return "\n".join(lines) + "\n"


@dataclass
class RoundResult:
    """Per scenario, per run, the metric's values (ns); the round's wall time."""

    samples: dict[str, list[np.ndarray]]
    seconds: float
    directory: Path
    failed: list[str] = field(default_factory=list)
    #: The runs' own time: each agent's run (run.json's start to end) plus the runner's
    #: per-run overhead, without the time spent waiting for others holding the machine.
    own_seconds: float = 0.0


def planned_run_seconds(path: Path) -> tuple[float, int]:
    """The estimate of one run of the experiment at `path` (the longest of its runs) and the
    number of runs: the runner's rule (`xtalk plan`), nothing started."""
    from ..campaign.estimate import run_seconds

    _, runs, _ = prepare(path)
    return max(run_seconds(r.plan) for r in runs), len(runs)


def run_round(text: str, work: Path, name: str, metric: str,
              progress: Callable[[int, int, str], None] | None = None, deadline: float | None = None,
              min_repetitions: int = 1) -> RoundResult:
    """Write the experiment `text` as `work/name.toml`, check every plan, run them in their
    interleaved order into `work/name/runs/`, and return the metric per scenario and run.

    Past `deadline` (time.monotonic()), no new repetition starts once `min_repetitions` are
    complete: every scenario keeps the same number of runs, and a round slowed by others
    holding the machine cannot take the budget with it."""
    from ..store import open as open_results

    start = time.monotonic()
    path = work / f"{name}.toml"
    safepath.write_text(path, text)
    _, runs, agent = prepare(path)  # every distinct plan checked by the agent first
    target = LocalTarget(agent)
    out = work / name
    safepath.makedirs(out / "runs", exist_ok=False)
    failed = []
    own = 0.0
    for i, r in enumerate(runs):
        if (deadline is not None and r.repetition >= min_repetitions and (i == 0 or runs[i - 1].repetition != r.repetition)
                and time.monotonic() > deadline):
            break
        if progress:
            progress(i, len(runs), r.scenario)
        meta = target.run(r.plan, out / "runs" / r.run_id)
        if meta.started_unix_ns and meta.ended_unix_ns:
            own += (meta.ended_unix_ns - meta.started_unix_ns) / 1e9 + RUN_OVERHEAD_S
        if meta.status != "completed":
            failed.append(f"{r.run_id}: {meta.status}: {meta.reason}")
    if progress:
        progress(len(runs), len(runs), "")
    jobs = open_results(out).jobs()
    column = METRICS[metric]
    samples: dict[str, list[np.ndarray]] = {}
    if len(jobs):
        for (scen, _), g in jobs.groupby(["scenario", "run_id"]):
            v = g[column].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if v.size:
                samples.setdefault(scen, []).append(v)
    return RoundResult(samples, time.monotonic() - start, out, failed, own)


def refused(victim: Victim, scenarios: dict[str, list[dict]], work: Path, seed: int) -> dict[str, str]:
    """The scenarios the agent refuses on this machine (name -> its one line), each checked
    alone: what the space's bounds cannot know (an `llcsets` footprint below two lines per
    set of this LLC's way) would otherwise refuse a whole round."""
    from ..targets.agent import PlanRefused

    out = {}
    path = work / "check.toml"
    for name, enemies in scenarios.items():
        safepath.write_text(path, experiment_text("worst-check", victim, {name: enemies}, 1, seed, SEARCH_RUN_S))
        try:
            prepare(path)
        except PlanRefused as e:
            out[name] = str(e)
    path.unlink(missing_ok=True)
    return out


def statistic(values: list[np.ndarray], stat: str) -> float:
    """`stat` over the pooled jobs of several runs (NaN when there are none)."""
    if not values:
        return float("nan")
    v = np.concatenate(values)
    if stat == "median":
        return float(np.median(v))
    if stat == "max":
        return float(np.max(v))
    return float(np.quantile(v, float(stat[1:]) / 100.0))


def scores(result: RoundResult, stat: str) -> dict[str, float]:
    """Each scenario's `stat` over the round's solo `stat` (NaN where either is missing)."""
    solo = statistic(result.samples.get(SOLO, []), stat)
    return {s: statistic(v, stat) / solo if solo > 0 else float("nan") for s, v in result.samples.items() if s != SOLO}
