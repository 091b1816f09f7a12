"""A board of a labgrid lab as a target (`pip install xtalk[lab]`):

    labgrid://PLACE?env=FILE[&coordinator=HOST:PORT&role=NAME&kernel=K&boot_timeout=S
                             &identity=KEY&known_hosts=FILE&host_key=accept-new&agent=PATH&cache=DIR&name=NAME]

Before its first run the board is made ready: the place is acquired on the coordinator
(`coordinator=`, else the file's `coordinator_address`, else $LG_COORDINATOR or
`--lg-coordinator`; none: a local labgrid environment, nothing to acquire), the environment file's target for it (`role=`, else the place's name) is loaded
with ``LG_KERNEL`` (the run's ``kernel`` label, else ``kernel=``) and ``LG_PLACE`` set, so the
file chooses the image with labgrid's own ``!template $LG_KERNEL``; it is powered through its
``PowerProtocol`` driver (a cycle, so a hung board is reset) and its ``NetworkService`` is
waited on until SSH answers. The runs then go through the SSH target (targets/ssh.py) as a
batch: one acquisition and one boot per board and kernel, never one per run. A run of
another kernel reboots the board (the campaign hands a board the runs of its kernel first).

A target whose console driver is active (labgrid's QEMUDriver is its board's power and
serial console both) has its console read while it boots, after each run and before power-off:
kept in ``log_dir/NAME-console.log`` (held in memory until the campaign gives the board that
directory), and an emulated UART nobody reads never fills its socket and stalls the board.

A board that does not answer within ``boot_timeout`` is power-cycled once more; a second
failure marks it failed for the rest of the campaign: every later call raises
TargetUnreachable at once (the campaign requeues its runs to the other boards) and the boot
log (the power driver's output, the board's console, the SSH wait) is kept in
``log_dir`` (the campaign's ``boards/``). `close` powers the board off and releases the place;
the campaign calls it at its end, on failure and on interrupt. A host killed before that leaves
the place acquired by this user and host: a resume finds it so and takes it over.

A campaign's declared settings (docs/settings.md) are not read at its start (the board has
not booted): `declare` hands them over, the board reads its settings over SSH after each boot
(``log_dir/NAME-settings.jsonl``, one line per boot, with the declared ones it does not hold)
and a run whose settings before it differ from the declared ones is marked invalid, the
difference in its notes: left out of the analysis, named in the summary, the report and the
evidence; the campaign goes on.

labgrid's remote-place manager is one per process, bound to the event loop of the thread that
first used it; every call into the labgrid library therefore runs on one thread of its own
(``_labgrid``). Acquire and release use `labgrid-client`, the interface labgrid keeps stable.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from pathlib import Path

from .. import safepath
from ..errors import UsageError
from ..trust import require_trusted
from ..plan import Plan
from . import settings as machine_settings
from .base import Target, TargetOut, TargetUnreachable
from .ssh import SshTarget, check_url_parts

OPTIONS = ("env", "coordinator", "role", "kernel", "boot_timeout", "identity", "known_hosts", "host_key", "agent",
           "cache", "name")
BOOT_TIMEOUT_S = 120.0
#: A place name as it reaches labgrid-client's command line: never an option.
_PLACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
#: labgrid's own calls, on one thread (module docstring).
_labgrid = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="labgrid")
_ENVIRON = threading.Lock()


class BoardFailed(TargetOut):
    """The board did not come up after a power cycle and a retry: out of this campaign."""


def _on_labgrid(fn, *args):
    return _labgrid.submit(fn, *args).result()


def _console_logs(path: Path) -> None:
    """Every console labgrid drives logged under ``path`` (labgrid's ConsoleLoggingReporter,
    one per process; the directory made private first, as every directory of a results store)."""
    from labgrid.consoleloggingreporter import ConsoleLoggingReporter

    if getattr(ConsoleLoggingReporter, "instance", None) is None:
        safepath.makedirs(path)
        ConsoleLoggingReporter.start(str(path))


def client() -> str:
    """The labgrid-client program (next to this Python first)."""
    here = Path(sys.executable).parent / "labgrid-client"
    found = str(here) if here.is_file() else shutil.which("labgrid-client")
    if not found:
        raise UsageError("--target labgrid://: labgrid is not installed; pip install 'xtalk[lab]'")
    return found


class LabgridBoard(Target):
    """One place of a labgrid lab; the executor never gives it two runs at once."""

    def __init__(self, place: str, env: str | None = None, coordinator: str | None = None, role: str | None = None,
                 kernel: str | None = None, boot_timeout: float = BOOT_TIMEOUT_S, name: str | None = None, **ssh):
        self.place, self.env, self.role, self.kernel = place, env, role or place, kernel
        self.coordinator = coordinator  # else found by _coordinator
        self.boot_timeout = float(boot_timeout)
        self.name = name or place
        self.ssh_options = ssh
        self._log_dir: Path | None = None  # the campaign sets it (boards/)
        self._boot_log: str | None = None
        self._console = bytearray()  # read from its console, not yet written (_write_console)
        self.acquired = False
        self.failed: str | None = None
        self.booted: str | None = None  # the kernel it runs, once up
        self.notes: list[str] = []
        self._target = None  # the labgrid Target
        self._ssh: SshTarget | None = None
        self.declared: machine_settings.SettingsFile | None = None  # the campaign's (declare)
        self.differ: list[str] = []  # the declared settings it did not hold after its last boot
        self._settings_log: list[dict] = []  # its boots' settings, not yet written (_write_settings)
        self._journal = None  # writes lines to the campaign's journal (journal)
        self._events: list[dict] = []  # its place's events, not yet journalled
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str) -> "LabgridBoard":
        u = urllib.parse.urlsplit(url)
        place = u.netloc
        if u.scheme != "labgrid" or not _PLACE.fullmatch(place):
            raise UsageError(f"--target {url!r}: write labgrid://PLACE?env=FILE (a place name of letters, digits, -_., "
                             "starting with a letter or digit)")
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query).items()}
        unknown = set(q) - set(OPTIONS)
        if unknown:
            raise UsageError(f"--target {url!r}: unknown option {sorted(unknown)[0]!r}; use {', '.join(OPTIONS)}")
        if not q.get("env"):
            raise UsageError(f"--target {url!r}: give env=FILE, the labgrid environment that says how to power and "
                             "reach the place (docs/lab.md)")
        if not Path(q["env"]).is_file():
            raise UsageError(f"--target {url!r}: env={q['env']} is not a file")
        require_trusted(Path(q["env"]))  # its power and boot commands run as root, as a campaign file's do
        try:
            q["boot_timeout"] = float(q.get("boot_timeout", BOOT_TIMEOUT_S))
        except ValueError:
            q["boot_timeout"] = math.nan
        if not 1 <= q["boot_timeout"] <= 3600:
            raise UsageError(f"--target {url!r}: boot_timeout must be a number of seconds from 1 to 3600")
        check_url_parts(url, "localhost", None, {k: v for k, v in q.items() if k in ("identity", "known_hosts", "agent",
                                                                                        "host_key", "cache", "name")})
        client()
        return cls(place, **q)

    # -- the place on the coordinator -------------------------------------------------------------
    def _client(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [client(), "-x", self.coordinator, "-p", self.place, *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TargetUnreachable(f"{self.name}: the coordinator {self.coordinator} did not answer in {timeout:.0f} s") \
                from None

    @contextlib.contextmanager
    def _lg_variables(self, kernel: str | None):
        """LG_KERNEL, LG_PLACE (and LG_COORDINATOR) set while the environment file loads: they
        are what its `!template`s read. A file labgrid refuses is bad input (exit 2)."""
        from labgrid.exceptions import InvalidConfigError

        with _ENVIRON:  # os.environ is the process's: one board's variables at a time
            saved = {k: os.environ.get(k) for k in ("LG_KERNEL", "LG_PLACE", "LG_COORDINATOR")}
            os.environ.update({"LG_KERNEL": kernel or self.kernel or "", "LG_PLACE": self.place})
            if self.coordinator:
                os.environ["LG_COORDINATOR"] = self.coordinator
            try:
                yield
            except InvalidConfigError as e:
                raise UsageError(f"--target labgrid://{self.place}: env={self.env}: {' '.join(str(e).split())}") from None
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)

    def _coordinator(self) -> str | None:
        """`coordinator=`, else the environment file's `coordinator_address`, else
        $LG_COORDINATOR (`--lg-coordinator`): labgrid's own order after the URL's."""
        if self.coordinator is None:
            from labgrid.config import Config

            with self._lg_variables(None):
                found = Config(self.env).get_option("coordinator_address", "")
            self.coordinator = found or os.environ.get("LG_COORDINATOR", "")
        return self.coordinator or None

    def acquire(self) -> None:
        """Reserve the place (already ours: a host killed mid-campaign left it, taken over)."""
        if self.acquired or not self._coordinator():
            return
        out = self._client("acquire")
        said = (out.stdout + out.stderr).strip()
        if out.returncode != 0 and "already acquired place" in said and "You have" in said:
            self.notes.append(f"{self.name}: place {self.place} was still acquired by this host (an interrupted "
                              "campaign): taken over")
            self._event("taken over")
        elif out.returncode != 0:
            raise TargetUnreachable(f"{self.name}: cannot acquire place {self.place}: {said.splitlines()[-1] if said else out.returncode}")
        else:
            self._event("acquired")
        self.acquired = True

    def release(self) -> None:
        if not self.acquired:
            return
        out = self._client("release")
        self.acquired = out.returncode != 0 and "not acquired" not in (out.stdout + out.stderr)
        self._event("release failed" if self.acquired else "released")

    # -- the place's events in the campaign's journal ----------------------------------------------
    @property
    def journal(self):
        """What writes the place's events (acquired, taken over, booted, failed, released) to the
        campaign's journal as lines without a run (campaign/journal.py `append_lines`: a list of
        events -> written?); they are held in memory until the campaign sets it."""
        return self._journal

    @journal.setter
    def journal(self, write) -> None:
        self._journal = write
        self._event(None)

    def _event(self, what: str | None, **fields) -> None:
        if what is not None:
            self._events.append({"t": round(time.time(), 3), "lab": what, "board": self.name, "place": self.place,
                                 **fields})
        if self._events and self._journal is not None and self._journal(self._events):
            self._events.clear()

    # -- power and boot -------------------------------------------------------------------------
    def _labgrid_target(self, kernel: str | None):
        from labgrid import Environment
        from labgrid.resource.remote import RemotePlaceManager

        manager = RemotePlaceManager.get()
        if manager.session is not None:  # its view of the places (acquired since?) brought up to date
            manager.loop.run_until_complete(manager.session.sync_with_coordinator())
        with self._lg_variables(kernel):
            target = Environment(self.env).get_target(self.role)
        if target is None:
            raise BoardFailed(f"{self.name}: {self.env} has no target {self.role!r}; name one with role=")
        return target

    def _power(self, kernel: str | None, first: bool) -> tuple[dict, str]:
        """Load the target for ``kernel``, power-cycle it; (its SSH coordinates, what it said)."""
        if self._target is not None:
            self._target.deactivate_all_drivers()
        if self._log_dir is not None:
            _console_logs(self._log_dir / "console")
        self._target = self._labgrid_target(kernel)
        power = self._target.get_driver("PowerProtocol")
        if hasattr(power, "cycle") and not first:
            power.cycle()
        else:
            if not first:
                power.off()
            power.on()
        net = self._target.get_resource("NetworkService")
        return {"host": net.address, "user": net.username, "port": int(net.port)}, ""

    def _power_off(self) -> None:
        if self._target is not None:
            try:
                self._drain_console()
                self._target.get_driver("PowerProtocol").off()
            finally:
                self._target.deactivate_all_drivers()
                self._target = None

    def _drain_console(self) -> None:
        """Read what the board's console said since the last read, if its target has an active
        console (a QEMUDriver is its own): labgrid's ConsoleLoggingReporter logs every read
        (the console log kept with a failed boot), and an emulated UART that nobody reads
        stalls its board once the socket's buffer is full."""
        if self._target is None:
            return
        from labgrid.protocol import ConsoleProtocol

        try:
            console = self._target.get_active_driver(ConsoleProtocol)
        except Exception:  # noqa: BLE001 - none, or labgrid's own lookup error: nothing to read
            return
        for _ in range(256):  # at most 1 MiB a call (QEMUDriver reads a page at a time)
            try:
                got = console.read(size=1, timeout=0.05)
            except Exception:  # noqa: BLE001 - pexpect's TIMEOUT: nothing more now
                break
            if not got:
                break
            self._console += got
        self._write_console()

    def _write_console(self) -> None:
        """The console read so far appended to ``log_dir/NAME-console.log`` (kept in memory
        until the campaign gives the board its directory: the checks boot the first board
        before)."""
        if self._console and self._log_dir is not None:
            safepath.makedirs(self._log_dir)
            fd = safepath.open_fd(self._log_dir / f"{self.name}-console.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                  0o600)
            with os.fdopen(fd, "ab") as f:
                f.write(self._console)
            self._console.clear()

    def _wait_ssh(self, ssh: SshTarget) -> str:
        """Until ssh answers (''), or what the last attempt said at the deadline (the console
        read on the way)."""
        end, said = time.monotonic() + self.boot_timeout, ""
        while time.monotonic() < end:
            _on_labgrid(self._drain_console)
            try:
                out = ssh._call("true", timeout=min(15.0, max(1.0, end - time.monotonic())))
                if out.returncode == 0:
                    return ""
                said = out.stderr.decode(errors="replace").strip()
            except TargetUnreachable as e:
                said = str(e)
            time.sleep(0.5)
        _on_labgrid(self._drain_console)
        return f"no SSH within boot_timeout={self.boot_timeout:.0f} s" + (f"; the last attempt: {said}" if said else "")

    @property
    def log_dir(self) -> Path | None:
        """Where a failed boot's log is kept (the campaign's ``boards/``); a board that failed
        before the campaign had a directory (its checks) writes its log when it is given one."""
        return self._log_dir

    @log_dir.setter
    def log_dir(self, path: Path | None) -> None:
        self._log_dir = path
        if path is not None and self._boot_log is not None:
            self._write_log()
        if path is not None:
            _on_labgrid(self._write_console)
            self._write_settings()

    def _keep_log(self, kernel: str | None, attempts: list[str]) -> Path | None:
        text = [f"board {self.name} (place {self.place}), kernel {kernel or '(default)'}: {len(attempts)} boot attempts"]
        text += [f"--- attempt {i + 1}\n{a}" for i, a in enumerate(attempts)]
        mine = self._log_dir / f"{self.name}-console.log" if self._log_dir is not None else None
        if self._console or (mine is not None and mine.is_file()):
            # the console as read here (a QEMUDriver's serial), also before the campaign had a directory
            said = (mine.read_bytes() if mine is not None and mine.is_file() else b"") + bytes(self._console)
            text.append(f"--- console of {self.name}\n{said.decode(errors='replace')}")
        elif self._log_dir is not None:  # what else labgrid logged of its consoles
            for console in sorted((self._log_dir / "console").glob(f"console_{self.role}*")):
                text.append(f"--- {console.name}\n{console.read_text(errors='replace')}")
        self._boot_log = "\n".join(text) + "\n"
        return self._write_log() if self._log_dir is not None else None

    def _write_log(self) -> Path:
        safepath.makedirs(self._log_dir)
        path = self._log_dir / f"{self.name}-boot.log"
        safepath.write_text(path, self._boot_log)
        return path

    def ready(self, kernel: str | None = None) -> SshTarget:
        """The board acquired, up on ``kernel`` (None: whichever it runs, else `kernel=`) and
        answering SSH; booted again only for another kernel."""
        with self._lock:
            if self.failed:
                raise BoardFailed(self.failed)
            if self._ssh is not None and kernel in (None, self.booted):
                return self._ssh
            kernel = kernel or self.kernel
            self.acquire()
            attempts: list[str] = []
            for first in (True, False):  # a power cycle once more, then the board is out
                try:
                    where, _ = _on_labgrid(self._power, kernel, first)
                except (TargetUnreachable, UsageError):
                    raise
                except Exception as e:  # labgrid's own errors (driver, resource, coordinator)
                    attempts.append(f"power: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
                    continue
                # what the exporter published goes on ssh's command line: checked as a URL's parts are
                check_url_parts(f"labgrid://{self.place}", where["host"], where["user"] or None, {})
                ssh = SshTarget(where["host"], where["user"] or None, where["port"], name=self.name, **self.ssh_options)
                said = self._wait_ssh(ssh)
                if not said:
                    self._ssh, self.booted = ssh, kernel
                    self._event("booted", kernel=kernel, attempts=len(attempts) + 1)
                    self._boot_settings(ssh, kernel)
                    return ssh
                attempts.append(f"ssh {where['user']}@{where['host']}:{where['port']}: {said}")
            log = self._keep_log(kernel, attempts)
            self.failed = (f"{self.name}: did not boot{(' kernel ' + kernel) if kernel else ''} after a power cycle; "
                           f"out of this campaign{f' (boot log: {log})' if log else ''}: {attempts[-1].splitlines()[0]}")
            self.notes.append(self.failed)
            self._event("failed", kernel=kernel, attempts=len(attempts))
            try:
                _on_labgrid(self._power_off)
            except Exception:  # noqa: BLE001 - the board is out anyway; the release below matters
                pass
            raise BoardFailed(self.failed)

    def declare(self, declared: machine_settings.SettingsFile) -> None:
        """The campaign's declared settings: read after each boot, and its runs marked where
        they differ (module docstring), instead of a check at the campaign's start."""
        self.declared = declared

    def _boot_settings(self, ssh: SshTarget, kernel: str | None) -> None:
        """The board's settings just after a boot, kept with its runs and compared with the
        declared ones (only with declared settings: one SSH call more per boot)."""
        if self.declared is None:
            return
        ssh.watch = self.watch
        try:
            snap = ssh.settings()
        except TargetUnreachable as e:  # each run reads them again before it starts (and fails there)
            self._settings_log.append({"t": round(time.time(), 3), "kernel": kernel, "error": str(e)})
        else:
            self.differ = machine_settings.violations(self.declared, snap)
            self._settings_log.append({"t": round(time.time(), 3), "kernel": kernel, "settings": snap,
                                       "differ": self.differ})
            if self.differ:
                note = (f"{self.name}: settings differ from the declared ones{f' (kernel {kernel})' if kernel else ''}: "
                        f"{self.differ[0]}{f' (and {len(self.differ) - 1} more)' if len(self.differ) > 1 else ''}; "
                        "its runs are marked invalid")
                if note not in self.notes:
                    self.notes.append(note)
        self._write_settings()

    def _write_settings(self) -> None:
        """The boots' settings appended to ``log_dir/NAME-settings.jsonl`` (kept in memory until
        the campaign gives the board its directory, as the console is)."""
        if self._settings_log and self._log_dir is not None:
            safepath.makedirs(self._log_dir)
            fd = safepath.open_fd(self._log_dir / f"{self.name}-settings.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                  0o600)
            with os.fdopen(fd, "a") as f:
                f.writelines(json.dumps(x, sort_keys=True) + "\n" for x in self._settings_log)
            self._settings_log.clear()

    def _mark(self, out, run_dir: Path):
        """The run marked invalid when the board's settings before it (else after its boot)
        differ from the declared ones: the difference in its notes."""
        if self.declared is None or out is None:
            return out
        before = out.settings.before if out.settings is not None and out.settings.before else None
        wrong = machine_settings.violations(self.declared, before) if before is not None else self.differ
        if not wrong:
            return out
        from ..outcome import parse_outcome, write_outcome

        doc = out.to_dict()
        doc["notes"] = [*doc.get("notes", []), *(f"board {self.name}: {w}" for w in wrong)]
        doc["invalid"] = doc.get("invalid") or (f"board {self.name}'s settings differ from the campaign's declared ones: "
                                            f"{wrong[0]}" + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))
        return write_outcome(run_dir, parse_outcome(doc))

    def close(self) -> None:
        """Power the board off and release its place (also after a failure or an interrupt)."""
        with self._lock:
            self._ssh, self.booted = None, None
            try:
                _on_labgrid(self._power_off)
            except Exception:  # noqa: BLE001 - releasing the place matters more than a clean power-off
                pass
            self.release()

    # -- the Target interface, through the board's SSH --------------------------------------------
    def facts(self):
        return self.ready().facts()

    def check(self, plan_json: str) -> None:
        self.ready().check(plan_json)

    def check_many(self, plans_json: list[str]) -> None:
        self.ready().check_many(plans_json)

    def wants(self, labels: dict) -> bool:
        """A run this board can take without a reboot (its kernel is the one booted; before
        its first boot, the one it will boot: `kernel=`, else the campaign's first)."""
        kernel = self.booted or self.kernel
        return not self.failed and kernel is not None and labels.get("kernel", self.kernel) == kernel

    def run(self, plan: Plan, run_dir: Path):
        ssh = self.ready(plan.labels.get("kernel") or self.kernel)
        ssh.convert_after_run, ssh.watch = self.convert_after_run, self.watch
        plan = plan.model_copy(update={"labels": {**plan.labels, "board": self.name,
                                                  **({"kernel": self.booted} if self.booted else {})}})
        try:
            return self._mark(ssh.run(plan, run_dir), run_dir)
        finally:
            _on_labgrid(self._drain_console)  # what the console said during the run, logged

    def aocs_data(self, directory: str, seed: int, field: str, copy: str | None = None) -> tuple[str, str]:
        return self.ready().aocs_data(directory, seed, field, copy)

    def kernel_log_since(self, monotonic_s: float) -> list[str]:
        return self._ssh.kernel_log_since(monotonic_s) if self._ssh else []

    def clock(self) -> float:
        return self.ready().clock()

    def interrupt(self) -> None:
        if self._ssh is not None:
            self._ssh.interrupt()

    def describe(self) -> str:
        return f"labgrid place {self.place}" + (f" (failed: {self.failed})" if self.failed else "")
