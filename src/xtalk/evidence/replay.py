"""`xtalk evidence replay BUNDLE`: re-run the plans a bundle recorded and say, per cell, whether
its recorded result reproduces.

The bundle is checked first (`verify`: a damaged bundle is named, exit 2, nothing run); each
experiment's recorded runs (data/<input>/runs/<id>/run.json, with the plan the agent ran) are
run again, in the recorded order, on the target (``--target``, this machine by default), into
OUT/replayed/<input>/, a results directory like `xtalk run`'s; the recorded side is copied to
OUT/recorded/<input>/ so that reading it writes nothing into the bundle. The machine must be of
the same kind as the recorded one (CPU model, number of CPUs, architecture): a plan names CPUs
and sizes buffers from that machine's caches, so on another kind a replay measures something
else; refused (exit 2) unless ``other_machine``, then said on every output. A different kernel is
a warning.

Each cell (configuration · application · scenario) is judged by ``analysis.change`` — the
machinery of `xtalk compare` — on the median response time: the ratio replayed / recorded with
its 95 % CI from the runs of both sides. *reproduced* when the whole CI lies within
[1/(1+tolerance), 1+tolerance]; *not reproduced* when the whole CI lies outside it;
*inconclusive* when it straddles an edge or the runs give no CI. The p99's change is shown
beside it. The two sides were measured at different times: drift between them is part of
what the tolerance absorbs (analysis.change.DRIFT_NOTE).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import safepath
from ..analysis.change import DRIFT_NOTE, Change, changes
from ..errors import UsageError
from . import manifest as mf

#: What a cell's verdict can be (replay.json's ``verdict``).
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
#: The recorded environment that makes a machine the same kind: (path, what it is).
SAME_KIND = ((("cpu", "model"), "CPU model"), (("cpu", "count"), "number of CPUs"),
             (("kernel", "machine"), "architecture"))
#: Differences a replay runs through, said as a warning.
WARN_KIND = ((("kernel", "release"), "kernel"), (("kernel", "preempt_rt"), "PREEMPT_RT"),
             (("virtualization", "hypervisor"), "under a hypervisor"))


@dataclass
class Cell:
    """One cell's recorded and replayed median response time and the judgement."""

    input: str
    configuration: str
    application: str
    scenario: str
    median: Change
    p99: Change
    verdict: str

    @property
    def name(self) -> str:
        return " · ".join(x for x in (self.input, self.configuration, self.application, self.scenario)
                          if x not in ("", "default", "victim"))

    def line(self) -> str:
        """"faults · aocs · memhog: reproduced: median ×1.03 [0.97, 1.09] (p99 ×1.10 [0.90, 1.31])"."""
        return f"{self.name}: {self.verdict}: median {_ratio(self.median)} (p99 {_ratio(self.p99)})"

    def to_dict(self) -> dict:
        return {"input": self.input, "configuration": self.configuration, "application": self.application,
                "scenario": self.scenario, "verdict": self.verdict, "median": self.median.to_dict(),
                "p99": self.p99.to_dict()}


@dataclass
class Replay:
    """The replay: where it wrote, against what, the cells judged and what was not replayed."""

    bundle: Path
    out: Path
    tolerance: float
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 every cell reproduced, 1 otherwise (a cell not reproduced or inconclusive)."""
        return 0 if self.cells and all(c.verdict == REPRODUCED for c in self.cells) else 1

    def counts(self) -> dict[str, int]:
        return {v: sum(c.verdict == v for c in self.cells) for v in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)}

    def to_dict(self) -> dict:
        return {"schema_version": 1, "bundle": str(self.bundle), "out": str(self.out), "tolerance": self.tolerance,
                "quantity": "response time (ms), median per cell; ratio replayed / recorded, 95 % CI",
                "counts": self.counts(), "cells": [c.to_dict() for c in self.cells], "notes": self.notes,
                "drift": DRIFT_NOTE}


def _ratio(ch: Change) -> str:
    if not ch.concluded:
        return ch.words()
    return f"×{ch.ratio:.2f} [{ch.low:.2f}, {ch.high:.2f}]"


def judge(ch: Change, tolerance: float) -> str:
    """A cell's verdict from the change of its median (see the module's docstring)."""
    if not ch.concluded:
        return INCONCLUSIVE
    lo, hi = 1 / (1 + tolerance), 1 + tolerance
    if lo <= ch.low and ch.high <= hi:
        return REPRODUCED
    if ch.low > hi or ch.high < lo:
        return NOT_REPRODUCED
    return INCONCLUSIVE


# --------------------------------------------------------------------------- the bundle


def _checked_bundle(bundle: Path) -> dict:
    """The bundle's manifest, after `verify`: a damaged bundle refuses the replay (exit 2)."""
    bundle = Path(bundle)
    if not bundle.is_dir():
        raise UsageError(f"BUNDLE {bundle}: not a directory; give a directory `xtalk evidence` wrote")
    problems = mf.verify(bundle)
    if problems:
        more = f" (and {len(problems) - 1} more: `xtalk evidence verify {bundle}` lists them)" if len(problems) > 1 else ""
        raise UsageError(f"BUNDLE {bundle}: damaged, not replayed: {problems[0]}{more}")
    return json.loads((bundle / mf.MANIFEST).read_text())


@dataclass
class Recorded:
    """One experiment of the bundle: its raw data directory and its runs' plans in run order."""

    name: str
    data: Path
    plans: list  # [Plan]
    environment: dict
    declared: list = field(default_factory=list)  #: experiment.json's declared settings (path, value, why)


def _recorded(bundle: Path, entry: dict) -> Recorded | str:
    """The experiment ``entry`` of the manifest names, or why it cannot be replayed."""
    from ..store import run_outcome

    name = str(entry.get("name", ""))
    data = bundle / "data" / name
    if entry.get("kind") == "campaign":
        return f"{name}: a campaign; replaying campaigns is not supported yet (its cells are not replayed)"
    if not (data / "runs").is_dir():
        return (f"{name}: the bundle keeps no runs of it (data/{name}/runs/: bundles made before xtalk kept the "
                "plans and job tables); make the bundle again from its results to replay it")
    try:
        doc = json.loads((data / "experiment.json").read_text())
        order = [o["run_id"] for o in doc["order"]]
    except (OSError, ValueError, KeyError, TypeError):
        doc, order = {}, sorted(p.name for p in (data / "runs").iterdir())
    declared = [d for d in doc.get("declared_settings") or [] if isinstance(d, dict) and {"path", "value"} <= set(d)]
    plans, env = [], {}
    for run_id in order:
        meta = run_outcome(data / "runs" / run_id)
        if meta is None or meta.plan is None:
            continue  # a run the agent never started: nothing recorded to reproduce
        plans.append(meta.plan)
        if not env and meta.environment is not None:
            env = meta.to_dict().get("environment") or {}
    if not plans:
        return f"{name}: no recorded run has its plan (data/{name}/runs/*/run.json)"
    return Recorded(name, data, plans, env, declared)


def _get(env: dict, path: tuple[str, ...]):
    for k in path:
        env = env.get(k) if isinstance(env, dict) else None
    return env


def machine_differences(recorded: dict, here: dict) -> tuple[list[str], list[str]]:
    """(what makes the machines different kinds, what only differs): one phrase each."""
    def diff(fields):
        return [f"{what}: recorded {_get(recorded, p)!r}, here {_get(here, p)!r}" for p, what in fields
                if _get(recorded, p) is not None and _get(recorded, p) != _get(here, p)]

    return diff(SAME_KIND), diff(WARN_KIND)


def _declared_settings(todo: list[Recorded], tgt) -> None:
    """The settings the experiments declared must hold on the target now, as `xtalk run` refused
    them before (UsageError naming the first that does not); every replayed run then snapshots
    them before and after (drift: invalid). Checked on this machine; a remote target's snapshot
    before and after each run still shows drift."""
    from ..targets import settings as ms
    from ..targets.base import LocalTarget

    declared = ms.SettingsFile(tuple(dict.fromkeys(
        ms.Declared(str(d["path"]), str(d["value"]), str(d.get("why", ""))) for r in todo for d in r.declared)), ())
    if not declared.declared:
        return
    tgt.watch = tuple(dict.fromkeys([*tgt.watch, *declared.paths()]))
    if isinstance(tgt, LocalTarget):
        wrong = ms.violations(declared, ms.snapshot_local(declared.paths()))
        if wrong:
            raise UsageError(f"declared settings of the bundle: {wrong[0]}"
                             + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))


# --------------------------------------------------------------------------- the runs


def _copy_recorded(rec: Recorded, dest: Path) -> None:
    """The recorded side as a results directory of its own (reading converts and caches there,
    never in the bundle)."""
    for src in sorted(rec.data.rglob("*")):
        if src.is_file() and not src.is_symlink():
            safepath.write_bytes(dest / src.relative_to(rec.data), src.read_bytes(), parents=True)


def _run(rec: Recorded, target, dest: Path, say) -> int:
    """Every recorded plan run again into ``dest`` (a results directory); the runs that did not
    complete."""
    safepath.makedirs(dest / "runs")
    for name in ("experiment.toml", "experiment.json"):
        if (rec.data / name).is_file():
            safepath.write_bytes(dest / name, (rec.data / name).read_bytes())
    failed = 0
    for i, plan in enumerate(rec.plans, 1):
        meta = target.run(plan, dest / "runs" / plan.run_id)
        ok = meta.status == "completed" and not meta.invalid
        failed += not ok
        say(f"  {rec.name} {i}/{len(rec.plans)} {plan.run_id}: {meta.status}"
            + (f" ({meta.reason})" if meta.reason and meta.status != "completed" else "")
            + (f" invalid: {meta.invalid}" if meta.invalid else ""))
    return failed


def samples(path: Path) -> dict[tuple[str, str, str], list[np.ndarray]]:
    """(configuration, application, scenario) -> the measured response times (ms) of each run."""
    from ..results import tables as tb

    m = tb.load(path).measured
    if m.empty:
        return {}
    app = m["application"].astype(str) if "application" in m else pd.Series("victim", index=m.index)
    conf = m["configuration"].astype(str) if "configuration" in m else pd.Series("default", index=m.index)
    frame = pd.DataFrame({"c": conf, "a": app, "s": m["scenario"].astype(str), "r": m["run_id"].astype(str)})
    values = m["response_ns"].to_numpy(dtype=float) / 1e6
    out: dict[tuple[str, str, str], list[np.ndarray]] = {}
    for (c, a, s, _), idx in frame.groupby(["c", "a", "s", "r"], sort=False).indices.items():
        out.setdefault((c, a, s), []).append(values[idx])
    return out


def compare_cells(name: str, before: dict, after: dict, tolerance: float, n_boot: int) -> list[Cell]:
    """Each cell of the recorded side judged against the replayed one (a cell the replay has no
    job of: not comparable, inconclusive)."""
    cells = []
    for key, runs in before.items():
        ch = changes(runs, after.get(key, []), ("median", "p99"), n_boot=n_boot)
        cells.append(Cell(name, *key, ch["median"], ch["p99"], judge(ch["median"], tolerance)))
    return cells


# --------------------------------------------------------------------------- the command


def _out_dir(bundle: Path, out: Path | None) -> Path:
    if out is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = Path(f"replay-{bundle.resolve().name}-{stamp}")
    real = safepath.results_dir(out, "--out")
    if real == bundle.resolve() or bundle.resolve() in real.parents:
        raise UsageError(f"--out {out}: inside the bundle; a replay never writes into the bundle (give a directory "
                         "outside it)")
    if real.exists() and (not real.is_dir() or any(real.iterdir())):
        raise UsageError(f"--out {out}: exists and is not an empty directory; give a new directory for the replay")
    return real


def replay(bundle: Path, out: Path | None = None, target: str = "local", tolerance: float = 0.2,
           other_machine: bool = False, n_boot: int = 2000, say=print) -> Replay:
    """Check the bundle and the machine, re-run every recorded plan, judge each cell; write
    OUT/replay.json and OUT/replay.md (see the module's docstring). Bad input (a damaged bundle,
    another kind of machine, an unusable --out or --tolerance): UsageError before any run."""
    from ..targets.spec import from_spec

    if not (0 < tolerance < 10):
        raise UsageError(f"--tolerance {tolerance}: give the change a replay may show, between 0 and 10 (0.2: ±20 %)")
    bundle = Path(bundle)
    doc = _checked_bundle(bundle)
    entries = doc.get("inputs") or []
    found = [_recorded(bundle, e) for e in entries if isinstance(e, dict)]
    todo = [r for r in found if isinstance(r, Recorded)]
    notes = [r for r in found if isinstance(r, str)]
    if not todo:
        raise UsageError(f"BUNDLE {bundle}: nothing to replay" + (f": {notes[0]}" if notes else " (no input)"))
    from ..targets.agent import refuse_fixture

    refuse_fixture("evidence replay")  # a recorded machine ($XTALK_MACHINE) runs nothing
    tgt = from_spec(target)
    here = tgt.facts().environment
    for rec in todo:
        kind, other = machine_differences(rec.environment, here)
        if kind and not other_machine:
            raise UsageError(f"--target {tgt.describe()}: not the kind of machine {rec.name} was measured on "
                             f"({'; '.join(kind)}); replay there, or pass --other-machine to run anyway (then "
                             "nothing says the verdicts should reproduce)")
        notes += [f"{rec.name}: another kind of machine ({x}), replayed with --other-machine" for x in kind]
        notes += [f"{rec.name}: {x}" for x in other]
    _declared_settings(todo, tgt)
    tgt.check_many([p.to_json() for rec in todo for p in rec.plans])  # a plan refused here: exit 2, nothing run
    out = _out_dir(bundle, out)
    for line in notes:
        say(f"note: {line}")
    result = Replay(bundle.resolve(), out, tolerance, notes=notes)
    for rec in todo:
        _copy_recorded(rec, out / "recorded" / rec.name)
        say(f"{rec.name}: replaying {len(rec.plans)} run(s) on {tgt.describe()} → {out / 'replayed' / rec.name}")
        failed = _run(rec, tgt, out / "replayed" / rec.name, say)
        if failed:
            result.notes.append(f"{rec.name}: {failed} replayed run(s) did not complete or were invalid; their "
                                "cells have fewer runs")
        result.cells += compare_cells(rec.name, samples(out / "recorded" / rec.name),
                                      samples(out / "replayed" / rec.name), tolerance, n_boot)
    safepath.write_text(out / "replay.json", json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
    safepath.write_text(out / "replay.md", markdown(result))
    return result


def summary_line(r: Replay) -> str:
    c = r.counts()
    return (f"{c[REPRODUCED]} of {len(r.cells)} cells reproduced, {c[NOT_REPRODUCED]} not reproduced, "
            f"{c[INCONCLUSIVE]} inconclusive (median response time within ±{100 * r.tolerance:.0f} %, 95 % CI)")


def markdown(r: Replay) -> str:
    """replay.md: what was replayed, one line per cell, the notes."""
    out = [f"# Replay of {r.bundle}", "", summary_line(r), "",
           f"Per cell: the median response time replayed / recorded with its 95 % CI; reproduced when the whole CI "
           f"lies within [{1 / (1 + r.tolerance):.2f}, {1 + r.tolerance:.2f}], not reproduced when it lies outside.",
           "", *[f"- {c.line()}" for c in r.cells], ""]
    if r.notes:
        out += ["## Notes", "", *[f"- {x}" for x in r.notes], ""]
    return "\n".join(out + [f"Note: {DRIFT_NOTE}.", ""])

