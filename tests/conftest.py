"""Shared fixtures: the agent, small plans and experiments, and leftover checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from xtalk.targets.agent import find_agent, local_facts

ROOT = Path(__file__).resolve().parents[1]
# Every process the tests start inherits this token, so leftover checks see only our own
# processes and not those of another xtalk running on the machine.
TOKEN = f"xtalk-test-{uuid.uuid4()}"
os.environ["XTALK_TEST_TOKEN"] = TOKEN
XTALK = [sys.executable, "-m", "xtalk.cli"]


@pytest.fixture(scope="session")
def agent() -> Path:
    return find_agent()


@pytest.fixture(scope="session")
def facts(agent):
    return local_facts(agent)


@pytest.fixture(scope="session")
def last_cpu(facts) -> int:
    return facts.online_cpus[-1]


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (real-time policies, mlock)")
needs_two_cpus = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs (victim and enemy apart)")


def small_plan(run_id: str = "t", jobs: int = 50, period_ns: int = 2_000_000, enemies: list | None = None,
               cpus: list[int] | None = None, **victim) -> dict:
    """A short plan as a dict: a sum victim over 256 KiB."""
    v = {"body": {"kind": "sum", "bytes": 262144}, "period_ns": period_ns, "jobs": jobs, "warmup_jobs": 2,
         "placement": {"cpus": cpus}}
    v.update(victim)
    return {"version": 1, "run_id": run_id, "timeout_s": 30, "settle_ms": 20, "victim": v,
            "enemies": enemies or [], "labels": {"scenario": "solo"}}


def write_plan(tmp: Path, plan: dict, name: str = "plan.json") -> Path:
    p = tmp / name
    p.write_text(json.dumps(plan))
    return p


def xtalk(*args, cwd=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    """Run the xtalk command line in a subprocess."""
    return subprocess.run([*XTALK, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, **kw)


def processes_named(prefixes=("xt-victim", "xt-enemy", "xtalk-agent")) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose name starts with one of `prefixes`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if state != "Z" and comm.startswith(prefixes) and _ours(d):
            out.append((int(d.name), comm))
    return out


def _ours(proc: Path) -> bool:
    try:
        return TOKEN.encode() in (proc / "environ").read_bytes()
    except OSError:
        return False


def wait_for(pred, timeout: float = 10.0, step: float = 0.02):
    """Poll `pred` until it returns something truthy; return it (or None on time-out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d.name))
    return out


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
