"""What a campaign needs from a target, and the local one.

A target runs one plan at a time (the executor guarantees it) and answers four questions:
what it is (`facts`), whether a plan is valid there (`check`), the run itself (`run`, which
creates the run directory on this host and fills it like `targets.local.run_plan`), and the
kernel log since a run started (`kernel_log_since`, for post-mortems). It also makes the AOCS
data files on its own side (`aocs_data`), so plans name files where they run.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AgentError
from ..plan import Plan
from .agent import TargetFacts, check_plan, check_plans, find_agent, local_facts
from .aocs_data import duplicate, ensure_data
from .local import agents_writing, run_plan
from .lock import TargetBusy, local_lock_path, target_lock  # noqa: F401 (the lock's public names)

if TYPE_CHECKING:  # the outcome's models are built by the first run, not by `xtalk plan`
    from ..outcome import RunOutcome


class TargetUnreachable(AgentError):
    """The target did not answer (network, sshd, power): the run was not attempted there.
    On the command line it ends as one line and exit code 3, like other agent problems."""


class TargetOut(TargetUnreachable):
    """The target will not answer again in this campaign (a lab board that did not boot after
    its power cycle): its worker hands the run back and takes no other."""


class Target:
    """Interface of a target; `name` identifies it in the journal and the progress display."""

    name = "target"
    #: Whether `run` converts the run's job log to jobs.parquet before it returns. A campaign
    #: turns it off and converts its runs after the last one (the conversion is not needed
    #: between two runs: a run's jobs.bin is readable as it is, and every reader of the store
    #: converts what is left).
    convert_after_run = True
    #: User-listed settings files (under /sys or /proc) snapshot before and after every run,
    #: besides the defaults of targets/settings.py; a declared-settings file adds its own.
    watch: tuple[str, ...] = ()

    def facts(self) -> TargetFacts:
        raise NotImplementedError

    def check(self, plan_json: str) -> None:
        raise NotImplementedError

    def check_many(self, plans_json: list[str]) -> None:
        """`check` every plan; the first refusal raises."""
        for p in plans_json:
            self.check(p)

    def run(self, plan: Plan, run_dir: Path) -> RunOutcome:
        raise NotImplementedError

    def kernel_log_since(self, monotonic_s: float) -> list[str]:
        return []

    def aocs_data(self, directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
        """The (input, expected) AOCS files in `directory` on this target (or their copy
        tagged `copy`), made there by the target's agent when absent; their paths there."""
        raise NotImplementedError

    def clock(self) -> float:
        """The target's CLOCK_MONOTONIC in seconds (the kernel log's time base)."""
        return time.monotonic()

    def describe(self) -> str:
        return self.name


class LocalTarget(Target):
    """This machine, through the agent found by `find_agent`."""

    def __init__(self, agent: Path | None = None, name: str = "local"):
        self.agent = Path(agent) if agent else find_agent()
        self.name = name
        self._current: Path | None = None

    def facts(self) -> TargetFacts:
        return local_facts(self.agent)

    def check(self, plan_json: str) -> None:
        check_plan(plan_json, self.agent)

    def check_many(self, plans_json: list[str]) -> None:
        check_plans(plans_json, self.agent)

    def run(self, plan: Plan, run_dir: Path) -> RunOutcome:
        self._current = Path(run_dir)
        try:
            return run_plan(plan, run_dir, self.agent, convert=self.convert_after_run,  # holds the machine-wide lock
                            watch=self.watch)
        finally:
            self._current = None

    def aocs_data(self, directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
        inp, expected = ensure_data(Path(directory), seed, self.agent, field)
        if copy:
            d = duplicate(str(inp), str(expected), copy)
            return d["input"], d["expected"]
        return str(inp), str(expected)

    def interrupt(self) -> None:
        """Stop the run in progress (from another thread): SIGTERM to its agent, which tears
        the run down and records it as interrupted; `run` then returns."""
        current = self._current
        if current is not None:
            for pid in agents_writing(current):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def kernel_log_since(self, monotonic_s: float) -> list[str]:
        return read_kmsg_since(monotonic_s)


def read_kmsg_since(monotonic_s: float, limit: int = 2000) -> list[str]:
    """Kernel log records stamped at or after `monotonic_s` (CLOCK_MONOTONIC seconds), as
    `[seconds] message`; a single line saying why when /dev/kmsg cannot be read."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return [f"(kernel log not readable: /dev/kmsg: {e.strerror})"]
    out: list[str] = []
    try:
        while True:
            try:
                rec = os.read(fd, 16384)  # /dev/kmsg returns exactly one record per read
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == 32:  # EPIPE: records were overwritten while reading; go on
                    continue
                out.append(f"(kernel log read stopped: {e.strerror})")
                break
            if not rec:
                break
            head, _, msg = rec.decode(errors="replace").partition(";")
            fields = head.split(",")
            try:
                usec = int(fields[2])
            except (IndexError, ValueError):
                continue
            if usec / 1e6 >= monotonic_s:
                out.append(f"[{usec / 1e6:12.6f}] {msg.splitlines()[0] if msg else ''}")
    finally:
        os.close(fd)
    return out[-limit:]
