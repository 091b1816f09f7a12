"""Synthetic campaign directories with a planted slowdown per cell, for the campaign report's
tests and its scale check: the layout `xtalk campaign run` writes (campaign.toml,
campaign.json, runs/<id>/run.json with the campaign's labels, jobs.parquet), no agent.

What is planted: solo's execution (and response) time is ``exec_ns`` times
``slowdown(configuration, "solo", 0, "")``, and every other cell's is solo's times its
slowdown (``scenarios[name]``, or ``slowdown(configuration, family, enemies, total)`` for a
two-way cell), so the right two-way grid is known; cells for
which ``excluded`` is true are absent, as a campaign leaves out infeasible shares; every run
carries the application's ε label exactly as campaign/grid.py stores it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import safepath
from .synthetic import job_table, write_run


@dataclass
class Family:
    """A two-way family as a campaign file declares it (``[[two_way]]``)."""

    name: str
    share: str
    counts: list
    totals: list


#: A planted factor: (configuration, family or scenario name, enemies, total as written) -> factor.
Planted = Callable[[str, str, int, str], float]


def _one(conf: str, name: str, n: int, total: str) -> float:
    return 1.0


def _never(conf: str, name: str, n: int, total: str) -> bool:
    return False


def write_campaign(root: Path, *, families: list[Family], configurations: tuple = ("other", "fifo"),
                   scenarios: dict[str, float] | None = None, slowdown: Planted = _one,
                   excluded: Callable[[str, str, int, str], bool] = _never,
                   epsilon: dict | None = None, application: str = "aocs", repetitions: int = 2, jobs: int = 40,
                   period_ns: int = 1_000_000, exec_ns: float = 200_000, name: str = "planted",
                   victim: dict | None = None, late: Planted | None = None, late_every: int = 20,
                   boards: dict[str, float] | None = None, kernels: dict[str, float] | None = None) -> Path:
    """Write a campaign directory under ``root``; ``scenarios``: explicit scenario -> its
    slowdown against solo; ``victim``: added to every run's victim plan (e.g. a latency body);
    ``late``: (configuration, family or scenario, enemies, total) -> a wake-up delay in ns of
    every ``late_every``-th job of the cell (a response-tail effect, execution unchanged);
    ``boards`` and ``kernels``: a lab campaign, every cell run on every board under every
    kernel (labels ``board``, ``kernel``), its times scaled by the board's and the kernel's
    factors."""
    root = Path(root)
    safepath.makedirs(root / "runs")
    eps_label = json.dumps(epsilon or {"on": "response", "relative": 1.5, "statistic": "p99"})
    delay = late or (lambda conf, name, n, total: 0.0)
    cells = []  # (scenario, extra labels, factor, late ns) per configuration
    for conf in configurations:
        solo = slowdown(conf, "solo", 0, "")
        cells.append((conf, "solo", {}, solo, delay(conf, "solo", 0, "")))
        for sc, f in (scenarios or {}).items():
            cells.append((conf, sc, {}, f * solo, delay(conf, sc, 0, "")))
        for fam in families:
            for total in fam.totals:
                for n in fam.counts:
                    if excluded(conf, fam.name, n, str(total)):
                        continue
                    lb = {"two_way": fam.name, "enemies": str(n), "total": str(total)}
                    cells.append((conf, f"{fam.name}-n{n}-t{total}", lb, solo * slowdown(conf, fam.name, n, str(total)),
                                  delay(conf, fam.name, n, str(total))))
    runs, i = [], 0
    victim = {"period_ns": period_ns, "deadline_ns": period_ns, "sched": {"policy": "fifo", "priority": 90}, **(victim or {})}
    lab = [({"board": b, "kernel": k}, fb * fk) for b, fb in (boards or {}).items()
           for k, fk in (kernels or {}).items()] or [({}, 1.0)]
    for rep, (conf, sc, extra, factor, late_ns), (where, scale) in itertools.product(range(repetitions), cells, lab):
        run_id = f"{i:04d}-{application}-{conf}-{sc}-r{rep}" + "".join(f"-{v}" for v in where.values())
        labels = {"configuration": conf, "application": application, "criticality": "B", "variant": "default",
                  **extra, **where, "campaign": name, "epsilon": eps_label}
        j = job_table(jobs, period_ns=period_ns, exec_ns=exec_ns * scale, slowdown=factor, warmup=2, seed=i,
                      t0_ns=10**12 + i * 10**10, late_every=late_every if late_ns else 0, late_ns=int(late_ns))
        write_run(root, run_id, sc, rep, j, labels=labels, victim=victim)
        # The labels as the written run.json carries them (write_run's, as strings).
        runs.append({"run_id": run_id, "labels": {k: str(v) for k, v in
                                                  {"scenario": sc, "configuration": "default", "repetition": rep, **labels}.items()}})
        i += 1
    toml = [f'name = "{name}"', f"repetitions = {repetitions}", ""]
    for fam in families:
        toml += ["[[two_way]]", f'name = "{fam.name}"', f'share = "{fam.share}"', f"counts = {json.dumps(fam.counts)}",
                 f"totals = {json.dumps(fam.totals)}", ""]
    safepath.write_text(root / "campaign.toml", "\n".join(toml))
    safepath.write_text(root / "campaign.json", json.dumps({"name": name, "kind": "local", "runs": runs}))
    return root
