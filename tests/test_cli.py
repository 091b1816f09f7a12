"""Commands that only read: sysinfo and plan."""

import json

from conftest import ROOT, xtalk


def test_sysinfo_table_names_what_matters():
    out = xtalk("sysinfo")
    assert out.returncode == 0, out.stderr
    for item in ("kernel", "caches", "hardware PMU", "tracefs", "cgroup v1 controllers", "RT group scheduling", "SCHED_DEADLINE"):
        assert item in out.stdout


def test_sysinfo_json_is_the_environment():
    env = json.loads(xtalk("sysinfo", "--json").stdout)
    assert {"kernel", "cpu", "capabilities", "virtualization"} <= env.keys()
    assert "task-clock" in env["capabilities"]["pmu"]["countable"]


def test_plan_estimates_without_running(tmp_path):
    out = xtalk("plan", ROOT / "examples" / "quickstart.toml", "--show")
    assert out.returncode == 0, out.stderr
    assert "9 runs" in out.stdout
    assert '"run_id"' in out.stdout and not (tmp_path / "results").exists()
