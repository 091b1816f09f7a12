"""A results directory read once: the object `xtalk.open(path)` returns.

One :class:`Results` holds every run's outcome once, typed (:class:`~xtalk.outcome.RunOutcome`,
run.json read by the store and never again), the job and probe frames, and the cells of an
experiment or a campaign. The query functions the report and users call live beside it, as
this package's public API; each takes a results directory, this object, or the
:class:`~xtalk.store.frames.ReportData` it loads::

    import xtalk
    from xtalk.results import tables
    res = xtalk.open("results/quickstart-20260101-120000")
    res.outcome(res.runs().run_id[0]).environment  # typed, from run.json
    res.cells()                                      # per configuration × scenario (a campaign's per cell)
    tables.verdicts(res, ["exec:max:1.2x"])          # the jobs read once, by res.data

- :mod:`xtalk.results.tables`: every table of the report (slowdown, misses, verdicts, pWCET...)
- :mod:`xtalk.results.epsilon`: ε bounds as people write them
- :mod:`xtalk.results.platform`: the machine the results were measured on, migrated jobs
- :mod:`xtalk.results.victim_tables`: a task set's jobs per task, the AOCS comparer's verdicts
- :mod:`xtalk.results.campaign_cells`, :mod:`xtalk.results.campaign_maps`: a campaign's cells and maps

Only this package and `store/` read run.json (tests/test_layers.py keeps it so).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..outcome import RunOutcome

if TYPE_CHECKING:  # pandas and DuckDB load when results are read
    import duckdb
    import pandas as pd

    from ..store import Results as StoreResults
    from ..store.frames import ReportData


class Results:
    """A results directory (an experiment or a campaign), each part read once when first asked.

    ``runs()``, ``jobs()``, ``probes()``, ``culprits()``, ``connect()`` and ``trace(run)`` are the
    store's (one row per run with its labels; every job through DuckDB; the kernel trace of a
    run); ``outcomes`` every run's typed outcome; ``data`` the report's narrow frames;
    ``cells()`` the table the summary, the report and ``xtalk query`` agree on."""

    def __init__(self, path):
        from ..store.campaign import open_any

        #: The store's reader (store.Results, or store.campaign.CampaignResults for a campaign).
        self.store: StoreResults = open_any(path)
        self.path: Path = self.store.path

    def __repr__(self) -> str:
        return f"xtalk.results.Results({str(self.path)!r})"

    @property
    def is_campaign(self) -> bool:
        """Whether this is a campaign's results directory (campaign.json)."""
        return (self.path / "campaign.json").is_file()

    @property
    def name(self) -> str:
        """The campaign's name, or the experiment's (its file's ``name``; else the directory's)."""
        if self.is_campaign:
            return self.store.name
        return str((self.experiment.get("experiment") or {}).get("name") or self.path.name)

    @property
    def left_out(self) -> dict[str, str]:
        """Runs left out because their files are damaged: run directory name -> what is wrong."""
        return self.store.left_out

    @cached_property
    def experiment(self) -> dict:
        """experiment.json (the resolved experiment and its run order); {} for a campaign."""
        from ..store.check import experiment_doc

        return {} if self.is_campaign else experiment_doc(self.path)

    # -- every run's outcome, typed ---------------------------------------------------------
    @cached_property
    def outcomes(self) -> dict[str, RunOutcome]:
        """run_id -> the run's outcome (run.json as the typed model), every usable run, read once."""
        return self.store.outcomes()

    def outcome(self, run) -> RunOutcome:
        """The outcome of run ``run`` (its run_id); UsageError when it is no run of these results."""
        try:
            return self.outcomes[str(run)]
        except KeyError:
            raise UsageError(f"run: {run!r} is not a run of {self.path}; give a run_id of `.runs()`") from None

    # -- the store's tables -----------------------------------------------------------------
    def run_dirs(self) -> list[Path]:
        """Every run directory under runs/, sorted."""
        return self.store.run_dirs()

    def runs(self) -> pd.DataFrame:
        """One row per run: labels, status, ``n_enemies``, ``enemy_kinds``, reason, jobs
        recorded, ``enemies`` (each enemy's achieved work), ``dir`` (store.Results.runs)."""
        return self.store.runs()

    def jobs(self, measured_only: bool = True) -> pd.DataFrame:
        """Every job of every run with its run's labels (warm-up jobs too when not ``measured_only``)."""
        return self.store.jobs(measured_only)

    def probes(self) -> pd.DataFrame:
        """Every probe sample of every run, with the run's labels (store.Results.probes)."""
        return self.store.probes()

    def culprits(self) -> pd.DataFrame:
        """Every traced run's culprits, one row per run × job × task or interrupt."""
        return self.store.culprits()

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with the views `jobs`, `runs`, `probes` and `culprits`."""
        return self.store.connect()

    @property
    def parquet_files(self) -> list[Path]:
        """The Parquet files the views of the last `connect()` read (store/sandbox.py)."""
        return self.store.parquet_files

    def ensure_parquet(self) -> list[Path]:
        """Convert any job log not yet converted and list the job tables."""
        return self.store.ensure_parquet()

    def trace(self, run):
        """The kernel trace of run ``run`` (its run_id or directory) as one DataFrame per event
        type, the shape of a LISA ``Trace`` (``df_event(name)``; trace/frames.py)."""
        return self.store.trace(run)

    def task_jobs(self) -> pd.DataFrame:
        """A task-set victim's measured jobs with their task index and run labels
        (results/victim_tables.py); empty for another victim."""
        from .victim_tables import task_jobs

        return task_jobs(self.runs())

    def aocs(self) -> pd.DataFrame:
        """Per run: the AOCS comparer's steps compared and mismatches (aocs.json; results/victim_tables.py)."""
        from .victim_tables import aocs_table

        return aocs_table(self.runs())

    # -- what the report reads --------------------------------------------------------------
    @cached_property
    def data(self) -> ReportData:
        """The report's frames (runs, measured and warm-up jobs, narrow, labels categorical),
        loaded once; a campaign's with each cell's group as its configuration
        (results/campaign_cells.py). Every function of :mod:`xtalk.results.tables` takes it."""
        if self.is_campaign:
            return self.campaign.data
        from ..store.frames import load

        return load(self.path)

    @cached_property
    def campaign(self):
        """A campaign's loaded data (results/campaign_cells.CampaignData); None for an experiment."""
        if not self.is_campaign:
            return None
        from .campaign_cells import load_campaign

        return load_campaign(self.path)

    def cells(self, *, n_boot: int | None = None) -> pd.DataFrame:
        """The cells: an experiment's per configuration × scenario (results/tables.cells), a
        campaign's per application × configuration × variant × scenario with its ε verdicts
        (results/campaign_cells.cell_table, without the guards' list column)."""
        if self.is_campaign:
            from .campaign_cells import cell_table

            kw = {} if n_boot is None else {"n_boot": n_boot}
            return cell_table(self.campaign, **kw).drop(columns=["warnings"], errors="ignore")
        from .tables import cells

        return cells(self.data) if n_boot is None else cells(self.data, n_boot=n_boot)


def open(path) -> Results:  # noqa: A001 - reads as xtalk.results.open(path)
    """Open a results directory (an experiment or a campaign); FileNotFoundError if it is none."""
    return Results(path)
