"""Where a result comes from: the xtalk version and the checkout's commit (light imports
only, so campaign and run set-up can use it without the analysis stack)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit() -> str:
    """The checkout's commit when running from one, else "unknown"."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
