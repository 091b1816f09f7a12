"""The private directory where xtalk keeps machine-wide state (the local target lock; the
agent keeps its journals in the same place), and the rules that make a path trustworthy there.

A path under a directory another user can write is never trusted: they could plant a file or a
symbolic link there before us. So root uses `/run/xtalk` (created 0700 if missing; `/run`
itself is root's), another user `$XDG_RUNTIME_DIR` (a per-user tmpfs) or, without one,
`/tmp/xtalk-<uid>` created 0700. Whatever the path, it must be a real directory (not a
symbolic link), owned by the effective user and writable by no one else; files in it are
opened with O_NOFOLLOW and checked after opening. A violation is one line naming the path and
the fix, never a silent fallback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UsageError

#: Root's directory, shared with the agent (its journals live there too).
ROOT_DIR = Path("/run/xtalk")


class UnsafePath(UsageError):
    """A path xtalk would trust is not private to the user running it; nothing was started."""


def verify_dir(path: Path) -> Path:
    """`path` if it is a directory (not a link) owned by the effective user and not writable
    by group or others; UnsafePath naming the problem and the fix otherwise."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise UnsafePath(f"{path}: missing; create it with mode 0700 (mkdir -m 700 {path})") from None
    euid = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path}: a symbolic link where xtalk expects its private directory; remove it (rm {path})")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path}: not a directory; remove it (rm {path}) so that xtalk creates its private directory")
    if st.st_uid != euid:
        raise UnsafePath(f"{path}: owned by uid {st.st_uid}, not by uid {euid} who runs xtalk; "
                         f"remove it or `chown {euid} {path}`")
    if st.st_mode & 0o022:
        raise UnsafePath(f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); `chmod 700 {path}`")
    return path


def private_dir() -> Path:
    """The verified private directory of the effective user (created 0700 when missing)."""
    euid = os.geteuid()
    if euid == 0:
        path = ROOT_DIR
    elif os.environ.get("XDG_RUNTIME_DIR"):
        return verify_dir(Path(os.environ["XDG_RUNTIME_DIR"]))
    else:
        path = Path(f"/tmp/xtalk-{euid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass  # verified below, whoever made it
    except OSError as e:
        raise UnsafePath(f"{path}: cannot create xtalk's private directory: {e.strerror}") from None
    return verify_dir(path)


def open_private_file(path: Path, flags: int = os.O_RDWR | os.O_CREAT, mode: int = 0o600) -> int:
    """Open `path` without following a symbolic link and check what was opened: a regular
    file, owned by the effective user, with a single name (a hard link planted by another user
    could point at a file of root's). Returns the descriptor (close-on-exec)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == 40:  # ELOOP: the last component is a symbolic link
            raise UnsafePath(f"{path}: a symbolic link; xtalk does not follow links here; remove it (rm {path})") from None
        raise UnsafePath(f"{path}: cannot open: {e.strerror}") from None
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "not a regular file; remove it"
    elif st.st_uid != os.geteuid():
        problem = f"owned by uid {st.st_uid}, not by uid {os.geteuid()} who runs xtalk; remove it"
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} names (hard links); remove it"
    if problem:
        os.close(fd)
        raise UnsafePath(f"{path}: {problem} (rm {path})")
    return fd
