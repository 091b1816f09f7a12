"""What xtalk leaves on a machine, listed so the end of a test session can say the machine is
as it was found: processes this session started, cgroups, tracefs instances (and a tracefs
mount xtalk made), /dev/shm and /run/xtalk entries, and this process's own policy and affinity.

Others use the machine at the same time (other xtalk runs among them), so only what xtalk
creates is compared, and the snapshots are taken while holding the machine-wide target lock:
no agent runs then, so whatever is there belongs to nobody's live run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import capabilities

#: The lock file and the directory of trusted state are xtalk's own furniture, not leftovers.
RUN_KEEP = {"target.lock", "countable.json",  # the agent's cache of what the PMU counts (observe/capabilities.rs)
            "tracefs.lock", "tracefs.users"}  # the agents' agreement on mounting tracefs (observe/tracefs.rs)


def _cgroups() -> set[str]:
    """xtalk* directories in every cgroup hierarchy, three levels deep (xtalk's nesting)."""
    out = set()
    roots = [m for m, _ in capabilities.mounts("cgroup")] + [m for m, _ in capabilities.mounts("cgroup2")]
    for root in roots:
        for dirpath, dirnames, _ in os.walk(root):
            depth = dirpath[len(root):].count("/")
            for d in dirnames:
                if d.startswith("xtalk"):
                    out.add(f"cgroup {dirpath}/{d}")
            if depth >= 2:
                dirnames[:] = []
    return out


def _tracefs() -> set[str]:
    out = set()
    for m, _ in capabilities.mounts("tracefs"):
        out.add(f"tracefs mounted at {m}")
        inst = Path(m, "instances")
        if inst.is_dir():
            out |= {f"tracefs instance {inst}/{n}" for n in os.listdir(inst) if n.startswith("xtalk")}
    return out


def _files() -> set[str]:
    out = set()
    if os.path.isdir("/dev/shm"):
        out |= {f"/dev/shm/{n}" for n in os.listdir("/dev/shm") if n.startswith("xtalk")}
    if os.path.isdir("/run/xtalk"):
        out |= {f"/run/xtalk/{n}" for n in os.listdir("/run/xtalk") if n not in RUN_KEEP}
    return out


def _processes(token: str) -> set[str]:
    """Live processes that carry this session's token (so: started by this session)."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if token.encode() not in (d / "environ").read_bytes():
                continue
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] == "Z" or _helper_of_this_process(d, stat):
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        policy = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}.get(_policy(int(d.name)), "?")
        out.add(f"process {d.name} ({comm}, policy {policy})")
    return out


def _helper_of_this_process(d: Path, stat: str) -> bool:
    """multiprocessing's resource tracker (or forkserver), started by a library in the test
    process (Dask's client) and living exactly as long as it: not something a test left."""
    ppid = int(stat[stat.rindex(")") + 2:].split()[1])
    try:
        cmd = (d / "cmdline").read_bytes()
    except OSError:
        return False
    return ppid == os.getpid() and (b"multiprocessing.resource_tracker" in cmd or b"multiprocessing.forkserver" in cmd)


def _policy(pid: int) -> int:
    try:
        return os.sched_getscheduler(pid)
    except OSError:
        return -1


def _self() -> set[str]:
    """The test process's own scheduling state: a test must give back what it changed."""
    return {f"pytest's policy {_policy(0)}", f"pytest's affinity {sorted(os.sched_getaffinity(0))}",
            f"pytest's nice {os.getpriority(os.PRIO_PROCESS, 0)}"}


def _owner_alive(entry: str) -> bool:
    """True for an entry named after a live process (xtalk-<pid>, journal-p<pid>...): another
    user's run in progress, not a leftover. Ours are dead by the end of the session."""
    m = re.fullmatch(r"(?:xtalk-|journal-p?)(\d+)(?:\.jsonl)?", entry.rsplit("/", 1)[-1])
    return bool(m) and Path(f"/proc/{m.group(1)}").exists()


def snapshot(token: str, locked: bool = True) -> set[str]:
    """Everything xtalk-made on the machine now, one line per thing. Without the machine lock
    (`locked` False) others' runs may be live: what they own, and tracefs's mount, is left out."""
    things = _cgroups() | _tracefs() | _files()
    if not locked:
        things = {t for t in things if not _owner_alive(t) and not t.startswith("tracefs mounted")}
    return things | _processes(token) | _self()
