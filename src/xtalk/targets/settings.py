"""The machine's configuration settings that decide timing: snapshot, drift, declared values.

A snapshot maps each readable file (CPU frequency governor and limits, SMT control, idle states,
turbo/boost, IRQ affinities, RT throttling, THP, kernel command line, clocksource, resctrl
schemata, and whatever user-listed file under /sys or /proc) to its text. It is taken by one
shell command, `reader_script`, run on this machine for the local target and over SSH for a
remote one, so both read the same files the same way. A run whose snapshot after differs from
the one before is invalid (`diff`); a declared-settings file (TOML) names values that must hold,
with a rationale each, and `violations` says which the machine does not have (docs/settings.md).
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

#: What every snapshot reads (shell globs, expanded where the snapshot is taken).
DEFAULT_PATHS = (
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_min_freq",
    "/sys/devices/system/cpu/cpu*/cpufreq/scaling_max_freq",
    "/sys/devices/system/cpu/smt/control",
    "/sys/devices/system/cpu/cpu*/cpuidle/state*/disable",
    "/sys/devices/system/cpu/intel_pstate/no_turbo",
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/devices/system/cpu/online",
    "/proc/irq/*/smp_affinity_list",
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/kernel/sched_rt_period_us",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/defrag",
    "/proc/cmdline",
    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    "/sys/fs/resctrl/schemata",
)
#: A user-listed path: under /sys or /proc, no character the shell would read (globs allowed).
_USER_PATH = re.compile(r"^/(sys|proc)/[A-Za-z0-9_./:*?\[\]+,@-]+$")


def check_path(path: str, where: str) -> str:
    """`path` when it may be snapshot; UsageError naming `where` otherwise."""
    if not _USER_PATH.match(path) or "/../" in path or path.endswith("/.."):
        raise UsageError(f"{where}: {path!r} is not a file under /sys or /proc (letters, digits, _./:*?[]+,@- only); "
                         "name such a file")
    return path


def reader_script(extra: list[str] | tuple[str, ...] = ()) -> str:
    """The shell command that prints every readable settings file as `path NUL text`
    (GNU grep -Z); unreadable and absent files print nothing. Exit status 0 always."""
    paths = dict.fromkeys([*DEFAULT_PATHS, *(check_path(p, "settings") for p in extra)])  # a file read once
    return "LC_ALL=C grep -sHZ '' " + " ".join(paths) + " </dev/null; exit 0"


def parse(output: bytes) -> dict[str, str]:
    """The snapshot printed by `reader_script`: path -> text (lines of one file joined by \\n)."""
    snap: dict[str, list[str]] = {}
    for line in output.decode(errors="replace").splitlines():
        path, sep, text = line.partition("\0")
        if sep:
            snap.setdefault(path, []).append(text)
    return {p: "\n".join(lines) for p, lines in sorted(snap.items())}


def snapshot_local(extra: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """This machine's settings now."""
    out = subprocess.run(["sh", "-c", reader_script(extra)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         timeout=30, check=False)
    return parse(out.stdout)


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per setting that changed between two snapshots: `path: 'old' → 'new'`."""
    lines = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old != new:
            lines.append(f"{path}: {_shown(old)} → {_shown(new)}")
    return lines


def _shown(value: str | None) -> str:
    return "(absent)" if value is None else repr(value)


def drift_reason(lines: list[str]) -> str:
    """The run's `invalid` reason from its drift lines."""
    return "settings drifted during the run: " + "; ".join(lines)


@dataclass(frozen=True)
class Declared:
    """A setting that must hold: the value its file must read, and why."""

    path: str
    value: str
    why: str


@dataclass(frozen=True)
class SettingsFile:
    """A declared-settings file: the values that must hold and the extra files to watch."""

    declared: tuple[Declared, ...]
    watch: tuple[str, ...]

    def paths(self) -> list[str]:
        """Every user-listed path the snapshot must read besides the defaults."""
        return list(dict.fromkeys([*self.watch, *(d.path for d in self.declared)]))


def load_declared(path: Path) -> SettingsFile:
    """Read a declared-settings TOML file; UsageError names the first wrong field and the fix."""
    where = str(path)
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"{where}: cannot read the settings file ({e.strerror}); give an existing file") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{where}: not TOML ({e}); fix the syntax") from None
    unknown = set(doc) - {"settings", "watch"}
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r}; a settings file has [settings.\"PATH\"] "
                         "tables and an optional watch = [PATHS]")
    watch = doc.get("watch", [])
    if not isinstance(watch, list) or not all(isinstance(w, str) for w in watch):
        raise UsageError(f"{where}: watch must be a list of paths under /sys or /proc")
    settings = doc.get("settings", {})
    if not isinstance(settings, dict):
        raise UsageError(f"{where}: settings must be tables [settings.\"PATH\"] with value and why")
    declared = []
    for p, entry in settings.items():
        field = f"{where}: settings.\"{p}\""
        check_path(p, field)
        if any(c in p for c in "*?["):
            raise UsageError(f"{field}: a declared setting names one file, not a glob; list each file")
        if not isinstance(entry, dict) or set(entry) - {"value", "why"}:
            raise UsageError(f"{field}: takes value = \"...\" and why = \"...\" only")
        if not isinstance(entry.get("value"), (str, int)) or isinstance(entry.get("value"), bool):
            raise UsageError(f"{field}.value: missing or not a string or integer; give the text the file must read")
        if not isinstance(entry.get("why"), str) or not entry["why"].strip():
            raise UsageError(f"{field}.why: missing; give the rationale an assessor reads")
        declared.append(Declared(p, str(entry["value"]), entry["why"]))
    return SettingsFile(tuple(declared), tuple(check_path(w, f"{where}: watch") for w in watch))


def selected(text: str) -> str:
    """The chosen word of a sysfs choice file ("always madvise [never]" -> "never"), else the text."""
    m = re.search(r"\[([^\]]*)\]", text)
    return m.group(1) if m else text


def violations(declared: SettingsFile, snap: dict[str, str]) -> list[str]:
    """One line per declared setting the snapshot does not hold, naming the file, both values and the fix."""
    lines = []
    for d in declared.declared:
        have = snap.get(d.path)
        if have is None:
            lines.append(f"settings: {d.path} cannot be read on this machine, but must read {d.value!r} ({d.why}); "
                         "run where it exists or remove it from the settings file")
        elif d.value not in (have.strip(), selected(have.strip())):
            lines.append(f"settings: {d.path} is {have.strip()!r}, the settings file requires {d.value!r} ({d.why}); "
                         "set it on the machine or change the settings file")
    return lines
