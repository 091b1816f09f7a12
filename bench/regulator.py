"""bench/regulator: sweep memory budgets for a read enemy (10 ms regulation period,
cooperative accounting) and print, per budget, the achieved enemy bandwidth over the budget
(goal: within ±10 %) and the victim's slowdown against the same enemy unregulated, all in one
interleaved experiment."""

import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rich.console import Console  # noqa: E402

from xtalk import store  # noqa: E402
from xtalk.runner import run_experiment  # noqa: E402

BUDGETS_GBPS = [0.5, 1, 2, 4]

EXPERIMENT = """
name = "regulator-bench"
repetitions = 3
seed = 11
settle = "100ms"
[victim]
body = "chase"
bytes = "llc/4"
period = "10ms"
jobs = 200
cpus = "last"
policy = "fifo"
priority = 90
lock_memory = true
[[scenario]]
name = "read"
enemies = [{{ kind = "read", bytes = "4*llc", cpus = "others", per_cpu = true }}]
[[configuration]]
name = "unregulated"
{configs}
"""


def main() -> int:
    configs = "\n".join(f'[[configuration]]\nname = "{b}GBps"\nhousekeeping_cpus = "first"\n'
                        f'regulator = {{ period = "10ms", bandwidth = "{b}GB/s" }}\n' for b in BUDGETS_GBPS)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "regulator.toml"
        f.write_text(EXPERIMENT.format(configs=configs))
        res = run_experiment(f, Path(d) / "res", Console(file=io.StringIO()))
        runs = store.open(res).runs()
        table = {(r["configuration"], r["scenario"]): r for r in json.loads((res / "summary.json").read_text())}
        base = table[("unregulated", "read")]
        free = runs[(runs.configuration == "unregulated") & (runs.scenario == "read")]
        free_rate = sum(e["window_rate"] for es in free.enemies for e in es) / len(free)
        print(f"unregulated read enemy: {free_rate / 1e9:.2f} GB/s; victim median job {base['median_exec_ms']:.3f} ms")
        print(f"{'budget':>10} {'achieved':>10} {'ratio':>7} {'victim median ms':>17} {'slowdown vs unregulated':>24}")
        for b in BUDGETS_GBPS:
            name = f"{b}GBps"
            sel = runs[(runs.configuration == name) & (runs.scenario == "read")]
            rate = sum(e["window_rate"] for es in sel.enemies for e in es) / len(sel)
            row = table[(name, "read")]
            print(f"{b:>7.1f} GB/s {rate / 1e9:>7.2f} GB/s {rate / (b * 1e9):>7.3f} {row['median_exec_ms']:>17.3f} "
                  f"{row['median_exec_ms'] / base['median_exec_ms']:>24.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
