"""From a campaign file to checked runs, before anything starts.

The file is validated (one line with file, line, field and fix), expanded against the first
target's facts, and every distinct plan is checked by that target's agent, so a campaign
that would fail on its 10 000th run fails now instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..version import __version__
from .grid import Expansion, expand_campaign
from .schema import Campaign, load
from ..provenance import git_commit


@dataclass
class Prepared:
    campaign: Campaign
    text: str
    expansion: Expansion




def _shape(plan) -> str:
    """A plan without its identity: runs sharing it need one check only."""
    d = json.loads(plan.to_json())
    d.pop("run_id", None)
    d.pop("labels", None)
    return json.dumps(d, sort_keys=True)


def first_answering(targets: list):
    """The first target that answers (its facts are cached), for expansion and checks."""
    from ..targets.base import TargetUnreachable

    errors = []
    for t in targets:
        try:
            t.facts()
            return t
        except TargetUnreachable as e:
            errors.append(str(e))
    raise TargetUnreachable("no target answers: " + "; ".join(errors))


def prepare(path: Path, targets: list) -> Prepared:
    """Load, expand and check a campaign on the first target that answers; nothing runs."""
    campaign, text = load(path)
    target = first_answering(targets)
    expansion = expand_campaign(campaign, target.facts(), source=str(path),
                                labels={"xtalk_version": __version__, "git_commit": git_commit()}, aocs_data=target.aocs_data)
    seen: dict[str, str] = {}
    for r in expansion.runs:
        shape = _shape(r.plan)
        if shape not in seen:
            seen[shape] = r.plan.to_json()
    target.check_many(list(seen.values()))
    return Prepared(campaign, text, expansion)
