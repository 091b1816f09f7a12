"""Before a campaign's first run, what `xtalk run` does before an experiment's: per cell
(application × configuration × variant), the victim's work is calibrated when the cell asks
for a solo utilisation (`victim.utilization`), and the victim's solo feasibility is checked
(it must hold its period alone; a DEADLINE runtime must cover its need). An infeasible victim
is refused with the numbers and exit 2 before any run; `--skip-feasibility` runs it anyway.

The passes run on the first target that answers: the campaign's plans were expanded from that
target's facts, so the pool is taken to be alike, and every run of a cell, on any target, uses
the same work (a slowdown compares the same job). Each cell's result is written to
`preflight.json` as soon as it is known (atomically), and the calibrated work is applied to
campaign.json once every cell is done, before the executor reads it: a campaign killed during
the pre-flight resumes at the first cell without a record, and a resumed campaign never redoes
a finished cell nor runs with half-applied work. The passes are kept under `preflight/`.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config.expand import RunSpec
from ..units import fraction
from .layout import CAMPAIGN_JSON, JOURNAL, CampaignLock, load, write_atomic

PREFLIGHT_JSON = "preflight.json"
#: Labels naming a cell: the runs that share a calibrated work and a feasibility verdict.
CELL = ("application", "configuration", "variant")


def cell_of(labels: dict) -> str:
    """'application/configuration/variant' of a run's labels."""
    return "/".join(str(labels.get(k, "default")) for k in CELL)


def cells(runs) -> dict[str, list]:
    """The campaign's runs by cell, in their order of first appearance."""
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(cell_of(r.labels), []).append(r)
    return out


def _specs(key: str, runs) -> list[RunSpec]:
    """A cell's runs as an experiment's (what calibrate_work and feasibility take); the cell
    stands for the configuration so that their messages name it."""
    return [RunSpec(i, r.labels.get("scenario", "solo"), int(r.labels.get("repetition", 0)), r.plan, configuration=key)
            for i, r in enumerate(runs)]


def read(store: Path) -> dict:
    """preflight.json ({"cells": {}} before the first cell is done)."""
    try:
        return json.loads((Path(store) / PREFLIGHT_JSON).read_text())
    except FileNotFoundError:
        return {"cells": {}}


def estimated_seconds(plans_by_cell: dict[str, list], skip_feasibility: bool, overhead_s: float) -> float:
    """What the passes add to a campaign: calibration where a cell asks for it, one
    feasibility pass per cell (no noise passes: a campaign judges cells by their ε)."""
    from .. import calibrate_work, feasibility

    total = 0.0
    for plans in plans_by_cell.values():
        specs = [RunSpec(i, p.labels.get("scenario", "solo"), 0, p) for i, p in enumerate(plans)]
        if "utilization" in plans[0].labels:
            total += calibrate_work.estimated_seconds(specs, overhead_s)
        if not skip_feasibility:
            total += feasibility.estimated_seconds(specs, overhead_s, noise=False)
    return total


def _answering(store: Path, targets: list, first_run: str, target_wait: float):
    """The first target that answers, waiting up to `target_wait` seconds as the executor
    does; after that AgentError (exit 3), the targets' silence journalled for `status`."""
    import time

    from ..errors import AgentError
    from ..targets.base import TargetUnreachable
    from .journal import Journal
    from .prepare import first_answering

    start = time.monotonic()
    while True:
        try:
            return first_answering(targets)
        except TargetUnreachable as e:
            if time.monotonic() - start >= target_wait:
                with Journal(store / JOURNAL) as journal:
                    for t in targets:
                        journal.append(first_run, "requeued", target=t.name, reason=f"target unreachable: {e}")
                raise AgentError(f"no target answered for the pre-flight: {e}; {len(json.loads((store / CAMPAIGN_JSON).read_text())['runs'])} "
                                 f"run(s) remain: `xtalk campaign resume {store}` when a target answers") from None
            time.sleep(min(5.0, max(0.0, target_wait - (time.monotonic() - start))))


def ensure(store: Path, targets: list, say=print, skip_feasibility: bool = False, target_wait: float = 600.0) -> None:
    """Calibrate and check every cell that has no record yet, then apply the calibrated
    work to campaign.json (once). UsageError (exit 2) when a victim is infeasible; AgentError
    (exit 3) when no target answers within `target_wait` seconds."""
    store = Path(store)
    doc = json.loads((store / CAMPAIGN_JSON).read_text()) if (store / CAMPAIGN_JSON).is_file() else None
    if doc is not None and doc.get("preflight_applied"):
        return  # the common resume: nothing to load, the executor checks the rest
    doc, runs = load(store)
    from .journal import read as read_journal

    if any(e.get("state") in ("running", "done", "failed") for e in read_journal(store / JOURNAL)):
        return  # a campaign whose runs began without a pre-flight (an older xtalk): keep its plans
    skip_feasibility = skip_feasibility or bool(doc.get("skip_feasibility"))
    with CampaignLock(store):  # before the imports below: a second driver is refused at once
        from .. import calibrate_work, feasibility

        record = read(store)
        todo = {k: rs for k, rs in cells(runs).items() if k not in record["cells"]}
        target = _answering(store, targets, runs[0].run_id, target_wait) if todo else None
        for key, rs in todo.items():
            out = store / "preflight" / key.replace("/", "--")
            specs = _specs(key, rs)
            entry: dict = {"target": target.name, "calibration": None, "feasibility": None}
            utilization = rs[0].labels.get("utilization")
            if utilization is not None:
                say(f"{key}: calibrating the victim's work on {target.name}")
                specs, entry["calibration"] = calibrate_work.calibrate(
                    specs, fraction(utilization, "victim.utilization"), target, out, say=say)
            if not skip_feasibility:
                entry["feasibility"] = feasibility.check(specs, target, out, say=say, noise=False)
            record["cells"][key] = entry
            write_atomic(store / PREFLIGHT_JSON, json.dumps(record, indent=1))
        _apply(store, doc, record)


def _apply(store: Path, doc: dict, record: dict) -> None:
    """campaign.json with every cell's calibrated work, marked applied (one atomic write)."""
    from ..calibrate_work import calibrated
    from ..plan import Plan

    for r in doc["runs"]:
        cal = record["cells"].get(cell_of(r["labels"]), {}).get("calibration")
        if cal is not None:
            r["plan"] = json.loads(calibrated(Plan.model_validate(r["plan"]), cal).to_json())
    doc["preflight_applied"] = True
    write_atomic(store / CAMPAIGN_JSON, json.dumps(doc, indent=1))
