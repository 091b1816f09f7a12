"""What this machine lets a test do, found by trying it, never assumed.

Each probe tries the capability for real (a scheduling policy in a throwaway child process, a
cgroup created and removed at once, ...) and returns '' when it works or one line saying why
not; the fixtures in conftest.py turn that line into the skip reason. A container, a
cgroup-v2-only machine or a cgroup without real-time runtime then skips what it cannot do, with
the reason, instead of failing. Results are cached: the machine does not change mid-session.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

CHRT = shutil.which("chrt")
#: chrt's spelling of each policy and the arguments that make a valid request for it.
_POLICY_ARGS = {
    "fifo": ["-f", "1"],
    "rr": ["-r", "1"],
    # 1 ms every 100 ms: far below any admission limit, so only a refusal of the policy fails.
    "deadline": ["-d", "--sched-runtime", "1000000", "--sched-deadline", "100000000",
                 "--sched-period", "100000000", "0"],
}


def mounts(fstype: str) -> list[tuple[str, set[str]]]:
    """(mount point, options) of every mount of `fstype` this process sees."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == fstype:
            out.append((f[1], set(f[3].split(","))))
    return out


def is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def policy(name: str) -> str:
    """'' when a child of this process can take policy `name` (fifo, rr, deadline)."""
    if not is_root():
        return f"needs root for SCHED_{name.upper()}"
    if CHRT is None:
        return f"needs chrt (util-linux) to probe SCHED_{name.upper()}"
    p = subprocess.run([CHRT, *_POLICY_ARGS[name], "true"], capture_output=True, text=True)
    if p.returncode != 0:
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        return f"SCHED_{name.upper()} is refused here ({why}); a cgroup without real-time runtime, like a container's"
    return ""


def _try_child(parent: Path) -> str:
    """'' when a child cgroup can be made (and is removed at once) under `parent`."""
    probe = parent / f"xtalk-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as e:
        return f"cannot create a cgroup under {parent}: {e.strerror}"
    try:
        probe.rmdir()
    except OSError:
        pass
    return ""


@functools.cache
def cgroup_v1(controller: str) -> str:
    """'' when a v1 hierarchy with `controller` is mounted and writable by us."""
    for mnt, opts in mounts("cgroup"):
        if controller in opts:
            return _try_child(Path(mnt)) if is_root() else "needs root to create cgroups"
    return f"needs the cgroup v1 {controller} controller (none mounted here: a cgroup-v2-only machine)"


@functools.cache
def rt_group() -> str:
    """'' with RT group scheduling: a v1 cpu hierarchy with cpu.rt_runtime_us."""
    why = cgroup_v1("cpu")
    if why:
        return f"needs RT group scheduling: {why}"
    mnt = next(m for m, o in mounts("cgroup") if "cpu" in o)
    if not Path(mnt, "cpu.rt_runtime_us").exists():
        return "needs RT group scheduling (kernel without CONFIG_RT_GROUP_SCHED)"
    return ""


@functools.cache
def cgroup_v2(*controllers: str) -> str:
    """'' when a cgroup2 hierarchy is mounted, offers `controllers` and takes a child group."""
    found = mounts("cgroup2")
    if not found:
        return "needs a cgroup v2 hierarchy (none mounted here)"
    root = Path(found[0][0])
    offered = set((root / "cgroup.controllers").read_text().split()) if (root / "cgroup.controllers").exists() else set()
    missing = [c for c in controllers if c not in offered]
    if missing:
        return f"needs the cgroup v2 controller(s) {', '.join(missing)} at {root} (offered: {' '.join(sorted(offered)) or 'none'})"
    return _try_child(root) if is_root() else "needs root to create cgroups"


@functools.cache
def tracefs() -> str:
    """'' when tracefs is mounted or the kernel has it and we may mount it (the agent does)."""
    if not is_root():
        return "needs root for tracefs"
    if any(Path(m, "instances").is_dir() for m, _ in mounts("tracefs")):
        return ""
    has = "tracefs" in Path("/proc/filesystems").read_text()
    if has and Path("/sys/kernel/tracing").is_dir():
        return ""
    return "needs tracefs (not mounted and not mountable at /sys/kernel/tracing here)"


@functools.cache
def pmu() -> str:
    """'' when the CPU has a hardware PMU the kernel exposes (perf's `cpu` event source)."""
    devs = Path("/sys/bus/event_source/devices")
    if any((devs / n).exists() for n in ("cpu", "cpu_core", "armv8_pmuv3", "armv8_pmuv3_0")):
        return ""
    return "needs a hardware PMU (none exposed here: a VM without a virtual PMU?)"


@functools.cache
def tool(name: str) -> str:
    """'' when program `name` is on PATH."""
    return "" if shutil.which(name) or Path("/usr/sbin", name).exists() else \
        f"needs {name} (make test installs it as root from Debian's packages: tests/peers.sh)"
