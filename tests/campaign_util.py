"""Small campaigns shared by the campaign tests (kept tiny: the machine has 2 shared CPUs)."""

from __future__ import annotations

from pathlib import Path

# The campaigns take the machine-wide lock like every other run. (A lock of the test run's
# own, set in the environment when this module was imported, held for the whole session:
# every test's runs then ran beside other sessions' and beside `make demo`, whose solo
# victim was woken up to 13 ms late and preempted by their real-time tasks on its CPU.)

# 6 runs of about 0.1 s each: solo and pi, 3 repetitions, interleaved.
TINY = """
name = "tiny"
repetitions = 3
seed = 7
settle = "10ms"

[[application]]
name = "sum"
criticality = "C"
epsilon = { metric = "exec", statistic = "max", bound = "1.5x" }
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = {jobs}
warmup_jobs = 2
cpus = "last"

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
