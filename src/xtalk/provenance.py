"""Where a result comes from: the xtalk version and xtalk's own build commit (light imports
only, so campaign and run set-up can use it without the analysis stack).

The commit is xtalk's, never the caller's: a wheel carries the commit it was built from in
``xtalk/_build_info.py`` (written by setup.py's build_py); an editable install (`make
setup`) asks git of its source tree, but only when that tree is xtalk's own checkout (its
top level holds this package and a pyproject.toml naming ``xtalk``). A pip install inside a
user's git repository therefore never records the user's commit.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

UNKNOWN = "unknown"


def source_commit(root: Path) -> str | None:
    """The commit of ``root`` when it is the top level of xtalk's own git checkout (the
    tree this package or the wheel is built from), else None."""
    root = Path(root).resolve()
    try:
        text = (root / "pyproject.toml").read_text()
    except OSError:
        return None
    if not any(line.replace(" ", "") == 'name="xtalk"' for line in text.splitlines()):
        return None
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = top.stdout.split()
    # A tree inside another repository (an unpacked sdist in the user's checkout) is not its own top level.
    if top.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root:
        return None
    return lines[1]


def build_commit() -> str:
    """xtalk's commit: the wheel's recorded one, else its own checkout's, else "unknown"."""
    import importlib

    try:  # written into wheels only (setup.py), so found by name, not imported statically
        return str(getattr(importlib.import_module(f"{__package__}._build_info"), "COMMIT", "") or UNKNOWN)
    except ImportError:
        pass
    here = Path(__file__).resolve().parent
    root = here.parents[1]
    if (root / "src" / "xtalk").resolve() != here:  # installed without build info: no checkout to ask
        return UNKNOWN
    return source_commit(root) or UNKNOWN


def git_commit() -> str:
    """The build commit (:func:`build_commit`): the name runs' labels have used."""
    return build_commit()
