"""The programs the tests run, accounted for. Each program the test process starts is one of:
installed by tests/peers.sh (when missing, as root with apt-get), part of Debian's required
base system, a prerequisite of the build (README: cc, cargo), the project's own (the agent,
this Python, anything under the checkout or a temporary directory), or looked up first
(`need_program` here, or `shutil.which`) by a test that skips with the reason where it is
missing. An audit hook records every program started (subprocess, os.exec*, posix_spawn); at
the end of the session the list is printed and a program that is none of these fails it.

Seen: the programs the test process starts itself. Not seen: those a script it runs starts
(`sh board/board.sh` → qemu) or the agent's command victims; their tests look them up too."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PEERS_SH = ROOT / "tests" / "peers.sh"
#: Debian's essential and required packages (coreutils, dash, util-linux, mount, passwd, apt)
#: and the build's prerequisites (README): present wherever `make test` runs.
BASE = {"sh", "bash", "env", "true", "false", "sleep", "cat", "cp", "mv", "rm", "ln", "ls", "mkdir", "kill",
        "timeout", "nice", "id", "uname", "nproc", "getconf", "ldconfig", "chrt", "taskset", "setpriv", "unshare", "prlimit", "runuser", "nsenter",
        "mount", "umount", "useradd", "userdel", "groupadd", "groupdel", "apt-get", "dpkg",
        "cc", "gcc", "ld", "objdump", "cargo", "make", "git",
        "file"}  # (platform and ctypes.util run uname, ldconfig, ld; platform.architecture runs file where it exists)

_started: dict[str, str] = {}   # program -> the first test that started it
_looked_up: set[str] = set()


def peers() -> set[str]:
    """The programs tests/peers.sh installs: those it checks with `have NAME`."""
    return set(re.findall(r"\bhave\s+([\w.+-]+)", PEERS_SH.read_text()))


def need_program(name: str, why: str = "") -> str:
    """The path of program `name`, or skip the test saying it is missing (and what installs it)."""
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)
    if path is None:
        pytest.skip(f"{name} is not installed{': ' + why if why else ''}")
    return path


def _which(name, *args, **kw):
    _looked_up.add(os.path.basename(str(name)))
    return _real_which(name, *args, **kw)


def _own(path: str) -> bool:
    if not os.path.isabs(path):
        return False
    p = os.path.realpath(path)
    return any(p.startswith(os.path.realpath(d) + os.sep)
               for d in (ROOT, sys.prefix, sys.base_prefix, tempfile.gettempdir(), "/dev/shm"))


def _audit(event: str, args) -> None:
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        if isinstance(argv, (str, bytes)):  # shell=True: the shell's first word
            argv = shlex.split(os.fsdecode(argv))[:1] or ["sh"]
        program = os.fsdecode(executable or (argv[0] if argv else ""))
    elif event in ("os.exec", "os.posix_spawn"):
        program = os.fsdecode(args[0])
    else:
        return
    if program and not _own(program):
        _started.setdefault(os.path.basename(program), os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0])


def unaccounted(started: dict[str, str] | None = None, looked_up: set[str] | None = None) -> dict[str, str]:
    """{program: first test} for the programs started (this session's by default) that are
    none of the allowed kinds."""
    started = _started if started is None else started
    allowed = peers() | BASE | (_looked_up if looked_up is None else looked_up)
    return {p: t for p, t in started.items() if p not in allowed}


_real_which = shutil.which
shutil.which = _which
sys.addaudithook(_audit)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _started:
        terminalreporter.write_line("programs the tests started: " + ", ".join(sorted(_started)) +
                                    " (tests/programs.py: peers.sh, base, or looked up first)")
    for p, test in sorted(unaccounted().items()):
        terminalreporter.write_line(f"program {p!r} (first run by {test}) is not installed by tests/peers.sh, not in "
                                    "tests/programs.py's BASE, and no test looked it up: make peers.sh install it or "
                                    "have the test call need_program()", red=True)


def pytest_sessionfinish(session, exitstatus):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:  # a pytest-xdist worker: its list goes to the controller, which judges
        out["programs"] = {"started": dict(_started), "looked_up": sorted(_looked_up)}
        return
    if unaccounted() and session.exitstatus == 0:
        session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: each worker's programs join this process's lists, so the
    summary and the check above cover the tests every worker ran."""
    out = getattr(node, "workeroutput", {}).get("programs") or {}
    for program, test in out.get("started", {}).items():
        _started.setdefault(program, test)
    _looked_up.update(out.get("looked_up", ()))
