"""A campaign's declared settings (its `settings` file, docs/settings.md): checked on every
target before the campaign directory is made (one line naming the first that does not hold,
exit 2), then watched by every run (snapshot before and after: drift marks a run invalid).
A labgrid board is checked after each boot instead: its runs are marked invalid where its
settings differ from the declared ones (targets/labgrid.py), and the campaign goes on.
Kept in campaign.json so that `xtalk campaign resume` checks and watches them again."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..targets import settings as ms
from ..targets.base import LocalTarget

#: campaign.json's key for the declared settings (path, value, why).
KEY = "declared_settings"


def _snapshot(target) -> dict[str, str]:
    """The target's settings now: a board's over SSH, this machine's read here."""
    reader = getattr(target, "settings", None)
    return reader() if callable(reader) else ms.snapshot_local(target.watch)


def hold(declared: ms.SettingsFile, targets: list, where: str) -> None:
    """Every target watches the declared files; UsageError when one target does not hold one.
    A lab board (one that takes ``declare``) is not read here: its settings exist once it has
    booted, so it reads them after each boot and marks its runs where they differ."""
    for t in targets:
        # Only this machine is read here without a reader of its own (_snapshot); a target
        # without one would be too, and a wrong board would pass.
        if not isinstance(t, LocalTarget) and not callable(getattr(t, "settings", None)) \
                and not callable(getattr(t, "declare", None)):
            raise UsageError(f"{where}: target {t.describe()}: declared settings cannot be read on it (it has no "
                             "settings reader); use ssh:// or labgrid:// targets, or remove settings")
    for t in targets:
        t.watch = tuple(dict.fromkeys([*t.watch, *declared.paths()]))
        if callable(getattr(t, "declare", None)):
            t.declare(declared)
            continue
        wrong = ms.violations(declared, _snapshot(t))
        if wrong:
            more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
            raise UsageError(f"{where}: target {t.describe()}: {wrong[0]}{more}")


def declared(file: Path, settings: str | None, targets: list, cluster: str | None) -> ms.SettingsFile | None:
    """The campaign file's declared settings (relative to it), held on every target; None
    when it declares none. A --cluster's boards are the workers': not read from here, refused."""
    if not settings:
        return None
    where = Path(file).parent / settings
    found = ms.load_declared(where)
    if cluster:
        raise UsageError(f"{file}: settings = {settings!r}: declared settings are checked on each --target; with "
                         "--cluster the workers' boards are not read from here: run it with --target, or remove settings")
    hold(found, targets, str(where))
    return found


def meta_fields(found: ms.SettingsFile) -> dict:
    return {KEY: [vars(d) for d in found.declared], "watch": list(found.watch)}


def from_meta(meta: dict) -> ms.SettingsFile | None:
    """The declared settings campaign.json kept (None: none)."""
    rows = meta.get(KEY) or []
    if not rows:
        return None
    return ms.SettingsFile(tuple(ms.Declared(str(d["path"]), str(d["value"]), str(d.get("why", ""))) for d in rows),
                           tuple(str(w) for w in meta.get("watch") or []))
