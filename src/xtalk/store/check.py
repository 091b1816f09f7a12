"""What the store checks in a run directory before any reader uses it: damage is named, never
crashed on and never read silently as fewer jobs.

`check_run` returns None for a usable run, else one line naming the file and what is wrong:
run.json missing, cut short or not an outcome (through the typed outcome); jobs.bin whose
header disagrees with its size or whose record count disagrees with run.json's
`jobs_recorded`; jobs.parquet, culprits.parquet or probes.parquet whose footer does not
read; no job log at all for a run that recorded jobs. `Results.runs()` leaves
such runs out and says which and why (`LeftOut`, shown by the command line as one
`xtalk: warning:` line per run; the summary and the report list them too).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from ..errors import Damaged  # noqa: F401 (public here too: the warning the store gives)
from ..outcome import OutcomeError, RunOutcome, load_outcome
from .files import JobLogError, parquet_damage


class LeftOut(Damaged):
    """A run a reader left out because its files are damaged (the message names the file)."""


def left_out(run: str, why: str) -> str:
    """Say (once per message) that `run` was left out, and why; returns the line."""
    line = f"left out run {run}: {why}"
    warnings.warn(line, LeftOut, stacklevel=3)
    return line


#: The parts of experiment.json readers use, and their JSON types.
EXPERIMENT_FIELDS = {"experiment": dict, "order": list, "skipped_configurations": list, "enemies_alone": list}


def experiment_doc(results_dir: Path) -> dict:
    """experiment.json of a results directory, each part readers use of its JSON type. A file
    cut short or not an object reads as {} and a part of the wrong type as absent, each said
    once (`Damaged`) with what the reader does without; a missing file reads as {} unsaid
    (hand-made results and fixtures have none)."""
    path = Path(results_dir) / "experiment.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}  # hand-made results and fixtures have none: nothing of a run depends on it
    except OSError as e:
        return _without(f"unreadable ({e.strerror})")
    except ValueError as e:
        return _without(f"not JSON ({str(e).splitlines()[0]}): cut short or corrupted")
    if not isinstance(doc, dict):
        return _without(f"not an object (a JSON {type(doc).__name__})")
    for key, kind in EXPERIMENT_FIELDS.items():
        if key in doc and not isinstance(doc[key], kind):
            warnings.warn(f"experiment.json: `{key}` is a JSON {type(doc.pop(key)).__name__}, not "
                          f"{'an object' if kind is dict else 'a list'}; read without it", Damaged, stacklevel=2)
    if "order" in doc and not all(isinstance(r, dict) and isinstance(r.get("run_id"), str) for r in doc["order"]):
        warnings.warn("experiment.json: `order` holds an entry without a run_id; read without the run order",
                      Damaged, stacklevel=2)
        doc.pop("order")
    return doc


def _without(why: str) -> dict:
    warnings.warn(f"experiment.json: {why}; read without it (the run order, skipped configurations and the "
                  "enemies' rates alone are unknown)", Damaged, stacklevel=3)
    return {}


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
    log = run_dir / "jobs.bin"
    if recorded and meta.status != "running" and log.exists() and (n := _header_count(log)) is not None and n < recorded:
        return f"jobs.bin: {n} records, but run.json records {recorded} jobs"  # even with a table converted before
    if not pq_path.exists():
        if recorded and meta.status == "completed":
            return f"no job log (jobs.bin) nor table (jobs.parquet), but run.json records {recorded} jobs"
        return None
    # A table's row count is not held against run.json: tables are trimmed on purpose (test
    # fixtures, windows of a long run); a table cut short fails its footer instead.
    for name in ("jobs.parquet", "culprits.parquet", "probes.parquet"):
        if (run_dir / name).exists() and (why := parquet_damage(run_dir / name)):
            return why + ("; delete it and jobs.parquet to derive both again from the trace" if name == "culprits.parquet"
                          else "")
    return None


def _header_count(log: Path) -> int | None:
    """The record count a job log's header holds (None: no header to read)."""
    fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC)
    try:
        head = os.pread(fd, 32, 0)
    finally:
        os.close(fd)
    return int.from_bytes(head[24:32], "little") if len(head) == 32 else None


def _relative(message: str, run_dir: Path) -> str:
    """`message` with the run directory's path dropped (the run is named beside it)."""
    return message.replace(f"{run_dir}/", "").replace(str(run_dir), "run directory")
