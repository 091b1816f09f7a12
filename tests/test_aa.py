"""A/A: two identical solo scenarios. The reported 95 % CI of their slowdown must include 1
in at least 90 % of experiments; otherwise the CIs are narrower than the machine's noise."""

import io

import pytest
from rich.console import Console

from xtalk.runner import run_experiment

AA = """
name = "aa{k}"
repetitions = 3
seed = {k}
settle = "20ms"
[victim]
body = "sum"
bytes = "128KiB"
period = "2ms"
jobs = 100
warmup_jobs = 5
cpus = "last"
[[scenario]]
name = "solo-b"
"""


@pytest.mark.slow  # 20 experiments: make test-slow
def test_aa_confidence_intervals_cover_one(tmp_path):
    covered = 0
    rows = []
    for k in range(20):
        f = tmp_path / f"aa{k}.toml"
        f.write_text(AA.format(k=k))
        quiet = Console(file=io.StringIO(), width=200)
        # The CIs are the matter here: no feasibility, noise-floor or enemies-alone passes.
        res = run_experiment(f, tmp_path / "res", quiet, skip_feasibility=True)
        import json
        table = {r["scenario"]: r for r in json.loads((res / "summary.json").read_text())}
        b = table["solo-b"]
        assert table["solo"]["runs_ok"] == 3 and b["runs_ok"] == 3
        assert b["slowdown_median_lo"] <= b["slowdown_median"] <= b["slowdown_median_hi"]
        rows.append((round(b["slowdown_median_lo"], 3), round(b["slowdown_median_hi"], 3)))
        covered += b["slowdown_median_lo"] <= 1.0 <= b["slowdown_median_hi"]
    assert covered >= 18, f"CI covered 1 in only {covered}/20 A/A experiments: {rows}"
