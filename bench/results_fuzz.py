"""Corrupt a real results directory every way tests/damage.py knows (every results file
truncated, emptied, bit-flipped, deleted, given wrong JSON types; run directories deleted)
and run every command that reads results on each copy (issue 31). Prints one summary line
(kinds × commands, tracebacks, hangs, silent partial reads); exits non-zero on any case that
is not exit 0 with the damage said, or one line with exit 2.

    PYTHONPATH=src python bench/results_fuzz.py [--base RESULTS_DIR] [--timeout S] [--kinds WORD] [--commands a,b]

Without --base it first runs a small experiment (`xtalk run`, about 20 s; the kernel trace
when the machine allows it) and fuzzes its results. As root the whole matrix takes about
10 minutes on 2 busy vCPUs (`report` is most of it).
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import damage  # noqa: E402 (tests/damage.py)
from test_results_damage import EXPERIMENT, TASKS, TRACE  # noqa: E402


def _base(work: Path) -> Path:
    import capabilities

    f = work / "damage.toml"
    f.write_text(EXPERIMENT + ("" if capabilities.tracefs() else TRACE))
    out = subprocess.run([sys.executable, "-m", "xtalk.cli", "run", str(f), "--results", str(work / "res"),
                          "--skip-feasibility"], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"the base experiment failed: {out.stderr.strip()}")
    (root,) = (work / "res").iterdir()
    return root


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path)
    ap.add_argument("--timeout", type=int, default=180, help="seconds before a case counts as a hang")
    ap.add_argument("--kinds", default="", help="only the kinds whose name holds this")
    ap.add_argument("--commands", default="", help="comma-separated subset of the commands")
    a = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="xtalk-damage-") as d:
        work = Path(d)
        base = a.base or _base(work)
        (work / "tasks.toml").write_text(TASKS)
        kinds = [k for k in damage.KINDS if a.kinds in k.name]
        names = a.commands.split(",") if a.commands else None

        def progress(o):
            if o.verdict != "ok":
                tail = o.output.strip().splitlines()[-1] if o.output.strip() else ""
                print(f"FAIL {o.kind} × {o.command}: {o.verdict} (exit {o.code}): {tail[:300]}", flush=True)

        outcomes = damage.fuzz(base, work, work / "tasks.toml", "write", kinds=kinds, names=names,
                               timeout=a.timeout, progress=progress)
    print(f"{damage.summary(outcomes)}; {time.monotonic() - t0:.0f} s")
    return 1 if any(o.verdict != "ok" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
