"""Results store: one directory per experiment, one sub-directory per run.

    RESULTS/experiment.json        the resolved experiment and the run order
    RESULTS/runs/<run_id>/plan.json, run.json, jobs.bin, jobs.parquet, agent.log
                          (a command's probes.bin, probes.parquet; process.parquet where its
                          jobs are its probes': store/probe_jobs.py)
    RESULTS/summary.{md,json}

`open(path).probes()` gives every probe sample likewise (the `probes` view of `connect()`).
`open(path).jobs()` gives every job with its run's labels as a pandas DataFrame, through
DuckDB over the per-run Parquet files; ``application`` names the measured process of each job
(the victim, "victim" unless named, or one of the run's applications); the runs of an
experiment of applications carry ``applications`` (those present), ``faulty`` and ``fault``. Every run also carries what it ran against, read from
its plan: ``n_enemies`` (number of enemy processes, 0 solo) and ``enemy_kinds`` (their
distinct kinds, sorted, joined with "+"; "" solo), so the main axis of an interference
experiment can be grouped on in SQL and pandas alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..errors import UsageError
from ..outcome import RunOutcome, read_outcome  # noqa: F401 (public here too)
from .check import check_table, experiment_doc, left_out, outcome_or_damage

if TYPE_CHECKING:  # DuckDB and pandas load when results are read, not when the command line starts
    import duckdb
    import pandas as pd

RUN_COLUMNS = ["run_id", "scenario", "configuration", "repetition", "status"]
#: The `probes` view's and `Results.probes()`'s columns: the run's labels, the measured
#: process, then one probe sample (store/probes.py).
PROBE_COLUMNS = ["run_id", "scenario", "configuration", "repetition", "application", "probe", "name", "tid", "cpu_begin",
                 "cpu_end", "begin_ns", "end_ns", "duration_ns", "migrated"]
#: Run labels of an experiment of applications (config/applications.py): the applications
#: present (comma-separated), and in a fault scenario the faulty one and the fault's kind.
APPLICATION_LABELS = ["applications", "faulty", "fault"]
#: What each run ran against (from its plan); SQL-friendly, so kept in the `jobs` view.
ENEMY_COLUMNS = ["n_enemies", "enemy_kinds"]
#: Run metadata after the labels; `enemies` (the per-enemy achieved work of run.json, a list
#: of dicts) stays out of the DuckDB views.
_META_COLUMNS = ["reason", "jobs_recorded", "jobs_planned", "enemies", "dir"]


class Results:
    """A results directory (an experiment)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not (self.path / "runs").is_dir():
            raise FileNotFoundError(f"{self.path}: not an xtalk results directory (no runs/)")
        #: Runs left out because their files are damaged: run directory name -> what is wrong
        #: (one line naming the file; store/check.py). Filled by `runs()`.
        self.left_out: dict[str, str] = {}
        self._checked: dict[str, RunOutcome | None] = {}

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in (self.path / "runs").iterdir() if p.is_dir())

    def _usable(self, d: Path) -> RunOutcome | None:
        """The run's outcome when its run.json and job table are sound; None (the run left
        out, said once, and why kept in `left_out`) otherwise."""
        if d.name not in self._checked:
            meta, why = outcome_or_damage(d)
            if meta is not None:
                why = check_table(d, meta)
            if meta is not None and why is None and meta.invalid:  # its settings drifted (targets/settings.py)
                why = f"invalid: {meta.invalid}"
            if why is not None:
                meta = None
                self.left_out[d.name] = why
            self._checked[d.name] = meta
        return self._checked[d.name]

    def outcomes(self) -> dict[str, RunOutcome]:
        """run_id -> the typed outcome (run.json) of every usable run, in directory order:
        each run.json is read once per Results; a damaged run is left out (`left_out`)."""
        out = {}
        for d in self.run_dirs():
            meta = self._usable(d)
            if meta is not None:
                out[meta.run_id or d.name] = meta
        return out

    def _say_left_out(self) -> None:
        """Say each run left out (once: `left_out` warns once per message)."""
        for run, why in self.left_out.items():
            left_out(run, why)

    def runs(self) -> pd.DataFrame:
        """One row per run: labels, status, ``n_enemies``, ``enemy_kinds``, reason, jobs
        recorded, ``enemies`` (each enemy's achieved work, as run.json lists it). A run whose
        run.json or job table is damaged is left out: named in `left_out` and said once as a
        `LeftOut` warning. Every run damaged: UsageError naming the first damage."""
        import pandas as pd

        rows = []
        dirs = self.run_dirs()
        have = {d.name for d in dirs}
        planned = self._planned()
        # Runs go in this order, so a missing one before a run that is there was deleted (a
        # missing tail is an experiment stopped early: the summary counts those as not run).
        last = max((i for i, run in enumerate(planned) if run in have), default=-1)
        for run in planned[:last]:
            if run not in have and run not in self.left_out:
                self.left_out[run] = f"no directory runs/{run}, though experiment.json lists it before runs that are there"
        for d in dirs:
            meta = self._usable(d)
            if meta is None:
                continue
            labels = meta.labels()
            # Labels first: a label may not overwrite run metadata (a campaign's `enemies`
            # label, the count, once replaced the per-enemy list and then both were dropped).
            row = {k: v for k, v in self._label_columns(labels).items() if k not in _RESERVED}
            row.update({
                "run_id": meta.run_id or d.name,
                "scenario": labels.get("scenario", ""),
                "configuration": labels.get("configuration", "default"),
                "repetition": int(labels.get("repetition", 0)),
                "status": meta.status,
                **enemy_summary(meta),
                "reason": meta.reason,
                "jobs_recorded": meta.jobs_recorded,
                "jobs_planned": meta.jobs_planned,
                "enemies": [e.model_dump() for e in meta.enemies],
                "dir": str(d),
            })
            rows.append(row)
        if not rows and self.left_out:  # nothing usable: one line, no warning before it
            run, why = next(iter(self.left_out.items()))
            more = f" (and {len(self.left_out) - 1} more runs)" if len(self.left_out) > 1 else ""
            raise UsageError(f"{self.path}: no usable run: runs/{run}: {why}{more}")
        self._say_left_out()
        extra = [c for c in (rows[0] if rows else {}) if c not in _RESERVED]
        return pd.DataFrame(rows, columns=RUN_COLUMNS + ENEMY_COLUMNS + extra + _META_COLUMNS)

    def _planned(self) -> list[str]:
        """The run ids the experiment planned (experiment.json's run order)."""
        return [r["run_id"] for r in experiment_doc(self.path).get("order", [])]

    def _label_columns(self, labels: dict) -> dict:
        """Extra per-run columns taken from the plan's labels: those of applications (an
        experiment without them has none; campaigns add theirs)."""
        if "applications" not in labels:
            return {}
        return {k: labels.get(k, "") for k in APPLICATION_LABELS}

    def ensure_parquet(self) -> list[Path]:
        """Convert any job log not yet converted (e.g. after a crash) and list the files."""
        from .jobs import convert_run

        files = []
        for d in self.run_dirs():
            if self._usable(d) is None:
                continue  # damaged: left out (said by runs(), which every reader calls)
            pq, log = d / "jobs.parquet", d / "jobs.bin"
            # An up-to-date table is listed without being read: campaigns hold 10^8 rows.
            fresh = pq.exists() and (not log.exists() or pq.stat().st_mtime >= log.stat().st_mtime)
            if fresh or convert_run(d) is not None:
                files.append(pq)
        return files

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with views `jobs`, `runs` and `probes` (every probe sample, with
        its run's labels; empty without probes) over this experiment."""
        import duckdb

        files = self.ensure_parquet()
        probe_files = self._probe_files()
        runs = self.runs().drop(columns=["enemies"])
        culprit_files = [Path(d) / "culprits.parquet" for d in runs["dir"] if (Path(d) / "culprits.parquet").exists()]
        # What the views read: store/sandbox.py lets a locked connection read these and no other.
        self.parquet_files = files + [Path(f) for f in probe_files["filename"]] + culprit_files
        con = duckdb.connect()
        self._probes_view(con, probe_files)
        con.register("runs_df", runs)
        con.execute("CREATE VIEW runs AS SELECT * FROM runs_df")
        _culprits_view(con, culprit_files)
        if files:
            lst = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            src = f"read_parquet([{lst}], filename = true, union_by_name = true)"
            r_cols, j_cols = _application_columns("application" in runs.columns,
                                                  "application" in [d[0] for d in con.execute(f"SELECT * FROM {src} LIMIT 0").description])
            con.execute(f"""CREATE VIEW jobs AS
                SELECT r.* EXCLUDE (status, reason, jobs_recorded, jobs_planned, dir){r_cols}, j.* EXCLUDE (filename{j_cols}
                FROM {src} j
                JOIN runs r ON r.dir || '/jobs.parquet' = j.filename""")
        return con

    def _probe_files(self) -> pd.DataFrame:
        """Each probes.parquet of the results (victim's and applications') with its run's
        labels and the measured process that wrote it."""
        import pandas as pd

        from .jobs import measured_logs

        self.ensure_parquet()  # converts probes.bin beside each job log
        rows = []
        for r in self.runs().itertuples():
            for app, where, _ in measured_logs(Path(r.dir)):
                f = where / "probes.parquet"
                if f.exists():
                    rows.append({"filename": str(f), "run_id": r.run_id, "scenario": r.scenario,
                                 "configuration": r.configuration, "repetition": r.repetition, "application": app})
        return pd.DataFrame(rows, columns=["filename", *PROBE_COLUMNS[:5]])

    def _probes_view(self, con: duckdb.DuckDBPyConnection, files: pd.DataFrame | None = None) -> None:
        """The `probes` view: every sample, read from the Parquet files only when queried
        (``files``: :meth:`_probe_files`, when the caller has them)."""
        files = self._probe_files() if files is None else files
        con.register("probe_files_df", files)
        if files.empty:
            cols = ", ".join(f"NULL::{'VARCHAR' if c in ('run_id', 'scenario', 'configuration', 'application', 'name') else 'BIGINT'}"
                             f" AS {c}" for c in PROBE_COLUMNS)
            con.execute(f"CREATE VIEW probes AS SELECT {cols} WHERE false")
            return
        lst = ", ".join("'" + f.replace("'", "''") + "'" for f in files["filename"])
        con.execute(f"""CREATE VIEW probes AS
            SELECT f.run_id, f.scenario, f.configuration, f.repetition, f.application, p.* EXCLUDE (filename)
            FROM read_parquet([{lst}], filename = true, union_by_name = true) p
            JOIN probe_files_df f ON f.filename = p.filename""")

    def probes(self) -> pd.DataFrame:
        """Every probe sample of every run (store/probes.py: probe, name, tid, begin_ns, end_ns,
        duration_ns, CPUs), with the run's labels and the ``application`` that recorded it.
        Named probes carry their name (the experiment file's, the program's own, or the
        system call of the preload library); ``name`` is "" for an unnamed one."""
        import duckdb

        con = duckdb.connect()
        self._probes_view(con)
        return con.execute("SELECT * FROM probes ORDER BY run_id, application, begin_ns").df()

    def culprits(self) -> pd.DataFrame:
        """Every traced run's culprits (the `culprits` view): one row per run × job × task or
        interrupt, with the run's labels; ``blocked_ns`` (the time it held the victim off its
        CPU: ``preempted_ns`` + ``before_ns`` + ``interrupted_ns``) and ``ns`` (present on the
        victim's CPU during the job). Empty without a kernel trace (docs/observe.md)."""
        return self.connect().execute("SELECT * FROM culprits ORDER BY run_id, job, blocked_ns DESC").df()

    def trace(self, run):
        """The kernel trace of run ``run`` (its run_id or directory) as one DataFrame per
        event type, the shape of a LISA ``Trace`` (``df_event(name)``; trace/frames.py)."""
        from ..trace.frames import RunTrace

        d = Path(run)
        if not (d / "run.json").exists():
            runs = self.runs()
            hit = runs[runs["run_id"] == str(run)]
            if hit.empty:
                raise UsageError(f"run: {run!r} is not a run of {self.path}; give a run_id of `.runs()` or a run directory")
            d = Path(hit["dir"].iloc[0])
        return RunTrace.of(d)

    def jobs(self, measured_only: bool = True) -> pd.DataFrame:
        """Every job of every run, with run_id, scenario, configuration and repetition."""
        import pandas as pd

        con = self.connect()
        if not self.ensure_parquet():
            return pd.DataFrame()
        where = "WHERE NOT warmup" if measured_only else ""
        return con.execute(f"SELECT * FROM jobs {where} ORDER BY run_id, job").df()


_RESERVED = set(RUN_COLUMNS + ENEMY_COLUMNS + _META_COLUMNS)
#: The `culprits` view's own columns (culprits.parquet, trace/culprits.py), after the run's labels.
CULPRIT_COLUMNS = ["job", "kind", "name", "pid", "ns", "blocked_ns", "preempted_ns", "before_ns", "interrupted_ns"]


def _culprits_view(con: duckdb.DuckDBPyConnection, files: list[Path]) -> None:
    """The `culprits` view: every traced run's culprits.parquet with its run's labels (a table
    written before blocked time was derived reads 0 there)."""
    if not files:
        cols = ", ".join(f"NULL::{'VARCHAR' if c in ('run_id', 'scenario', 'configuration', 'kind', 'name') else 'BIGINT'}"
                         f" AS {c}" for c in ["run_id", "scenario", "configuration", "repetition", *CULPRIT_COLUMNS])
        con.execute(f"CREATE VIEW culprits AS SELECT {cols} WHERE false")
        return
    lst = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    src = f"read_parquet([{lst}], filename = true, union_by_name = true)"
    have = {d[0] for d in con.execute(f"SELECT * FROM {src} LIMIT 0").description}
    own = ", ".join(f"c.{c}" if c in have else f"0::BIGINT AS {c}" for c in CULPRIT_COLUMNS)
    con.execute(f"""CREATE VIEW culprits AS
        SELECT r.run_id, r.scenario, r.configuration, r.repetition, {own}
        FROM {src} c JOIN runs r ON r.dir || '/culprits.parquet' = c.filename""")


def _application_columns(run_label: bool, job_column: bool) -> tuple[str, str]:
    """The SQL tails of the `jobs` view's run and job columns that give every row its
    `application`: the job's measured process (jobs.parquet), "victim" for tables written
    before applications. A campaign's runs carry an `application` label (the victim under
    study): there it keeps its place and names the victim's rows, as before applications."""
    job = "j.application" if job_column else "NULL"
    if run_label:
        expr = f"CASE WHEN {job} IS NULL OR {job} = 'victim' THEN COALESCE(NULLIF(r.application, ''), 'victim') ELSE {job} END"
        return f" REPLACE ({expr} AS application)", ", application)" if job_column else ")"
    if job_column:
        return "", ") REPLACE (COALESCE(j.application, 'victim') AS application)"
    return "", "), 'victim' AS application"


def enemy_summary(meta: RunOutcome) -> dict:
    """``n_enemies`` and ``enemy_kinds`` of a run from its outcome: the plan's enemy list (what
    was asked), else the agent's per-enemy results (a run.json without the plan)."""
    kinds = meta.enemy_kinds()
    return {"n_enemies": len(kinds), "enemy_kinds": "+".join(sorted(set(kinds)))}


def run_outcome(run_dir) -> RunOutcome | None:
    """The outcome (run.json, typed) of the run in ``run_dir``; None where it has none (the
    agent never wrote it, or wrote it cut short). The store's door to run.json for a reader
    that holds a run directory, not the Results (xtalk.open) or ReportData that read it once."""
    return read_outcome(Path(run_dir))


def run_outcomes(runs: pd.DataFrame) -> Iterator[RunOutcome | None]:
    """The outcome of each row of a run table (`Results.runs()`: its ``dir``), in its order,
    each read when the caller reaches it (a reader that stops at the first plan reads one)."""
    return (run_outcome(d) for d in (runs["dir"] if "dir" in getattr(runs, "columns", ()) else []))


def open(path) -> Results:  # noqa: A001 - the public API reads as xtalk.store.open(path)
    """Open a results directory."""
    return Results(Path(path))


def __getattr__(name: str):
    """`convert_run` and `read_job_log` (store/jobs.py), public here too, loaded with pandas
    when first named."""
    if name in ("convert_run", "read_job_log"):
        from . import jobs

        return getattr(jobs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
