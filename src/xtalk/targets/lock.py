"""The machine-wide lock of the local target: one run at a time on this machine, whichever
command started it (`xtalk run`, a campaign, a cluster worker, `characterize`, ...).

Every run holds an exclusive flock on one file for its whole length; a killed holder releases
it at once. The file lives in xtalk's private directory (see `private_dir`), so no other user
can hold it, replace it or point it elsewhere. Whoever holds it writes its pid and command
line into it, so a waiter says once whom it waits for, and gives up after
$XTALK_LOCK_TIMEOUT seconds (default one hour) with one line instead of hanging silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import sys
import threading
from pathlib import Path
from typing import Callable

from ..errors import AgentError, UsageError
from .private_dir import open_private_file, private_dir

#: How long a run waits for the machine by default: longer than any sensible single run.
DEFAULT_TIMEOUT_S = 3600.0


class TargetBusy(AgentError):
    """Another run held the machine longer than the lock time-out; nothing was started."""


def local_lock_path() -> Path:
    """$XTALK_TARGET_LOCK, else `target.lock` in the verified private directory."""
    env = os.environ.get("XTALK_TARGET_LOCK")
    if env:
        return Path(env)
    return private_dir() / "target.lock"


def lock_timeout() -> float:
    """Seconds to wait for the machine: $XTALK_LOCK_TIMEOUT (`inf` waits for ever)."""
    text = os.environ.get("XTALK_LOCK_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 or math.isinf(value)) or math.isnan(value):
        raise UsageError(f"XTALK_LOCK_TIMEOUT={text!r}: give seconds to wait for the machine (a number ≥ 0, or inf)")
    return value


def _describe_self() -> str:
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
        words = [a.decode(errors="replace") for a in argv if a]
    except OSError:
        words = list(sys.argv)
    # `python -m xtalk.cli run x.toml` reads better as `xtalk run x.toml`.
    if len(words) >= 3 and words[1] == "-m" and words[2].startswith("xtalk"):
        words = ["xtalk", *words[3:]]
    text = " ".join(words)
    return "".join(c if c.isprintable() else "?" for c in text)[:200]


def _holder(fd: int) -> str:
    """`pid (command)` of the holder, from what it wrote into the lock file."""
    try:
        text = os.pread(fd, 512, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    pid, _, cmd = text.partition(" ")
    if not pid.isdigit():
        return "another process"
    return f"{pid} ({cmd})" if cmd else pid


def _flock_within(fd: int, timeout: float) -> bool:
    """Take the exclusive lock on `fd`, blocking at most `timeout` seconds.

    The kernel wakes a blocked flock as soon as the holder lets go, so two programs that each
    take the lock run after run interleave; a polling loop would almost always miss those
    short gaps. flock has no time-out, so a helper thread blocks on a duplicate descriptor (same
    open file, same lock) while we wait on it; if we give up first, the thread drops the lock
    as soon as it gets it."""
    dup = os.dup(fd)
    got, gave_up, mutex, done = [False], [False], threading.Lock(), threading.Event()

    def block():
        try:
            fcntl.flock(dup, fcntl.LOCK_EX)
            with mutex:
                if gave_up[0]:
                    fcntl.flock(dup, fcntl.LOCK_UN)
                else:
                    got[0] = True
        finally:
            os.close(dup)
            done.set()

    threading.Thread(target=block, name="xtalk-target-lock", daemon=True).start()
    try:
        done.wait(None if math.isinf(timeout) else timeout)
    finally:
        with mutex:
            if not got[0]:
                gave_up[0] = True
    return got[0]


@contextlib.contextmanager
def target_lock(path: Path | None = None, timeout: float | None = None, say: Callable[[str], None] | None = None):
    """Hold the machine for one run. Waits (saying once for whom) at most `timeout` seconds
    (default $XTALK_LOCK_TIMEOUT), then raises TargetBusy; UnsafePath when the lock file is not
    private to us."""
    path = Path(path) if path else local_lock_path()
    timeout = lock_timeout() if timeout is None else timeout
    say = say or (lambda line: print(f"xtalk: {line}", file=sys.stderr, flush=True))
    fd = open_private_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            say(f"waiting for {holder} holding {path}")
            if not _flock_within(fd, timeout):
                raise TargetBusy(f"the machine is busy: {_holder(fd)} has held {path} for more than {timeout:g} s; "
                                 "try again when it ends, or set XTALK_LOCK_TIMEOUT to wait longer") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {_describe_self()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # nobody holds it now: a stale holder would mislead a waiter
    finally:
        os.close(fd)
