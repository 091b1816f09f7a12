"""Experiment and campaign files are code that runs as root: their argv, preloads, environment
and paths all reach the agent. So when xtalk runs as root, a file someone else could have
written is refused before anything starts.

Trusted: a file owned by root or by the user who invoked xtalk through sudo ($SUDO_UID), not
writable by group or others, in a directory that only its owner can change (not writable by
group or others, unless it has the sticky bit, like /tmp, where others cannot rename or
remove our file). The checks follow symbolic links to the file that will be read. Commands
that run things refuse with one line and exit 2; `plan` only warns. As another user, xtalk
runs with that user's own rights and checks nothing.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import Path

from .errors import UsageError


class UntrustedFile(UsageError):
    """A file that runs as root could have been written by someone else; nothing started."""


def trusted_owners() -> set[int]:
    """Root, and the user who ran `sudo xtalk ...`."""
    owners = {0, os.geteuid()}
    sudo = os.environ.get("SUDO_UID", "")
    if sudo.isdigit():
        owners.add(int(sudo))
    return owners


def _who(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def problem(path: Path) -> str | None:
    """Why `path` must not be run as root, as one line with the fix; None when it may be."""
    path = Path(path)
    try:
        real = path.resolve(strict=True)
        st = os.stat(real)
        parent = os.stat(real.parent)
    except OSError:
        return None  # missing or unreadable: the loader says so in its own words
    owners = trusted_owners()
    if st.st_uid not in owners:
        return (f"{path}: owned by {_who(st.st_uid)}, and xtalk runs what it says as root; "
                f"check it, then `chown root {path}` (or run xtalk as that user)")
    if st.st_mode & 0o022:
        return (f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}), and xtalk runs what it says "
                f"as root; `chmod go-w {path}`")
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        return (f"{path}: its directory {real.parent} is writable by group or others (mode "
                f"{stat.S_IMODE(parent.st_mode):04o}), so anyone could swap the file xtalk runs as root; "
                f"`chmod go-w {real.parent}` or move the file")
    if parent.st_uid not in owners:
        return (f"{path}: its directory {real.parent} belongs to {_who(parent.st_uid)}, who could swap the file xtalk "
                f"runs as root; move the file to a directory of yours")
    return None


def require_trusted(*paths: Path) -> None:
    """Refuse (UntrustedFile, exit 2) a file to be run as root that someone else could write."""
    if os.geteuid() != 0:
        return
    for p in paths:
        why = problem(p)
        if why:
            raise UntrustedFile(why)


def warn_untrusted(*paths: Path) -> None:
    """Say (on stderr) what `require_trusted` would refuse, for commands that run nothing."""
    if os.geteuid() != 0:
        return
    for p in paths:
        why = problem(p)
        if why:
            print(f"xtalk: warning: {why}; `run` will refuse it", file=sys.stderr)
