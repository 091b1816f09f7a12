"""Commands that only read: sysinfo and plan."""

import json
import re
import shutil

import pytest

import capabilities
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


def test_plan_estimates_without_running(tmp_path, needs_fifo):  # the quickstart's victim is FIFO
    out = xtalk("plan", ROOT / "examples" / "quickstart.toml", "--show")
    assert out.returncode == 0, out.stderr
    import tomllib
    exp = tomllib.loads((ROOT / "examples" / "quickstart.toml").read_text())
    assert f"{exp['repetitions'] * (1 + len(exp['scenario']))} runs" in out.stdout  # solo + scenarios, each repeated
    assert '"run_id"' in out.stdout and not (tmp_path / "results").exists()


def test_calibrate_measures_every_instrument(tmp_path):
    out = xtalk("calibrate", "--pairs", "2000", "--drift", "50ms", "--results", tmp_path)
    assert out.returncode == 0, out.stderr
    (d,) = tmp_path.iterdir()
    doc = json.loads((d / "calibration.json").read_text())
    assert {"clock_gettime MONOTONIC", "clock_gettime THREAD_CPUTIME_ID", "getrusage(RUSAGE_THREAD)", "sched_getcpu"} <= doc["sources"].keys()
    for name, v in doc["sources"].items():
        assert v["n"] == 2000 and v["min"] <= v["median"] <= v["p99"] <= v["max"], name
        assert len(v["sorted_quantiles"]) == 1000
    assert doc["clocks"]["resolution_ns"]["MONOTONIC"] >= 1
    assert (d / "calibration.png").stat().st_size > 0 and (d / "calibration.svg").exists()
    assert "cost of one reading" in out.stdout


def test_calibrate_bad_cpu():
    out = xtalk("calibrate", "--cpu", "4096", "--pairs", "1000")
    assert out.returncode == 2 and "--cpu" in out.stderr


def test_intrusiveness_verdicts():
    from xtalk.analysis.verdict import goal as _verdict
    assert _verdict(0.99, 1.005, 1.01) == "met"
    assert _verdict(1.02, 1.05, 1.01) == "missed"
    assert _verdict(0.95, 1.10, 1.01) == "inconclusive"


@pytest.mark.slow  # a plan per example file, each a Python start-up: make test-slow
def test_every_example_experiment_plans(tmp_path):
    """Each example experiment file is valid and plans on this machine (nothing runs)."""
    from concurrent.futures import ThreadPoolExecutor

    from xtalk.campaign.schema import is_campaign_file

    def plan(f):
        campaign = is_campaign_file(f)
        return xtalk("campaign", "plan", f) if campaign else xtalk("plan", f, "--skip-unavailable")

    files = sorted((ROOT / "examples").glob("*.toml"))
    with ThreadPoolExecutor(4) as pool:  # each is mostly a Python start-up: overlap them
        outs = list(pool.map(plan, files))
    # SCHED_DEADLINE admission is machine-wide: a plan probing its deadline tasks while another
    # file's probe holds bandwidth is refused (rightly: the line says so). Those plan again, alone.
    outs = [plan(f) if out.returncode == 2 and "admission refused" in out.stderr else out for f, out in zip(files, outs)]
    for f, out in zip(files, outs):
        if f.name == "own-app-attach.toml":  # its pid is the reader's to give: 2 (kthreadd) is refused by name
            assert out.returncode == 2 and "victim.body.pid: process 2 is a kernel thread" in out.stderr \
                and "\n" not in out.stderr.strip(), out.stderr
            continue
        missing = [p for p in _external_programs(f) if shutil.which(p) is None]
        if missing:  # a fresh machine lacks the peers (make bench installs them): refused, by name
            assert out.returncode == 2 and missing[0] in out.stderr and "install it" in out.stderr, out.stderr
            continue
        if capabilities.policy("fifo") and out.returncode == 2:
            # A cgroup without RT runtime (a container): an example that needs FIFO or RR is
            # refused in one line naming the policy and the fix.
            assert re.search(r"SCHED_(FIFO|RR) refused", out.stderr) and "\n" not in out.stderr.strip(), out.stderr
            continue
        if capabilities.cgroup_v1("pids") and capabilities.cgroup_v2("pids") and out.returncode == 2:
            # No pids controller anywhere (cgroup2 mounted alone while v1 holds it, as in
            # tests/hostile/cgroup2_only.sh): pids_max is refused in one line naming the fix.
            assert "pids_max" in out.stderr and "pids controller" in out.stderr and "\n" not in out.stderr.strip(), out.stderr
            continue
        assert out.returncode == 0, f"{f.name}: {out.stderr}"


def _external_programs(f):
    """The programs an example's external enemies run (argv[0] of each)."""
    import tomllib
    doc = tomllib.loads(f.read_text())
    return [e["argv"][0] for s in doc.get("scenario", []) for e in s.get("enemies", []) if e.get("kind") == "external"]
