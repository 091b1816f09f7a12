"""How long the campaign report takes on 88 small runs (44 cells), and how big it is, against the same
report with one figure per cell (`--cell-figures`, what every report drew before) measured in
the same run.

    PYTHONPATH=src nice .venv/bin/python bench/campaign_report_scale.py [--repetitions 2] [--jobs 200] [--keep DIR]

Synthesizes a campaign (testing/synthetic_campaign.py: the layout `xtalk campaign run` writes,
no agent) shaped like the beck-two-way example: two configurations, a solo, a plain scenario
and a two-way family of 4 × 5 cells, so 44 cells, ``--repetitions`` runs per cell (2: 88 runs)
of ``--jobs`` jobs each. Then runs
`xtalk report DIR` (tables per cell; goal ≤ 20 s and ≤ 3 MB) and `xtalk report DIR
--cell-figures` as subprocesses, with the CSV export, and prints times, sizes (without csv/),
figure counts and the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from xtalk.testing.synthetic_campaign import Family, write_campaign  # noqa: E402

PI = Family("pi", "reservation.runtime", [1, 2, 3, 4], ["1ms", "2ms", "3ms", "4ms", "5ms"])


def planted(conf: str, fam: str, n: int, total: str) -> float:
    return 1.0 if fam == "solo" else 1.0 + 0.05 * n


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def report(root: Path, out: Path, *extra: str) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds, MB without csv/, PNG figures, and the report's own line.
    (CPU time as well: on a shared machine it moves much less than wall time.)"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t, c = time.perf_counter(), _cpu()
    r = subprocess.run([sys.executable, "-m", "xtalk.cli", "report", str(root), "-o", str(out), *extra],
                       capture_output=True, text=True, env=env)
    s, cpu = time.perf_counter() - t, _cpu() - c
    if r.returncode != 0:
        sys.exit(f"xtalk report {' '.join(extra)} failed ({r.returncode}): {r.stderr[-2000:]}")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and "csv" not in p.relative_to(out).parts)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("report:")), "")
    return s, cpu, size / 1e6, len(list(out.rglob("*.png"))), line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="write the campaign and reports here and keep them")
    a = ap.parse_args()
    base = a.keep or Path(tempfile.mkdtemp(prefix="xtalk-campaign-report-"))
    try:
        root = base / "campaign"
        t = time.perf_counter()
        if not (root / "campaign.json").exists():
            write_campaign(root, families=[PI], scenarios={"read": 1.2},
                           slowdown=planted, repetitions=a.repetitions, jobs=a.jobs)
        runs = len(list((root / "runs").iterdir()))
        print(f"campaign: {runs} runs of {a.jobs} jobs (44 cells × {a.repetitions}) in {time.perf_counter() - t:.1f} s; "
              f"{os.cpu_count()} cores")
        s_new, c_new, mb_new, figs_new, line_new = report(root, base / "tables")
        print(f"xtalk report (tables per cell): {s_new:.1f} s wall, {c_new:.1f} s CPU, {mb_new:.2f} MB, {figs_new} figures "
              "(goal ≤ 20 s, ≤ 3 MB)")
        print(f"  {line_new}")
        s_old, c_old, mb_old, figs_old, line_old = report(root, base / "figures", "--cell-figures")
        print(f"xtalk report --cell-figures (one figure per cell): {s_old:.1f} s wall, {c_old:.1f} s CPU, {mb_old:.2f} MB, "
              f"{figs_old} figures")
        print(f"  {line_old}")
        print(f"ratio --cell-figures / tables: wall {s_old / s_new:.1f}×, CPU {c_old / c_new:.1f}×, "
              f"size {mb_old / mb_new:.1f}×")
    finally:
        if a.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
