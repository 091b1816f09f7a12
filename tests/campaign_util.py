"""Small campaigns shared by the campaign tests (kept tiny: the machine has 2 shared CPUs)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# The local target's machine-wide lock lives in a directory of the test run, removed with it.
_LOCK_DIR = tempfile.TemporaryDirectory(prefix="xtalk-test-lock-")
os.environ.setdefault("XTALK_TARGET_LOCK", str(Path(_LOCK_DIR.name) / "target.lock"))

# 6 runs of about 0.1 s each: solo and pi, 3 repetitions, interleaved.
TINY = """
name = "tiny"
repetitions = 3
seed = 7
settle = "10ms"

[[application]]
name = "sum"
criticality = "C"
epsilon = { on = "exec", relative = 1.5 }
victim = { body = "sum", bytes = "64KiB", period = "2ms", jobs = {jobs}, warmup_jobs = 2, cpus = "last" }

[[scenario]]
name = "pi"
enemies = [{ kind = "pi", cpus = "others" }]
"""


def tiny(tmp: Path, jobs: int = 40, name: str = "tiny.toml", **replace) -> Path:
    text = TINY.replace("{jobs}", str(jobs))
    for old, new in replace.items():
        text = text.replace(old, new)
    p = Path(tmp) / name
    p.write_text(text)
    return p


def campaign_dirs(base: Path) -> list[Path]:
    """Finished-creating campaign directories under `base` (not the hidden ones in creation)."""
    if not Path(base).exists():
        return []
    return sorted(d for d in Path(base).iterdir() if d.is_dir() and not d.name.startswith("."))
