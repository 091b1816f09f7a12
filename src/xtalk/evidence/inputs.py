"""The results directories a bundle is made from, each loaded once through the store and the
report's tables (never read again by hand: the objectives ask these objects)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import safepath
from ..errors import UsageError
from ..outcome import RunOutcome
from ..report import cohabitation
from ..results import platform
from ..results import tables as tb
from ..store.frames import ReportData


@dataclass
class Input:
    """One results directory: an experiment or a campaign."""

    name: str  #: its name in the bundle (the directory's, made unique)
    path: Path
    campaign: bool
    data: ReportData
    n_boot: int = 2000
    memo: dict = field(default_factory=dict)

    def _once(self, key: str, compute):
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    @property
    def experiment(self) -> dict:
        """experiment.json (a campaign: campaign.json), as written."""
        return self.data.experiment or {}

    def metas(self) -> list[RunOutcome]:
        """Every run's run.json, in run order (results/platform.py reads them once)."""
        return platform.run_metas(self.data)

    @property
    def multi(self) -> bool:
        """Several measured applications (an experiment of applications): its verdicts are
        the cohabitation's, per application, not the single victim's."""
        return cohabitation.is_multi(self.data.measured)

    def cohabitation(self) -> cohabitation.Cohabitation:
        """Matrix, ε and failure-propagation verdicts of several applications (report/cohabitation.py)."""
        return cohabitation.of_report(self.data, self.n_boot)

    def runs(self) -> pd.DataFrame:
        return self._once("runs", lambda: tb.runs(self.data))

    def verdicts(self) -> pd.DataFrame:
        return self._once("verdicts", lambda: tb.verdicts(self.data, n_boot=self.n_boot))

    def pwcet(self) -> pd.DataFrame:
        return self._once("pwcet", lambda: tb.pwcet(self.data))

    def misses(self) -> pd.DataFrame:
        return self._once("misses", lambda: tb.misses(self.data))

    def run_ids(self, where=None) -> list[str]:
        """The run ids (of the rows of runs() for which ``where`` holds)."""
        r = self.runs()
        if where is not None:
            r = r[where(r)]
        return [str(x) for x in r["run_id"]]


def load_inputs(paths: list[Path], n_boot: int = 2000) -> list[Input]:
    """Each results directory opened; one line (UsageError, exit 2) naming one that is not."""
    out, names = [], set()
    for p in paths:
        # As root, a directory another user can change is refused like `xtalk report`'s (loading
        # converts stale job logs in it); the user's own links resolved.
        p = safepath.results_dir(Path(p), "RESULTS")
        if not (p / "runs").is_dir():
            raise UsageError(f"{p}: not an xtalk results directory (no runs/); give the directory `xtalk run` or "
                             "`xtalk campaign run` wrote")
        campaign = (p / "campaign.json").is_file()
        name, i = p.resolve().name, 2
        while name in names:
            name, i = f"{p.resolve().name}-{i}", i + 1
        names.add(name)
        try:
            data = tb.load(p)
        except (FileNotFoundError, json.JSONDecodeError) as e:
            raise UsageError(f"{p}: cannot be read as results: {e}") from None
        out.append(Input(name, p.resolve(), campaign, data, n_boot))
    return out
