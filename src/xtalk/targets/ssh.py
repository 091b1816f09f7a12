"""A remote Linux target over SSH, with the system's `ssh` client (no Python dependency).

    ssh://[user@]host[:port][?identity=KEY&known_hosts=FILE&host_key=accept-new&agent=PATH&cache=DIR&name=NAME]

The agent is found on the target (`agent=`, else a copy cached under `cache`, else
`xtalk-agent` on its PATH); when none is there and the target's architecture matches this
host's, the local binary is copied into the cache (content-addressed, so an updated agent is
copied again); on a target of another architecture, the agent built here for it
(`make agent-aarch64`, or $XTALK_AGENT_AARCH64: targets/agent.py find_agent_for) is copied. Each run sends its plan on stdin, runs the agent with `--exit-with-parent`
(a dropped connection ends the run on the target), then streams the output directory back
as a tar archive and removes it on the target. ssh's exit code 255 (no connection) becomes
TargetUnreachable: the campaign requeues the run and fails over to other targets.

The URL is input from the command line and the target runs as root, so every parameter is
checked (`check_url_parts`) and every remote argument goes through `remote_word` (shlex
quoting; `~/` becomes the remote "$HOME"). The host key is always checked
(StrictHostKeyChecking=yes, against `known_hosts=` or the user's own file); a new key is
accepted only when the URL says `host_key=accept-new`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import urllib.parse
from functools import cached_property
from pathlib import Path

from .. import safepath
from .. import aocs
from ..errors import AgentError, UsageError
from ..plan import Plan
from ..outcome import RunOutcome, parse_outcome, write_outcome
from ..store import run_outcome
from .agent import TargetFacts, _caches, _cpu_list, find_agent, find_agent_for
from .base import Target, TargetUnreachable
from . import settings as machine_settings
from .local import _write_failed, convert_run, with_settings  # convert_run: pandas only once a run has ended
from .lock import lock_timeout

CONNECT_TIMEOUT_S = 10
OPTIONS = ("identity", "known_hosts", "host_key", "agent", "cache", "name")
_HOST = re.compile(r"[A-Za-z0-9_.:%-]{1,253}")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9_.@:+-]{1,80}")


def remote_word(path: str) -> str:
    """`path` as one word for the remote shell, taken literally there: shlex-quoted, except
    that a leading `~` or `~/` is the remote user's home ("$HOME", expanded there)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + (shlex.quote(path[2:]) if path[2:] else "")
    return shlex.quote(path)


def _remote_join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def _check_remote_path(url: str, key: str, value: str) -> None:
    if not value or any(not c.isprintable() for c in value) or len(value) > 4096:
        raise UsageError(f"--target {url!r}: {key}= must be a printable path on the target")
    if value.startswith("~") and not (value == "~" or value.startswith("~/")):
        raise UsageError(f"--target {url!r}: {key}={value!r}: write ~/PATH (your home there) or an absolute path, not ~user")
    if not (value.startswith("/") or value.startswith("~")):
        raise UsageError(f"--target {url!r}: {key}={value!r}: write an absolute path or ~/PATH")


def check_url_parts(url: str, host: str, user: str | None, q: dict) -> None:
    """Refuse what the URL must not carry: a host or user ssh would read as an option, local
    files that do not exist, remote paths that are not absolute (or ~/), unknown values."""
    if not _HOST.fullmatch(host) or host.startswith("-"):
        raise UsageError(f"--target {url!r}: host {host!r} is not a host name or address")
    if user is not None and not _USER.fullmatch(user):
        raise UsageError(f"--target {url!r}: user {user!r}: letters, digits, '.', '_' and '-' only")
    for key in ("identity", "known_hosts"):
        if key in q:
            v = q[key]
            if any(c.isspace() or not c.isprintable() for c in v) or not os.path.isfile(v):
                raise UsageError(f"--target {url!r}: {key}={v!r} is not a file here (a path without spaces)")
    if q.get("host_key", "yes") not in ("yes", "accept-new"):
        raise UsageError(f"--target {url!r}: host_key={q['host_key']!r}: write host_key=accept-new to trust a new board's "
                         "key on first contact (default: known keys only)")
    for key in ("agent", "cache"):
        if key in q:
            _check_remote_path(url, key, q[key])
    if "name" in q and not _NAME.fullmatch(q["name"]):
        raise UsageError(f"--target {url!r}: name={q['name']!r}: letters, digits and ._@:+- only, at most 80")


class UnsafeArchive(AgentError):
    """The board sent back a member that would land outside the run directory (a link, an
    absolute or `..` path, a device): nothing of the archive is kept."""


def _member_problem(m: tarfile.TarInfo) -> str | None:
    """Why a member of the fetched archive is refused, or None: an agent's output holds only
    directories and regular files with relative names that stay below the landing directory."""
    name = m.name
    if name.startswith("/") or os.path.isabs(name):
        return "an absolute path"
    if ".." in name.split("/"):
        return "a '..' path"
    if m.issym() or m.islnk():
        return f"a {'symbolic' if m.issym() else 'hard'} link to {m.linkname!r}"
    if not (m.isfile() or m.isdir()):
        return "not a regular file or directory"
    return None


def unpack(stream, dest: Path) -> None:
    """Extract the tar stream `stream` (what `_fetch` reads from the board) into `dest`, which
    must be xtalk's own fresh directory: a member that is a link, a device, an absolute or `..`
    path is refused (UnsafeArchive, naming it) before it is written, so a hostile board cannot
    write outside `dest`; where Python has tarfile's "data" filter (3.10.12+, 3.11.4+) it runs
    too, and without it ownership and special mode bits are dropped by hand as it would."""
    data = getattr(tarfile, "data_filter", None)
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for m in tar:
            why = _member_problem(m)
            if why:
                raise UnsafeArchive(f"fetched results: member {m.name!r} is {why}; refused (a board's agent writes none): "
                                    f"nothing of this run's archive was kept")
            if data is not None:
                tar.extract(m, dest, filter="data")
            else:
                m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
                m.mode &= 0o755
                tar.extract(m, dest)


class SshTarget(Target):
    """One remote board; the executor never gives it two runs at once."""

    def __init__(self, host: str, user: str | None = None, port: int = 22, identity: str | None = None,
                 known_hosts: str | None = None, agent: str | None = None, cache: str = "~/.cache/xtalk",
                 name: str | None = None, host_key: str = "yes"):
        self.host, self.user, self.port = host, user, int(port)
        self.identity, self.known_hosts, self.agent_path, self.cache = identity, known_hosts, agent, cache
        self.host_key = host_key
        self.name = name or f"{user + '@' if user else ''}{host}:{port}"
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._run_start: float | None = None

    @classmethod
    def from_url(cls, url: str) -> "SshTarget":
        u = urllib.parse.urlsplit(url)
        if u.scheme != "ssh" or not u.hostname:
            raise UsageError(f"--target {url!r}: write ssh://[user@]host[:port]")
        try:
            port = u.port or 22
        except ValueError:
            raise UsageError(f"--target {url!r}: the port must be a number from 1 to 65535") from None
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query).items()}
        unknown = set(q) - set(OPTIONS)
        if unknown:
            raise UsageError(f"--target {url!r}: unknown option {sorted(unknown)[0]!r}; use {', '.join(OPTIONS)}")
        check_url_parts(url, u.hostname, u.username, q)
        return cls(u.hostname, u.username, port, **q)

    # -- ssh plumbing ------------------------------------------------------------------------
    def _ssh(self, command: str) -> list[str]:
        cmd = ["ssh", "-p", str(self.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
        if self.identity:
            cmd += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            cmd += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        # A board runs what we send as root: never talk to one whose key is unknown or changed.
        cmd += ["-o", f"StrictHostKeyChecking={self.host_key}"]
        # `--`: nothing after it is an option, whatever the host or the command look like.
        return cmd + ["--", f"{self.user}@{self.host}" if self.user else self.host, command]

    def _failure(self, stderr: bytes) -> AgentError:
        """What ssh's exit code 255 means: a host key problem (the user must act), else the
        board does not answer."""
        lines = stderr.decode(errors="replace").strip().splitlines()
        text = " ".join(lines)
        if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
            return AgentError(f"{self.name}: its host key is unknown or changed; check its fingerprint, then add it to "
                              f"{self.known_hosts or '~/.ssh/known_hosts'} (or give host_key=accept-new to trust it on first contact)")
        return TargetUnreachable(f"{self.name}: {lines[-1] if lines else 'ssh failed'}")

    def _call(self, command: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            out = subprocess.run(self._ssh(command), input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TargetUnreachable(f"{self.name}: no answer in {timeout:.0f} s") from None
        if out.returncode == 255:
            raise self._failure(out.stderr)
        return out

    # -- the agent on the target ---------------------------------------------------------------
    @cached_property
    def agent(self) -> str:
        """Path of the agent on the target (copied there when needed)."""
        if self.agent_path:
            word = remote_word(self.agent_path)
            if self._call(f"test -x {word}").returncode != 0:
                raise AgentError(f"{self.name}: agent={self.agent_path} is not an executable file there")
            return self._expand(word)
        local = find_agent()
        word, arch, lines = self._agent_copy(local)
        if word:
            return word
        foreign = find_agent_for(arch) if arch != "?" else None
        if foreign is not None:  # built here for the target's architecture (make agent-aarch64)
            word, _, _ = self._agent_copy(foreign, arch)
            return word
        found = [x for x in lines[1:] if x.startswith("/")]
        if found:
            return found[0]
        raise AgentError(f"{self.name}: no xtalk-agent there and its architecture ({arch}) differs from this host's "
                         f"({platform.machine()}); build the agent for {arch} here (`make agent-aarch64` for aarch64, found "
                         f"by itself; XTALK_AGENT_{arch.upper()}=FILE names another build) or give ?agent=PATH")

    def _agent_copy(self, local: Path, arch: str | None = None) -> tuple[str | None, str, list[str]]:
        """(the cached copy of ``local`` on the target, copied there when its architecture is
        ``arch`` (default this host's), else None; the target's architecture; what the probe said)."""
        digest = hashlib.sha256(local.read_bytes()).hexdigest()[:16]
        cache = remote_word(self.cache)
        remote = _remote_join(self.cache, f"xtalk-agent-{digest}")
        word, tmp = remote_word(remote), remote_word(remote + ".tmp")
        probe = self._call(f"uname -m; test -x {word} && echo cached; command -v xtalk-agent || true")
        lines = probe.stdout.decode().split()
        there = lines[0] if lines else "?"
        if "cached" in lines:
            return self._expand(word), there, lines
        if there == (arch or platform.machine()):
            put = self._call(f"mkdir -p {cache} && cat > {tmp} && chmod 755 {tmp} && mv {tmp} {word}",
                             stdin=local.read_bytes(), timeout=300)
            if put.returncode != 0:
                raise AgentError(f"{self.name}: cannot copy the agent: {put.stderr.decode(errors='replace').strip()}")
            return self._expand(word), there, lines
        return None, there, lines

    def _expand(self, word: str) -> str:
        """The absolute path a remote shell word names (its "$HOME" expanded there)."""
        return self._call(f"printf '%s\\n' {word}").stdout.decode().rstrip("\n")

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

    def aocs_data(self, directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
        """Make the AOCS files on the board with its agent (a relative `directory` is under the
        remote user's home), check their seed there, and copy them for `copy`."""
        if not directory or any(not c.isprintable() for c in directory):
            raise UsageError(f"{field}: {directory!r}: name a directory for the AOCS files")
        d = remote_word(directory)
        inp, exp = (remote_word(p) for p in aocs.data_paths(".", None))
        make = (f"mkdir -p {d} && cd {d} && {{ test -e {inp} -a -e {exp} || "
                f"{shlex.quote(self.agent)} aocs-generate --out . --seed {int(seed)} >&2; }} && pwd && head -c 64 {inp}")
        out = self._call(make, timeout=300)
        if out.returncode != 0:
            raise AgentError(f"{self.name}: {field}: aocs-generate: {out.stderr.decode(errors='replace').strip()}")
        where, _, head = out.stdout.partition(b"\n")
        import numpy as np  # here only: a plan for a board does not load it

        found = int(np.frombuffer(head.ljust(aocs.HEADER_BYTES, b"\0"), aocs.header_dtype(), count=1)[0]["seed"])
        if head[:6] != b"XTAOCS" or found != seed:
            raise UsageError(f"{field}: {where.decode()} on {self.name} holds AOCS files of seed {found}, not data_seed = {seed}; "
                             "use another directory or remove its files")
        base = where.decode()
        if not copy:
            return aocs.data_paths(base)
        src, dst = aocs.data_paths(base), aocs.data_paths(base, copy)
        cp = f"mkdir -p {remote_word(aocs.copy_dir(base, copy))} && " + " && ".join(
            f"{{ test -e {remote_word(b)} || cp {remote_word(a)} {remote_word(b)}; }}" for a, b in zip(src, dst))
        out = self._call(cp)
        if out.returncode != 0:
            raise AgentError(f"{self.name}: {field}: cannot copy the AOCS files: {out.stderr.decode(errors='replace').strip()}")
        return dst

    def run(self, plan: Plan, run_dir: Path) -> RunOutcome:
        """Run on the target; fill `run_dir` here like a local run (plan, run.json, jobs, log)."""
        run_dir = Path(run_dir)
        agent = shlex.quote(self.agent)
        before = self.settings()  # before the directory: an unreachable board leaves nothing here
        safepath.makedirs(run_dir, exist_ok=False)
        safepath.write_text(run_dir / "plan.json", plan.to_json())
        # The shell prints the work directory and the kernel clock, then becomes the agent, so
        # the agent's parent is the ssh session: when the connection drops, the run ends.
        # The board's lock (fd 9, inherited by the agent) keeps runs of two campaigns apart.
        cache, lock = remote_word(self.cache), remote_word(_remote_join(self.cache, "target.lock"))
        wait = lock_timeout()
        flock = "flock 9" if wait == float("inf") else (
            f"{{ flock -w {wait:g} 9 || {{ echo 'xtalk: the board is busy: another run held its lock for more than {wait:g} s "
            "(XTALK_LOCK_TIMEOUT)' >&2; exit 75; }; }")
        script = (f'mkdir -p {cache} && exec 9>{lock} && {{ ! command -v flock >/dev/null || {flock}; }} && '
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
            raise self._failure(err)
        if len(lines) < 2:
            raise AgentError(f"{self.name}: the run did not start: {err.decode(errors='replace').strip()}")
        remote, self._run_start = lines[0], float(lines[1])
        try:
            self._fetch(remote, run_dir)
        except UnsafeArchive as e:
            # The run is recorded as failed, with why: nothing the board sent is kept.
            return _write_failed(run_dir, plan, f"{self.name}: {e}", None, [])
        except TargetUnreachable:
            if interrupted:
                return RunOutcome(run_id=plan.run_id, status="interrupted",
                                  reason="interrupted; the target could not be reached to fetch")
            raise
        meta = run_outcome(run_dir)
        if interrupted:
            return (meta or RunOutcome(run_id=plan.run_id, status="interrupted")).model_copy(update={"status": "interrupted"})
        if meta is None or meta.status == "running":
            log = (run_dir / "agent.log").read_text(errors="replace").strip().splitlines() if (run_dir / "agent.log").exists() else []
            why = log[-1] if log else f"ssh exited with {proc.returncode}"
            meta = _write_failed(run_dir, plan, f"agent ended abnormally on {self.name} (exit {proc.returncode}): {why}", meta,
                                 self._restore(plan.run_id))
        if self.convert_after_run:
            convert_run(run_dir)
        try:
            after = self.settings()
        except TargetUnreachable as e:  # the run is kept; that its settings held is unknown, and said
            note = f"settings after the run not read ({e}): whether they held is unknown"
            return write_outcome(run_dir, parse_outcome({**meta.to_dict(), "settings": {"before": before},
                                                         "notes": [*meta.notes, note]}))
        return with_settings(run_dir, meta, before, after)

    def settings(self) -> dict[str, str]:
        """The board's configuration settings now: the local target's reader, run over SSH
        (targets/settings.py); the run holds no board lock between the snapshots and the run."""
        return machine_settings.parse(self._call(machine_settings.reader_script(self.watch)).stdout)

    def _restore(self, run_id: str) -> list[str]:
        """The agent died on the board before its teardown: undo its changes there now."""
        try:
            out = self._call(f"{shlex.quote(self.agent)} recover")
        except TargetUnreachable as e:
            return [f"recovery not run: {e}"]
        lines = [f"restored: {line}" for line in out.stdout.decode(errors="replace").splitlines() if line.strip()]
        for line in lines or ["agent recovery ran: nothing was left to restore"]:
            print(f"xtalk: {self.name}: run {run_id}: {line}", file=sys.stderr, flush=True)
        return lines or ["agent recovery ran: nothing was left to restore"]

    def _fetch(self, remote: str, run_dir: Path) -> None:
        """Stream the remote output directory and log back as one tar, then remove them there."""
        q = shlex.quote(remote)
        cmd = self._ssh(f"cd {q} && tar -cf - $(ls -d out agent.log 2>/dev/null); s=$?; rm -rf {q}; exit $s")
        landing = run_dir / ".fetch"
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            try:
                unpack(p.stdout, landing)
            except tarfile.ReadError:
                pass  # nothing came: the connection dropped (checked below)
            except UnsafeArchive:
                p.kill()
                p.wait()
                shutil.rmtree(landing, ignore_errors=True)
                raise
            err = p.stderr.read().decode(errors="replace")
            p.wait()
        if p.returncode == 255:
            shutil.rmtree(landing, ignore_errors=True)
            raise TargetUnreachable(f"{self.name}: lost while fetching results: {err.strip()}")
        if (landing / "out").is_dir():
            for f in (landing / "out").iterdir():
                safepath.rename(f, run_dir / f.name)
        if (landing / "agent.log").exists():
            safepath.rename(landing / "agent.log", run_dir / "agent.log")
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
