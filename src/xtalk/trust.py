"""Experiment and campaign files are code that runs as root: their argv, preloads, environment
and paths all reach the agent. So when xtalk runs as root, a file someone else could have
written is refused before anything starts.

Trusted: a file owned by root or by the user who invoked xtalk through sudo ($SUDO_UID), not
writable by group or others, in a directory that only its owner can change (not writable by
group or others, unless it has the sticky bit, like /tmp, where others cannot rename or
remove our file). The checks follow symbolic links to the file that will be read. Commands
that run things refuse with one line and exit 2; `plan` only warns. As another user, xtalk
runs with that user's own rights and checks nothing.

Results directories (a results root, `--out`, a directory a reader converts logs in) follow
the same rule (`dir_problem`, applied by safepath.results_dir): root writes there, and whoever
else could change the directory could make root write anywhere.
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


def _rule(shown: str, path: str, st: os.stat_result, parent_path: Path, parent: os.stat_result, does: str, swap: str) -> str | None:
    """The one trust rule, for a file xtalk runs and a directory it writes results into alike:
    owned by root or $SUDO_UID, not writable by group or others, in a directory that no one
    else owns or can change (sticky excepted). `does` says what xtalk does with it as root,
    `swap` what another user could swap."""
    owners = trusted_owners()
    if st.st_uid not in owners:
        return (f"{shown}: owned by {_who(st.st_uid)}, and {does}; "
                f"check it, then `chown root {path}` (or run xtalk as that user)")
    if st.st_mode & 0o022:
        return (f"{shown}: writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}), and {does}; "
                f"`chmod go-w {path}`")
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        return (f"{shown}: its directory {parent_path} is writable by group or others (mode "
                f"{stat.S_IMODE(parent.st_mode):04o}), so anyone could swap {swap}; "
                f"`chmod go-w {parent_path}` or move it")
    if parent.st_uid not in owners:
        return (f"{shown}: its directory {parent_path} belongs to {_who(parent.st_uid)}, who could swap "
                f"{swap}; move it to a directory of yours")
    return None


def problem(path: Path) -> str | None:
    """Why `path` must not be run as root, as one line with the fix; None when it may be."""
    path = Path(path)
    try:
        real = path.resolve(strict=True)
        st = os.stat(real)
        parent = os.stat(real.parent)
    except OSError:
        return None  # missing or unreadable: the loader says so in its own words
    return _rule(str(path), str(path), st, real.parent, parent, "xtalk runs what it says as root",
                 "the file xtalk runs as root")


def dir_problem(real: Path, shown: str) -> str | None:
    """Why root must not write results into the directory `real` (links already resolved;
    `shown` is how the command line named it), as one line with the fix; None when it may.
    A directory still to be made is judged by the nearest one that exists: xtalk makes the
    rest itself."""
    real = Path(real)
    here = real
    while True:
        try:
            st = os.lstat(here)
            break
        except FileNotFoundError:
            if here.parent == here:
                return None
            here = here.parent
        except OSError:
            return None  # unreadable: the writer says so in its own words
    if not stat.S_ISDIR(st.st_mode):
        return f"{shown}: {here} is not a directory; give a directory"
    if st.st_mode & stat.S_ISVTX and st.st_uid in trusted_owners():
        if here != real:
            return None  # made by xtalk in a sticky directory such as /tmp: others cannot touch it
        # Others may add entries to a sticky directory but not rename or remove root's, and
        # xtalk never follows theirs (safepath): its own mode is no threat, its parent still is.
        st = os.stat_result((stat.S_IMODE(st.st_mode) & ~0o022 | stat.S_IFDIR, *tuple(st)[1:]))
    try:
        parent = os.stat(here.parent)
    except OSError:
        return None
    where = shown if here == real else f"{shown} (in {here})"
    return _rule(where, str(here), st, here.parent, parent, "xtalk writes results there as root",
                 "the directory root writes into")


def link_problem(link: str, st: os.stat_result) -> str | None:
    """Why root must not follow the symbolic link `link` (lstat `st`) to a results directory:
    one that someone else made could send root's writes anywhere."""
    if st.st_uid in trusted_owners():
        return None
    return (f"{link}: a symbolic link owned by {_who(st.st_uid)}, and xtalk would write results through it as root; "
            f"give the real path of a directory of yours")


def _problems(paths) -> list[str]:
    """What the trust rule says of each of `paths` (nothing unless root)."""
    return [why for why in map(problem, paths) if why] if os.geteuid() == 0 else []


def require_trusted(*paths: Path) -> None:
    """Refuse (UntrustedFile, exit 2) a file to be run as root that someone else could write."""
    for why in _problems(paths)[:1]:
        raise UntrustedFile(why)


def warn_untrusted(*paths: Path) -> None:
    """Say (on stderr) what `require_trusted` would refuse, for commands that run nothing."""
    for why in _problems(paths):
        print(f"xtalk: warning: {why}; `run` will refuse it", file=sys.stderr)
