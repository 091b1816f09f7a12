"""The campaign journal: an append-only JSONL file, one fsynced line per state change.

    {"t": 1732190000.1, "run": "03-app-default-solo-r0", "state": "running", "target": "local", "pid": 1234}

States: `planned` (written once for every run when the campaign is created), `running`,
`done` (completed), `failed` (failed or timed out; final, its partial data kept), `requeued`
(its target did not answer; it goes back to the queue). The last line of a run wins.

Lines without a run are the lab's: a board's place acquired, taken over, booted, failed or
released (targets/labgrid.py, `append_lines`), so a resume's journal shows what it took over;
`states` reads runs only.

A `kill -9` can leave the last line torn; reading ignores a line that does not parse and the
writer first cuts the file back to its last newline, so the journal never holds a corrupt line
between two good ones. A line is durable once `append` returns (write + fsync).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

from .. import safepath

FINAL = ("done", "failed")
STATES = ("planned", "running", "done", "failed", "requeued")


def read(path: Path) -> list[dict]:
    """Every complete, parseable line of the journal."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a kill; its state change did not happen
    return out


def states(events: list[dict]) -> dict[str, dict]:
    """run id -> its last event."""
    last: dict[str, dict] = {}
    for e in events:
        if "run" in e:
            last[e["run"]] = e
    return last


def counts(events: list[dict]) -> Counter:
    return Counter(e["state"] for e in states(events).values())


def append_lines(path: Path, events: list[dict]) -> bool:
    """Append whole lines to an existing journal (one write, fsynced) beside the campaign's own
    writer: an O_APPEND write of whole lines is not interleaved with its. False when there is
    no journal (a campaign refused before its first run removed its directory)."""
    try:
        fd = safepath.open_fd(Path(path), os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        _write_lines(fd, events)
    finally:
        os.close(fd)
    return True


def _write_lines(fd: int, events: list[dict]) -> None:
    """``events`` as JSON lines in one write() on an O_APPEND descriptor, then fsync: one write
    of whole lines is not interleaved with another writer's, and survives a power cut."""
    os.write(fd, "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode())
    os.fsync(fd)


class Journal:
    """Appends events durably; one writer at a time (the campaign lock guarantees it)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._repair()
        self._fd = safepath.open_fd(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _repair(self) -> None:
        """Cut a torn last line so the next append starts on a line of its own."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        if raw and not raw.endswith(b"\n"):
            keep = raw.rfind(b"\n") + 1
            fd = safepath.open_fd(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, keep)
                os.fsync(fd)
            finally:
                os.close(fd)

    def append(self, run: str | None, state: str | None = None, **fields) -> dict:
        """Write one event and fsync it."""
        e = {"t": round(time.time(), 3), **({"run": run, "state": state} if run is not None else {}), **fields}
        if state is not None and state not in STATES:
            raise ValueError(f"unknown journal state {state!r}")
        data = (json.dumps(e, separators=(",", ":")) + "\n").encode()
        # One write() of a line below PIPE_BUF-ish sizes on an O_APPEND file is not
        # interleaved with another; fsync makes it survive a power cut, not only a kill.
        os.write(self._fd, data)
        os.fsync(self._fd)
        return e

    def append_many(self, events: list[dict]) -> None:
        """Write many events with one fsync (used for the initial `planned` lines)."""
        now = round(time.time(), 3)
        _write_lines(self._fd, [{"t": now, **e} for e in events])

    def events(self) -> list[dict]:
        return read(self.path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
