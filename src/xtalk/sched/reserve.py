"""SCHED_DEADLINE reservations for existing threads (seed 001 ch. 3: a VM's vCPU threads as a
partition with budget Θ every period Π).

Each thread gets runtime Θ, deadline = period = Π (the periodic resource (Θ, Π) of
``xtalk sched vm``), and gets its previous policy back afterwards: the machine is left as
found. Python has no sched_setattr(2), so the system calls go through ctypes' ``syscall``.

    with reserved([tid, ...], budget_ns, period_ns) as record:
        ...                       # the threads run under the reservation here

Bad input (Θ ≤ 0, Θ > Π, a thread that is gone, a reservation the kernel refuses) raises
:class:`~xtalk.sched.inputs.InputError` before anything is left changed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Iterator

from xtalk.sched.inputs import InputError

SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_BATCH, SCHED_IDLE, SCHED_DEADLINE = 0, 1, 2, 3, 5, 6
POLICY_NAMES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}
SCHED_FLAG_RESET_ON_FORK = 0x01
# The kernel refuses DEADLINE parameters under 2^DL_SCALE ns (kernel/sched/deadline.c).
MIN_NS = 1 << 10
# (sched_setattr, sched_getattr) per machine: the numbers differ between architectures.
SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}


class SchedAttr(ctypes.Structure):
    """struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes: no utilisation clamps)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
    ]


@dataclass(frozen=True)
class Policy:
    """One thread's scheduling parameters, as sched_getattr(2) gives them."""

    policy: int
    flags: int = 0
    nice: int = 0
    priority: int = 0
    runtime_ns: int = 0
    deadline_ns: int = 0
    period_ns: int = 0

    @property
    def name(self) -> str:
        return POLICY_NAMES.get(self.policy, str(self.policy))

    def describe(self) -> str:
        if self.policy == SCHED_DEADLINE:
            return f"deadline runtime {self.runtime_ns} ns, deadline {self.deadline_ns} ns, period {self.period_ns} ns"
        if self.policy in (SCHED_FIFO, SCHED_RR):
            return f"{self.name} priority {self.priority}"
        return f"{self.name} nice {self.nice}"


def check_reservation(budget_ns: int, period_ns: int) -> None:
    """Refuse a reservation the kernel could not take or that means nothing (pure)."""
    if budget_ns <= 0:
        raise InputError("budget", f"Θ = {budget_ns} ns is not positive", "give a budget > 0")
    if period_ns <= 0:
        raise InputError("period", f"Π = {period_ns} ns is not positive", "give a period > 0")
    if budget_ns > period_ns:
        raise InputError("budget", f"Θ = {budget_ns} ns exceeds Π = {period_ns} ns", "use budget <= period")
    if budget_ns < MIN_NS:
        raise InputError("budget", f"Θ = {budget_ns} ns is under the kernel's minimum {MIN_NS} ns", f"use budget >= {MIN_NS} ns")


def check_tids(tids: list[int]) -> list[int]:
    """Thread ids as given, refused when empty, not positive or repeated (pure)."""
    if not tids:
        raise InputError("threads", "no thread to reserve for", "give thread ids (--tid) or a QMP socket (--qmp)")
    bad = [t for t in tids if t <= 0]
    if bad:
        raise InputError("threads", f"thread id {bad[0]} is not positive", "give the ids of running threads")
    if len(set(tids)) != len(tids):
        raise InputError("threads", "a thread id appears twice", "give each thread once")
    return list(tids)


def _syscalls() -> tuple[int, int]:
    machine = platform.machine()
    if machine not in SYSCALLS:
        raise InputError("machine", f"no sched_setattr number known for {machine}", "run on x86_64 or aarch64")
    return SYSCALLS[machine]


_libc = ctypes.CDLL(None, use_errno=True)


def get_policy(tid: int) -> Policy:
    """sched_getattr(2) of thread ``tid``; InputError when it is gone."""
    attr = SchedAttr()
    if _libc.syscall(_syscalls()[1], tid, ctypes.byref(attr), ctypes.sizeof(SchedAttr), 0) != 0:
        err = ctypes.get_errno()
        if err == errno.ESRCH:
            raise InputError("threads", f"thread {tid} is gone (no such thread)", "give the ids of running threads")
        raise InputError("threads", f"sched_getattr of thread {tid}: {os.strerror(err)}")
    return Policy(attr.sched_policy, attr.sched_flags, attr.sched_nice, attr.sched_priority,
                  attr.sched_runtime, attr.sched_deadline, attr.sched_period)


def set_policy(tid: int, p: Policy) -> None:
    """sched_setattr(2) of thread ``tid``; InputError naming the likely cause when refused."""
    attr = SchedAttr(ctypes.sizeof(SchedAttr), p.policy, p.flags, p.nice, p.priority, p.runtime_ns, p.deadline_ns, p.period_ns)
    if _libc.syscall(_syscalls()[0], tid, ctypes.byref(attr), 0) == 0:
        return
    err = ctypes.get_errno()
    why = {
        errno.ESRCH: ("is gone (no such thread)", "give the ids of running threads"),
        errno.EPERM: ("not permitted", "run as root, with the thread's affinity spanning its root domain"),
        errno.EBUSY: ("refused by DEADLINE admission control (bandwidth full)", "use a smaller Θ/Π or fewer threads"),
        errno.EINVAL: ("invalid parameters for this kernel", "check Θ ≤ Π and the kernel's SCHED_DEADLINE support"),
    }.get(err, (os.strerror(err), ""))
    raise InputError("threads", f"sched_setattr({p.describe()}) of thread {tid}: {why[0]}", why[1])


def deadline(budget_ns: int, period_ns: int) -> Policy:
    """The reservation (Θ, Π): runtime Θ, deadline = period = Π."""
    return Policy(SCHED_DEADLINE, 0, 0, 0, budget_ns, period_ns, period_ns)


def restorable(p: Policy) -> Policy:
    """``p`` as sched_setattr takes it back: only the reset-on-fork flag is kept (the others
    are per-call or need a larger struct). For the other policies the runtime is given as 0:
    sched_getattr reports the fair scheduler's slice there, and a non-zero runtime would mark
    the slice as the thread's own (EEVDF's custom slice), which it was not (qemu sets none)."""
    if p.policy == SCHED_DEADLINE:
        return Policy(p.policy, p.flags & SCHED_FLAG_RESET_ON_FORK, 0, 0, p.runtime_ns, p.deadline_ns, p.period_ns)
    return Policy(p.policy, p.flags & SCHED_FLAG_RESET_ON_FORK, p.nice, p.priority, 0, 0, 0)


def same_policy(a: Policy, b: Policy) -> bool:
    """Whether ``b`` is ``a`` again as far as a restore sets it (policy, nice, priority; the
    DEADLINE parameters for a DEADLINE thread; not the fair slice the kernel reports)."""
    if a.policy != b.policy or a.nice != b.nice or a.priority != b.priority:
        return False
    return a.policy != SCHED_DEADLINE or (a.runtime_ns, a.deadline_ns, a.period_ns) == (b.runtime_ns, b.deadline_ns, b.period_ns)


@contextmanager
def reserved(tids: list[int], budget_ns: int, period_ns: int) -> Iterator[dict]:
    """Hold a DEADLINE reservation (Θ, Π) on every thread of ``tids``, then restore each.

    Yields the record (per thread: ``before``, ``during`` as read back after setting); on exit
    adds ``end`` (read back just before restoring: it held throughout) and ``after``. A thread
    that ended meanwhile is recorded as gone, not an error. If setting one fails, those already
    set are restored before the error is raised."""
    check_reservation(budget_ns, period_ns)
    tids = check_tids(tids)
    record = {"budget_ns": budget_ns, "period_ns": period_ns, "threads": {}}
    before = {tid: get_policy(tid) for tid in tids}  # every thread exists before any is changed
    done: list[int] = []
    try:
        for tid in tids:
            record["threads"][str(tid)] = {"before": asdict(before[tid])}
            set_policy(tid, deadline(budget_ns, period_ns))
            done.append(tid)
            record["threads"][str(tid)]["during"] = asdict(get_policy(tid))
        yield record
    finally:
        errors = []
        for tid in done:
            entry = record["threads"][str(tid)]
            try:
                entry["end"] = asdict(get_policy(tid))
                set_policy(tid, restorable(before[tid]))
                entry["after"] = asdict(get_policy(tid))
            except InputError as exc:
                if "is gone" in str(exc):
                    entry["after"] = "gone"
                else:
                    errors.append(str(exc))
        if errors:
            raise InputError("threads", "could not restore: " + "; ".join(errors))
