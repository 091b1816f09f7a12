"""A remote Linux target over SSH, with the system's `ssh` client (no Python dependency).

    ssh://[user@]host[:port][?identity=KEY&known_hosts=FILE&agent=PATH&cache=DIR&name=NAME]

The agent is found on the target (`agent=`, else a copy cached under `cache`, else
`xtalk-agent` on its PATH); when none is there and the target's architecture matches this
host's, the local binary is copied into the cache (content-addressed, so an updated agent is
copied again). Each run sends its plan on stdin, runs the agent with `--exit-with-parent`
(a dropped connection ends the run on the target), then streams the output directory back
as a tar archive and removes it on the target. ssh's exit code 255 (no connection) becomes
TargetUnreachable: the campaign requeues the run and fails over to other targets.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import tarfile
import threading
import urllib.parse
from functools import cached_property
from pathlib import Path

from ..errors import AgentError, UsageError
from ..plan import Plan
from ..store import read_run_json
from ..store.jobs import convert_run
from .agent import TargetFacts, _caches, _cpu_list, find_agent
from .base import Target, TargetUnreachable
from .local import _write_failed

CONNECT_TIMEOUT_S = 10


class SshTarget(Target):
    """One remote board; the executor never gives it two runs at once."""

    def __init__(self, host: str, user: str | None = None, port: int = 22, identity: str | None = None,
                 known_hosts: str | None = None, agent: str | None = None, cache: str = "~/.cache/xtalk",
                 name: str | None = None):
        self.host, self.user, self.port = host, user, int(port)
        self.identity, self.known_hosts, self.agent_path, self.cache = identity, known_hosts, agent, cache
        self.name = name or f"{user + '@' if user else ''}{host}:{port}"
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._run_start: float | None = None

    @classmethod
    def from_url(cls, url: str) -> "SshTarget":
        u = urllib.parse.urlsplit(url)
        if u.scheme != "ssh" or not u.hostname:
            raise UsageError(f"--target {url!r}: write ssh://[user@]host[:port]")
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query).items()}
        unknown = set(q) - {"identity", "known_hosts", "agent", "cache", "name"}
        if unknown:
            raise UsageError(f"--target {url!r}: unknown option {sorted(unknown)[0]!r}; "
                             "use identity, known_hosts, agent, cache or name")
        return cls(u.hostname, u.username, u.port or 22, **q)

    # -- ssh plumbing ------------------------------------------------------------------------
    def _ssh(self, command: str) -> list[str]:
        cmd = ["ssh", "-p", str(self.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
        if self.identity:
            cmd += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            cmd += ["-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        return cmd + [f"{self.user}@{self.host}" if self.user else self.host, command]

    def _call(self, command: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            out = subprocess.run(self._ssh(command), input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TargetUnreachable(f"{self.name}: no answer in {timeout:.0f} s") from None
        if out.returncode == 255:
            lines = out.stderr.decode(errors="replace").strip().splitlines()
            raise TargetUnreachable(f"{self.name}: {lines[-1] if lines else 'ssh failed'}")
        return out

    # -- the agent on the target ---------------------------------------------------------------
    @cached_property
    def agent(self) -> str:
        """Path of the agent on the target (copied there when needed)."""
        if self.agent_path:
            if self._call(f"test -x {shlex.quote(self.agent_path)}").returncode != 0:
                raise AgentError(f"{self.name}: agent={self.agent_path} is not an executable file there")
            return self.agent_path
        local = find_agent()
        digest = hashlib.sha256(local.read_bytes()).hexdigest()[:16]
        cache = self.cache.replace("~", "$HOME", 1) if self.cache.startswith("~") else shlex.quote(self.cache)
        remote = f"{cache}/xtalk-agent-{digest}"
        probe = self._call(f'uname -m; test -x "{remote}" && echo cached; command -v xtalk-agent || true')
        lines = probe.stdout.decode().split()
        arch = lines[0] if lines else "?"
        if "cached" in lines:
            return self._expand(remote)
        if arch == platform.machine():
            put = self._call(f'mkdir -p "{cache}" && cat > "{remote}.tmp" && chmod 755 "{remote}.tmp" && mv "{remote}.tmp" "{remote}"',
                             stdin=local.read_bytes(), timeout=300)
            if put.returncode != 0:
                raise AgentError(f"{self.name}: cannot copy the agent: {put.stderr.decode(errors='replace').strip()}")
            return self._expand(remote)
        found = [x for x in lines[1:] if x.startswith("/")]
        if found:
            return found[0]
        raise AgentError(f"{self.name}: no xtalk-agent there and its architecture ({arch}) differs from this host's "
                         f"({platform.machine()}); build the agent for {arch} and give ?agent=PATH")

    def _expand(self, path: str) -> str:
        return self._call(f'echo "{path}"').stdout.decode().strip()

    # -- the Target interface ---------------------------------------------------------------------
    @cached_property
    def _facts(self) -> TargetFacts:
        out = self._call(f"{shlex.quote(self.agent)} sysinfo")
        if out.returncode != 0:
            raise AgentError(f"{self.name}: agent sysinfo failed: {out.stderr.decode(errors='replace').strip()}")
        env = json.loads(out.stdout)
        return TargetFacts(_cpu_list(env["cpu"]["online"]), _caches(env), env)

    def facts(self) -> TargetFacts:
        return self._facts

    def check(self, plan_json: str) -> None:
        out = self._call(f"{shlex.quote(self.agent)} check -", stdin=plan_json.encode())
        err = out.stderr.decode(errors="replace").strip()
        if out.returncode == 2:
            raise UsageError(f"{self.name}: {err.removeprefix('xtalk-agent: ')}")
        if out.returncode != 0:
            raise AgentError(f"{self.name}: agent check failed: {err}")

    def run(self, plan: Plan, run_dir: Path) -> dict:
        """Run on the target; fill `run_dir` here like a local run (plan, run.json, jobs, log)."""
        run_dir = Path(run_dir)
        agent = shlex.quote(self.agent)
        run_dir.mkdir(parents=True, exist_ok=False)
        (run_dir / "plan.json").write_text(plan.to_json())
        # The shell prints the work directory and the kernel clock, then becomes the agent, so
        # the agent's parent is the ssh session: when the connection drops, the run ends.
        # The board's lock (fd 9, inherited by the agent) keeps runs of two campaigns apart.
        cache = self.cache.replace("~", "$HOME", 1) if self.cache.startswith("~") else shlex.quote(self.cache)
        script = (f'mkdir -p "{cache}" && exec 9>"{cache}/target.lock" && {{ ! command -v flock >/dev/null || flock 9; }} && '
                  'd=$(mktemp -d /tmp/xtalk-run.XXXXXX) && echo "$d" && cut -d" " -f1 /proc/uptime && '
                  f'cat > "$d/plan.json" && exec {agent} run "$d/plan.json" --out "$d/out" --exit-with-parent >"$d/agent.log" 2>&1')
        with self._lock:
            self._proc = subprocess.Popen(self._ssh(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        proc = self._proc
        try:
            out, err = proc.communicate(plan.to_json().encode())
        except BaseException:
            self.interrupt()
            proc.wait()
            raise
        finally:
            with self._lock:
                self._proc = None
        lines = out.decode(errors="replace").split()
        interrupted = proc.returncode < 0
        if proc.returncode == 255 and len(lines) < 2:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise TargetUnreachable(f"{self.name}: {err.decode(errors='replace').strip() or 'ssh failed'}")
        if len(lines) < 2:
            raise AgentError(f"{self.name}: the run did not start: {err.decode(errors='replace').strip()}")
        remote, self._run_start = lines[0], float(lines[1])
        try:
            self._fetch(remote, run_dir)
        except TargetUnreachable:
            if interrupted:
                return {"status": "interrupted", "reason": "interrupted; the target could not be reached to fetch"}
            raise
        meta = read_run_json(run_dir)
        if interrupted:
            return {**(meta or {}), "status": "interrupted"}
        if meta is None or meta.get("status") == "running":
            log = (run_dir / "agent.log").read_text(errors="replace").strip().splitlines() if (run_dir / "agent.log").exists() else []
            why = log[-1] if log else f"ssh exited with {proc.returncode}"
            meta = _write_failed(run_dir, plan, f"agent ended abnormally on {self.name} (exit {proc.returncode}): {why}", meta)
        convert_run(run_dir)
        return meta

    def _fetch(self, remote: str, run_dir: Path) -> None:
        """Stream the remote output directory and log back as one tar, then remove them there."""
        q = shlex.quote(remote)
        cmd = self._ssh(f"cd {q} && tar -cf - $(ls -d out agent.log 2>/dev/null); s=$?; rm -rf {q}; exit $s")
        landing = run_dir / ".fetch"
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            try:
                with tarfile.open(fileobj=p.stdout, mode="r|") as tar:
                    tar.extractall(landing, filter="data")
            except tarfile.ReadError:
                pass  # nothing came: the connection dropped (checked below)
            err = p.stderr.read().decode(errors="replace")
            p.wait()
        if p.returncode == 255:
            shutil.rmtree(landing, ignore_errors=True)
            raise TargetUnreachable(f"{self.name}: lost while fetching results: {err.strip()}")
        if (landing / "out").is_dir():
            for f in (landing / "out").iterdir():
                os.replace(f, run_dir / f.name)
        if (landing / "agent.log").exists():
            os.replace(landing / "agent.log", run_dir / "agent.log")
        shutil.rmtree(landing, ignore_errors=True)

    def interrupt(self) -> None:
        """Stop the run in progress: closing the connection ends the agent on the target."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGTERM)

    def kernel_log_since(self, monotonic_s: float) -> list[str]:
        """The target's kernel log since the run began (its own clock, taken at the start)."""
        since = self._run_start if self._run_start is not None else monotonic_s
        try:
            out = self._call("dmesg 2>&1", timeout=30)
        except TargetUnreachable as e:
            return [f"(kernel log not fetched: {e})"]
        lines = []
        for line in out.stdout.decode(errors="replace").splitlines():
            if line.startswith("[") and "]" in line:
                try:
                    if float(line[1:line.index("]")].strip()) >= since:
                        lines.append(line)
                except ValueError:
                    continue
            elif out.returncode != 0:
                lines.append(f"(kernel log not readable on {self.name}: {line})")
        return lines

    def describe(self) -> str:
        return f"ssh {self.name}"
