"""Failure-propagation enemies: each fault runs under its hard limit beside a victim, the
run completes, each counts its work, nothing is left behind (processes, files); the
limits are checked before anything starts; the containment verdict compares with solo."""

import json
import os
import subprocess

import pandas as pd
import pytest

from conftest import needs_two_cpus, processes_named, small_plan, write_plan, xtalk
from xtalk.report.containment import verdicts

FAULTS = {
    "memhog": ({"kind": "memhog", "bytes": 32 << 20}, "bytes"),
    "fdexhaust": ({"kind": "fdexhaust", "fds": 128}, "descriptors"),
    "forkbomb": ({"kind": "forkbomb", "max_procs": 8}, "forks"),
    "diskfill": ({"kind": "diskfill", "bytes": 4 << 20}, "bytes"),
    "syscallstorm": ({"kind": "syscallstorm"}, "syscalls"),
    "crashloop": ({"kind": "crashloop"}, "crashes"),
}


@needs_two_cpus
def test_every_fault_runs_under_its_limit_and_leaves_nothing(agent, tmp_path, facts):
    cpus = facts.online_cpus
    fill_dir = tmp_path / "fill"
    fill_dir.mkdir()
    enemies = []
    for name, (load, _) in FAULTS.items():
        load = dict(load, dir=str(fill_dir)) if name == "diskfill" else load
        enemies.append({"name": name, "load": load, "placement": {"cpus": [cpus[0]]}})
    plan = small_plan(jobs=100, period_ns=4_000_000, cpus=[cpus[-1]], enemies=enemies)
    out = tmp_path / "run"
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", out], capture_output=True, text=True, timeout=60)
    meta = json.loads((out / "run.json").read_text())
    assert p.returncode == 0 and meta["status"] == "completed", meta["reason"]
    assert meta["notes"] == [], "no fault enemy died of its own fault"
    for e in meta["enemies"]:
        assert e["setup_error"] is None and e["unit"] == FAULTS[e["name"]][1]
        assert e["ops"] > 0, e
    assert not processes_named(("xt-enemy", "xt-forkbomb", "xt-crashloop", "xt-victim"))
    assert list(fill_dir.iterdir()) == [], "the disk-fill file is unnamed: nothing stays behind"


@pytest.mark.parametrize("load,field,hint", [
    ({"kind": "memhog", "bytes": 1 << 50}, "enemies[0].load.bytes", "half the available memory"),
    ({"kind": "forkbomb", "max_procs": 100_000}, "enemies[0].load.max_procs", "between 1 and 256"),
    ({"kind": "fdexhaust", "fds": 4}, "enemies[0].load.fds", "between 16 and 65536"),
    ({"kind": "diskfill", "bytes": 1 << 20, "dir": "/no/such/dir"}, "enemies[0].load.dir", "not a directory"),
    ({"kind": "diskfill", "bytes": 1 << 60}, "enemies[0].load.bytes", "half the free space"),
])
def test_limits_are_checked_first(agent, tmp_path, load, field, hint):
    plan = small_plan(enemies=[{"name": "f", "load": load}])
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    line = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in line and line.startswith(f"xtalk-agent: plan: {field}") and hint in line, line


def test_verdicts_against_solo_run_by_run():
    runs = pd.DataFrame({"scenario": ["solo", "solo", "a", "b", "b", "c", "d", "d"],
                         "status": ["completed"] * 5 + ["failed", "completed", "completed"],
                         "reason": [None] * 5 + ["victim killed", None, None],
                         "enemies": [[], [], [{"kind": "memhog", "ops": 5, "unit": "bytes"}], [], [], [], [], []]})

    def run(rid, scenario, slow=0, missed=0):
        return pd.DataFrame({"run_id": rid, "scenario": scenario, "missed": [True] * missed + [False] * (100 - missed),
                             "response_ns": [9_000_000] * slow + [1_000_000] * (100 - slow)})
    jobs = pd.concat([run("s1", "solo"), run("s2", "solo", missed=1), run("a1", "a", slow=1),
                      run("b1", "b", slow=5, missed=3), run("b2", "b", slow=6, missed=4), run("c1", "c"),
                      run("d1", "d", slow=5), run("d2", "d")])
    v = verdicts(runs, jobs, tolerance=1.5).set_index("scenario")
    assert v.loc["a", "verdict"] == "contained" and v.loc["a", "faults"] == "memhog (5 bytes)"
    assert v.loc["b", "verdict"] == "propagated" and "every run misses more" in v.loc["b", "why"] and "p99" in v.loc["b", "why"]
    assert v.loc["c", "verdict"] == "propagated" and "victim killed" in v.loc["c", "why"]
    assert v.loc["d", "verdict"] == "contained", "one noisy run out of two is not propagation"
    with pytest.raises(ValueError):
        verdicts(runs[runs.scenario != "solo"], jobs)
