"""A campaign in the results store: `store.Results` plus the campaign's labels as columns.

`xtalk.open(DIR)` (results/) reads a campaign directory through this; `.jobs()` gives every job with its
run's application, criticality, configuration, variant, scenario, repetition, number and
kinds of enemies (``n_enemies``, ``enemy_kinds``, see `store`) and grid parameters; `.connect()` gives DuckDB views `jobs` and `runs` (`xtalk query DIR "SQL"`).
Only `runs/` is read, so runs in progress or moved aside never show.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Results

#: Labels every campaign run carries, in column order; grid axes follow (dots become `_`).
#: The two-way label `enemies` (the count) is the store's ``n_enemies`` column, which every
#: run has, two-way cell or not (a column named `enemies` would clash with run metadata).
LABELS = ["application", "criticality", "variant", "two_way", "total"]
_NOT_COLUMNS = {"experiment", "scenario", "configuration", "repetition", "campaign", "epsilon", "xtalk_version",
                "git_commit", "enemies"}


class CampaignResults(Results):
    """A campaign directory (one DuckDB database over its per-run Parquet files)."""

    def __init__(self, path: Path):
        super().__init__(path)
        doc = json.loads((self.path / "campaign.json").read_text())
        self.name = doc["name"]
        axes = []
        for r in doc["runs"]:
            for k in r["labels"]:
                if k not in LABELS and k not in _NOT_COLUMNS and k not in axes:
                    axes.append(k)
        self.columns = LABELS + axes

    def _planned(self) -> list[str]:
        return []  # a campaign's runs land as they finish; its journal says which are to come

    def _label_columns(self, labels: dict) -> dict:
        return {k.replace(".", "_"): labels.get(k, "") for k in self.columns}


def open_any(path) -> Results:
    """A campaign directory as CampaignResults, any other results directory as Results."""
    p = Path(path)
    if (p / "campaign.json").is_file():
        return CampaignResults(p)
    return Results(p)
