"""Finding the agent binary and asking it about the target."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import AgentError, UsageError

AGENT_NAME = "xtalk-agent"
#: A machine fixture (the JSON of `xtalk-agent sysinfo`) to plan and check against instead of
#: this machine. The agent reads it too (it inherits the environment), so facts, checks and
#: the pre-flight all describe the fixture's machine; `run` refuses it.
MACHINE_ENV = "XTALK_MACHINE"


def find_agent() -> Path:
    """The agent: $XTALK_AGENT, the checkout's release build (running from a checkout,
    where `make` keeps it current), beside this Python (pip install), or on PATH."""
    env = os.environ.get("XTALK_AGENT")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise AgentError(f"XTALK_AGENT={env} is not an executable file; unset it or point it at xtalk-agent")
        return p
    checkout = Path(__file__).resolve().parents[3]
    candidates = [checkout / "agent" / "target" / "release" / AGENT_NAME, Path(sys.executable).parent / AGENT_NAME]
    found = shutil.which(AGENT_NAME)
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise AgentError("xtalk-agent not found; run `make setup` (or `pip install .`), or set XTALK_AGENT")


def find_agent_for(arch: str) -> Path | None:
    """An agent built for another machine's architecture (``uname -m`` there, e.g. aarch64):
    $XTALK_AGENT_<ARCH>, else the checkout's static cross build (`make agent-aarch64`:
    agent/target/ARCH-unknown-linux-musl/release); None when neither is there."""
    env = os.environ.get(f"XTALK_AGENT_{arch.upper()}")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise AgentError(f"XTALK_AGENT_{arch.upper()}={env} is not an executable file; unset it or point it at "
                             f"an xtalk-agent built for {arch}")
        return p
    checkout = Path(__file__).resolve().parents[3]
    c = checkout / "agent" / "target" / f"{arch}-unknown-linux-musl" / "release" / AGENT_NAME
    return c if c.is_file() and os.access(c, os.X_OK) else None


@dataclass(frozen=True)
class TargetFacts:
    """What the host needs to know about the target to resolve an experiment."""

    online_cpus: list[int]
    caches: dict[str, int]  # "l1d", "l2", "llc" -> bytes
    environment: dict


def _caches(env: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    levels = [c for c in env["cpu"]["caches"] if c.get("size_bytes")]
    for c in levels:
        if c["level"] == 1 and c["type"] in ("Data", "Unified"):
            out["l1d"] = c["size_bytes"]
        elif c["level"] == 2 and c["type"] in ("Unified", "Data"):
            out["l2"] = c["size_bytes"]
    unified = [c for c in levels if c["type"] == "Unified"]
    if unified:
        out["llc"] = max(unified, key=lambda c: c["level"])["size_bytes"]
    return out


def _cpu_list(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        if part:
            a, _, b = part.partition("-")
            cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


def machine_fixture() -> Path | None:
    """The machine fixture named by $XTALK_MACHINE, if any."""
    v = os.environ.get(MACHINE_ENV)
    return Path(v) if v else None


def use_machine(path: Path | None) -> None:
    """Plan and check against the machine fixture `path` from now on (this process and the
    agents it starts); None leaves the choice to $XTALK_MACHINE."""
    if path is None:
        return
    if not path.is_file():
        raise UsageError(f"--machine: {path} is not a file; give a machine fixture (`xtalk sysinfo --record FILE` writes one)")
    os.environ[MACHINE_ENV] = str(path.resolve())


def refuse_fixture(what: str) -> None:
    """A fixture describes a machine one does not have: nothing can run on it (exit 2)."""
    f = machine_fixture()
    if f is not None:
        raise UsageError(f"{what}: {MACHINE_ENV}={f} is a machine fixture, for planning only; unset it to {what} on this machine")


def local_facts(agent: Path | None = None) -> TargetFacts:
    """Ask the local agent for the machine's environment (the fixture's, with $XTALK_MACHINE)."""
    return _facts(agent or find_agent(), os.environ.get(MACHINE_ENV, ""))


@lru_cache(maxsize=None)
def _facts(agent: Path, fixture: str) -> TargetFacts:
    out = subprocess.run([str(agent), "sysinfo"], capture_output=True, text=True)
    if out.returncode == 2 and fixture:
        raise UsageError(out.stderr.strip().removeprefix("xtalk-agent: "))
    if out.returncode != 0:
        raise AgentError(f"{agent} sysinfo failed: {out.stderr.strip()}")
    env = json.loads(out.stdout)
    return TargetFacts(_cpu_list(env["cpu"]["online"]), _caches(env), env)


def recover(agent: Path | None = None) -> list[str]:
    """Undo what dead runs left on this machine (the agents' journals); what was restored."""
    agent = agent or find_agent()
    out = subprocess.run([str(agent), "recover"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


class PlanRefused(UsageError):
    """The agent's refusal of a plan (its one line is the message): `index`, the plan's place
    among those checked; `field` and `reason`, what it refused and the fix; `machine`, the
    plan is valid but this machine refuses what the field asks (a scheduling policy tried for
    real, the cgroups a run makes), so another configuration may run where this one cannot."""

    def __init__(self, line: str, index: int | None = None, field: str = "", reason: str = "", machine: bool = False):
        super().__init__(line)
        self.index, self.field, self.reason, self.machine = index, field, reason, machine


def _refusal(out: subprocess.CompletedProcess) -> PlanRefused:
    """The agent's refusal: its stderr line, and the JSON line its `check` prints on stdout."""
    line = out.stderr.strip().removeprefix("xtalk-agent: ")
    try:
        d = json.loads(out.stdout.strip().splitlines()[-1])
        return PlanRefused(line, int(d["plan"]), str(d["field"]), str(d["message"]), d.get("machine") is True)
    except (IndexError, ValueError, KeyError, TypeError):  # an older agent: the line alone
        return PlanRefused(line)


def check_plan(plan_json: str, agent: Path | None = None) -> None:
    """Have the agent validate a plan against the machine; PlanRefused with its one line."""
    agent = agent or find_agent()
    out = subprocess.run([str(agent), "check", "-"], input=plan_json, capture_output=True, text=True)
    if out.returncode == 2:
        raise _refusal(out)
    if out.returncode != 0:
        raise AgentError(f"agent check failed: {out.stderr.strip()}")


def check_plans(plans_json: list[str], agent: Path | None = None) -> None:
    """`check_plan` for many plans in one agent process (a JSON array): the first refusal
    is the PlanRefused, its `index` the refused plan's place in `plans_json`. A campaign's
    thousands of plans take a second, not minutes."""
    if plans_json:
        check_plan("[" + ",".join(plans_json) + "]", agent)
