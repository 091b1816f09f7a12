"""Writing under a results directory without following anyone's links.

xtalk runs as root on shared machines, and a results directory is often somewhere another user
could reach (their home, a project share). So every file xtalk creates or replaces there goes
through this module, and nothing else opens a results path for writing (tests/test_safepath.py
greps for it):

- the directory is reached from `/` one component at a time without following a symbolic
  link: one `openat2(RESOLVE_NO_SYMLINKS)` where the kernel has it (5.6+), otherwise
  `openat(O_NOFOLLOW|O_DIRECTORY)` per component; a link anywhere on the way is refused in
  one line (exit 2) naming the link and the fix;
- the file itself is created under a fresh random name, relative to that directory's
  descriptor, with `O_CREAT|O_EXCL|O_NOFOLLOW`, then renamed over the final name within the
  same directory: readers see the whole file or none of it, and a link or file planted at the
  final name (or at any temporary name) is replaced, never written through;
- directories are made with `mkdirat` relative to their parent's descriptor.

At the door of each command the directory itself is checked once (`results_dir`): as root, one
that anyone but root or $SUDO_UID owns or can write, or that sits in a directory others can
change, is refused with the trust rule of experiment files (`trust.py`). The path it returns
has the invoking user's own links resolved; what follows never meets a link.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import platform
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .errors import UsageError
from .trust import dir_problem, link_problem

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_RESOLVE_NO_SYMLINKS = 0x04
#: openat2's number is the same on every architecture (new system calls share one table).
_SYS_OPENAT2 = 437


class UnsafeResultsPath(UsageError):
    """A results path that would make root write where someone else points; nothing written."""


@functools.cache
def _ctypes():
    """ctypes, libc and openat2's `struct open_how`, loaded at the first open (not by `xtalk plan`)."""
    import ctypes

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    return ctypes, ctypes.CDLL(None, use_errno=True), OpenHow


_have_openat2: bool | None = None if platform.system() == "Linux" else False


def _openat2(path: str, flags: int) -> int | None:
    """`path` opened with RESOLVE_NO_SYMLINKS; None when the kernel has no openat2."""
    global _have_openat2
    if _have_openat2 is False:
        return None
    ctypes, libc, open_how = _ctypes()
    how = open_how(flags, 0, _RESOLVE_NO_SYMLINKS)
    fd = libc.syscall(_SYS_OPENAT2, -100, path.encode(), ctypes.byref(how), ctypes.sizeof(how))  # -100: AT_FDCWD
    if fd < 0:
        e = ctypes.get_errno()
        if e in (errno.ENOSYS, errno.EPERM) and _have_openat2 is None:  # EPERM: a seccomp filter that denies it
            _have_openat2 = False
            return None
        raise OSError(e, os.strerror(e), path)
    _have_openat2 = True
    return fd


def _walk(path: str, create: bool = False) -> int:
    """`path` opened as a directory, one component at a time, never following a link; with
    `create`, a missing component is made (mkdirat relative to its parent, mode 0777 less the
    umask) and then opened like any other."""
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in [p for p in path.split("/") if p]:
            try:
                nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened below like any other
                nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refusal(path: str, e: OSError) -> UsageError:
    """One line for a directory that could not be opened along `path`."""
    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
        cur = "/"
        for part in [p for p in path.split("/") if p]:
            cur = os.path.join(cur, part)
            try:
                st = os.lstat(cur)
            except OSError:
                break
            if stat.S_ISLNK(st.st_mode):
                return UnsafeResultsPath(
                    f"{path}: {cur} is a symbolic link, and xtalk never writes results through one (as root it could "
                    f"point anywhere); give the real path ({os.path.realpath(cur)}) or remove the link")
            if not stat.S_ISDIR(st.st_mode):
                return UnsafeResultsPath(f"{path}: {cur} is not a directory; remove it or give another path")
    return UnsafeResultsPath(f"{path}: cannot open: {e.strerror}")


def _abs(path: os.PathLike | str) -> str:
    # Lexical: without links on the way (refused) the kernel resolves `..` the same way.
    return os.path.abspath(os.fspath(path))


def open_dir(path: os.PathLike | str, create: bool = False) -> int:
    """A descriptor of the directory `path` (close-on-exec), reached without following any
    link; with `create`, missing components are made (mode 0777 less the umask, as mkdir -p)."""
    p = _abs(path)
    try:
        fd = None if create else _openat2(p, _DIR_FLAGS)
        return fd if fd is not None else _walk(p, create)
    except (PermissionError, FileNotFoundError):
        raise
    except OSError as e:
        raise _refusal(p, e) from None


def _split(path: os.PathLike | str) -> tuple[str, str]:
    p = _abs(path)
    parent, name = os.path.split(p)
    if not name:
        raise UnsafeResultsPath(f"{path}: not a file name")
    return parent, name


def makedirs(path: os.PathLike | str, exist_ok: bool = True) -> Path:
    """mkdir -p `path` without following links; FileExistsError when it exists and not `exist_ok`."""
    parent, name = _split(path)
    fd = open_dir(parent, create=True)
    try:
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            if not exist_ok:
                raise
            os.close(os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd))  # a directory, not a link
    except OSError as e:
        if isinstance(e, (FileExistsError, PermissionError, FileNotFoundError)):
            raise
        raise _refusal(_abs(path), e) from None
    finally:
        os.close(fd)
    return Path(path)


def mkdir(path: os.PathLike | str) -> Path:
    """Make the directory `path` (its parent must exist); FileExistsError if anything has the name."""
    parent, name = _split(path)
    fd = open_dir(parent)
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
    finally:
        os.close(fd)
    return Path(path)


def _create_in(dfd: int, name: str, mode: int = 0o644) -> int:
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)


@contextmanager
def replace(path: os.PathLike | str, mode: str = "w", fsync: bool = False, parents: bool = False,
            encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write `path` whole or not at all: yields a file object of a fresh temporary file in the
    same directory (O_EXCL|O_NOFOLLOW under a random name), renamed over `path` when the block
    ends without an error (removed otherwise). `mode` is "w" (text) or "wb"; `parents` makes
    the missing directories; `fsync` flushes the data to disk before the rename."""
    parent, name = _split(path)
    dfd = open_dir(parent, create=parents)
    try:
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = _create_in(dfd, tmp)
        try:
            with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding})) as f:
                yield f
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)


def write_text(path: os.PathLike | str, text: str, parents: bool = False, fsync: bool = False) -> Path:
    """Replace `path` with `text` (see `replace`)."""
    with replace(path, "w", fsync=fsync, parents=parents) as f:
        f.write(text)
    return Path(path)


def write_bytes(path: os.PathLike | str, data: bytes, parents: bool = False, fsync: bool = False) -> Path:
    """Replace `path` with `data` (see `replace`)."""
    with replace(path, "wb", fsync=fsync, parents=parents) as f:
        f.write(data)
    return Path(path)


def open_new(path: os.PathLike | str, mode: str = "wb") -> IO:
    """A new file at `path` (FileExistsError if anything, a link included, has the name), for
    a file written as it goes (a log another process streams into)."""
    parent, name = _split(path)
    dfd = open_dir(parent)
    try:
        return os.fdopen(_create_in(dfd, name), mode)
    finally:
        os.close(dfd)


def open_fd(path: os.PathLike | str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of `path` opened with `flags` (os.O_*), close-on-exec, the file itself and
    every directory on the way reached without following a link: a journal appended to, a
    lock file."""
    parent, name = _split(path)
    dfd = open_dir(parent)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeResultsPath(f"{path}: a symbolic link, and xtalk never writes results through one; remove it") from None
        raise
    finally:
        os.close(dfd)


def rename(src: os.PathLike | str, dst: os.PathLike | str) -> None:
    """Rename `src` to `dst` (files or directories), neither reached through a link."""
    (sp, sn), (dp, dn) = _split(src), _split(dst)
    sfd = open_dir(sp)
    try:
        dfd = open_dir(dp)
        try:
            os.rename(sn, dn, src_dir_fd=sfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def unlink(path: os.PathLike | str, missing_ok: bool = True) -> None:
    """Remove the file (or link) `path`, reached without following a link."""
    parent, name = _split(path)
    try:
        dfd = open_dir(parent)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        if not missing_ok:
            raise
    finally:
        os.close(dfd)


def _resolve(path: Path) -> Path:
    """`path` with its links resolved, each link checked: as root, one another user made is refused."""
    p, seen = os.path.join(os.getcwd(), os.fspath(path)), 0  # not normalised: `..` after a link is the kernel's
    out = "/"
    parts = [c for c in p.split("/") if c]
    while parts:
        part = parts.pop(0)
        if part in (".", ".."):
            out = out if part == "." else os.path.dirname(out)
            continue
        cur = os.path.join(out, part)
        try:
            st = os.lstat(cur)
        except OSError:
            return Path(os.path.normpath(os.path.join(cur, *parts)))  # missing from here on: no link to meet
        if not stat.S_ISLNK(st.st_mode):
            out = cur
            continue
        seen += 1
        why = link_problem(cur, st) if seen <= 40 else f"{path}: too many levels of symbolic links"
        if why:
            raise UnsafeResultsPath(why)
        target = os.readlink(cur)
        parts = [c for c in target.split("/") if c] + parts
        if target.startswith("/"):
            out = "/"
    return Path(out)


def results_dir(path: os.PathLike | str, what: str) -> Path:
    """The directory `path` where a command writes results (`what` names its option or
    argument in the refusal), resolved; as root, refused (UnsafeResultsPath, exit 2) when
    anyone but root or $SUDO_UID owns or can write it or the directory it sits in, or when a
    link on the way belongs to someone else (see `trust.dir_problem`)."""
    real = _resolve(Path(path))
    if os.geteuid() == 0:
        why = dir_problem(real, shown=f"{what} {path}")
        if why:
            raise UnsafeResultsPath(why)
    return real


def output_file(path: os.PathLike | str, what: str) -> Path:
    """The single file `path` a command writes (`--junit FILE`, `--out FILE`, `--csv FILE`...;
    `what` names the option in the refusal), resolved, checked at the command's door before
    anything runs: a link on the way or at the name that someone else made is refused, and as
    root so is a directory to write it in that anyone but root or $SUDO_UID owns or can write
    (:func:`results_dir`'s rule); UnsafeResultsPath, exit 2, in one line. The file itself is
    then written with :func:`replace` (a fresh name renamed over it)."""
    p = Path(path)
    if p.name in ("", ".", ".."):
        raise UnsafeResultsPath(f"{what} {path}: not a file name; give the path of a file to write")
    real = _resolve(p)
    if real.is_dir():
        raise UnsafeResultsPath(f"{what} {path}: is a directory; give the path of a file to write")
    if os.geteuid() == 0:
        why = dir_problem(real.parent, shown=f"{what} {path}")
        if why:
            raise UnsafeResultsPath(why)
    return real


def write_parquet(table, path: os.PathLike | str, fsync: bool = False, **kw) -> None:
    """A pyarrow Table (or pandas DataFrame) as Parquet at `path`, whole or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    with replace(path, "wb", fsync=fsync) as f:
        pq.write_table(table, f, **kw)


def write_csv(df, path: os.PathLike | str, **kw) -> None:
    """A pandas DataFrame as CSV at `path` (to_csv's keywords), whole or not at all."""
    with replace(path, "w") as f:
        df.to_csv(f, **kw)


def save_figure(fig, path: os.PathLike | str, **kw) -> None:
    """A matplotlib figure at `path`; the format from its suffix unless `format` is given."""
    kw.setdefault("format", Path(path).suffix.lstrip(".") or "png")
    buf = io.BytesIO()
    fig.savefig(buf, **kw)
    write_bytes(path, buf.getvalue())
