"""Fuzz every example file (experiments and campaigns) through `xtalk plan`: at least 300
mutants per file (issue 13). Prints one summary line; exits non-zero on any mutant that is
neither a valid plan nor a one-line refusal (exit 2), took over 10 s, or pushed the planning
process past 1 GiB.

    PYTHONPATH=src python bench/fuzz_inputs.py [MUTANTS_PER_FILE] [SEED]
"""

import sys
import tempfile
import time
from pathlib import Path

from xtalk.testing import fuzz

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    per_file = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    sources = fuzz.example_files(ROOT)
    t0 = time.monotonic()
    last = [0.0]

    def progress(rep):
        if time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            print(f"  {len(rep.outcomes)}/{per_file * len(sources)} mutants, {len(rep.failures)} failures", flush=True)

    with tempfile.TemporaryDirectory(prefix="xtalk-fuzz-") as d:
        rep = fuzz.run(sources, per_file, seed, Path(d), progress)
    for o in rep.failures:
        print(f"FAIL {o.source}: {o.what}: {o.verdict}: {o.detail}")
    print(f"{rep.summary()}; {time.monotonic() - t0:.0f} s")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
