"""What the store checks in a run directory before any reader uses it: damage is named, never
crashed on and never read silently as fewer jobs.

`check_run` returns None for a usable run, else one line naming the file and what is wrong:
run.json missing, cut short or not an outcome (through the typed outcome); jobs.bin whose
header disagrees with its size or whose record count disagrees with run.json's
`jobs_recorded`; jobs.parquet whose footer does not read or that holds fewer rows than
run.json records; culprits.parquet or probes.parquet whose footer does not read; no job
log at all for a run that recorded jobs. `Results.runs()` leaves
such runs out and says which and why (`LeftOut`, shown by the command line as one
`xtalk: warning:` line per run; the summary and the report list them too).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..outcome import OutcomeError, RunOutcome, load_outcome
from .files import JobLogError, parquet_damage


class LeftOut(UserWarning):
    """A run a reader left out because its files are damaged (the message names the file)."""


def left_out(run: str, why: str) -> str:
    """Say (once per message) that `run` was left out, and why; returns the line."""
    line = f"left out run {run}: {why}"
    warnings.warn(line, LeftOut, stacklevel=3)
    return line


def outcome_or_damage(run_dir: Path) -> tuple[RunOutcome | None, str | None]:
    """(the run's outcome, None), or (None, what is wrong with its run.json)."""
    try:
        return load_outcome(run_dir), None
    except OutcomeError as e:
        return None, _relative(str(e), run_dir)


def check_table(run_dir: Path, meta: RunOutcome) -> str | None:
    """What is wrong with the run's job table (converted from its log first when stale), or None."""
    from .jobs import convert_run, needs_conversion

    run_dir = Path(run_dir)
    pq_path = run_dir / "jobs.parquet"
    recorded = meta.jobs_recorded
    try:
        if needs_conversion(run_dir):
            convert_run(run_dir)
    except JobLogError as e:
        return _relative(str(e), run_dir)
    if not pq_path.exists():
        if recorded:
            return f"no job log (jobs.bin) nor table (jobs.parquet), but run.json records {recorded} jobs"
        return None
    import pyarrow.parquet as pq

    for name in ("jobs.parquet", "culprits.parquet", "probes.parquet"):
        if (run_dir / name).exists() and (why := parquet_damage(run_dir / name)):
            return why + ("; delete it and jobs.parquet to derive both again from the trace" if name == "culprits.parquet"
                          else "")
    rows = pq.read_metadata(pq_path).num_rows
    if recorded is not None and rows < recorded:
        return f"jobs.parquet: {rows} rows, but run.json records {recorded} jobs (cut short)"
    return None


def _relative(message: str, run_dir: Path) -> str:
    """`message` with the run directory's path dropped (the run is named beside it)."""
    return message.replace(f"{run_dir}/", "").replace(str(run_dir), "run directory")
