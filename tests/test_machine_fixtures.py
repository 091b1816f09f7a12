"""Machines we do not have: plans, checks and estimates against recorded machine fixtures
(tests/fixtures/machines/, `XTALK_MACHINE=FILE` / `--machine FILE`), and `xtalk sysinfo
--record` writing one from this machine. Nothing here starts a run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, small_plan, write_plan, xtalk
from xtalk.calibrate_work import PASS_JOBS, PASS_WARMUP
from xtalk.runner import COMMAND_OVERHEAD_S, RUN_OVERHEAD_S

MACHINES = ROOT / "tests" / "fixtures" / "machines"
QUICKSTART = ROOT / "examples" / "quickstart.toml"
CONTAINER = MACHINES / "xeon16-cgroup2-container.json"
#: fixture -> (online CPUs, last-level cache bytes) as the fixture's sources give them.
KNOWN = {
    "cortex-a53-4core.json": (4, 1 << 20),  # the shared L2 is the last level
    "xeon16-cgroup2-container.json": (16, 300 << 20),
    "x86-2socket-64core.json": (64, 32 << 20),
    "dev-2vcpu-amd.json": (2, None),  # recorded: whatever this machine kind reported
}


def fixture_doc(name: str) -> dict:
    return json.loads((MACHINES / name).read_text())


def llc_of(doc: dict) -> int:
    return max((c for c in doc["cpu"]["caches"] if c["type"] == "Unified"), key=lambda c: c["level"])["size_bytes"]


def plans(stdout: str) -> dict[str, dict]:
    """The `--show` plans by scenario."""
    out, dec = {}, json.JSONDecoder()
    text = stdout[stdout.index("\n{") + 1:]
    while text.strip():
        p, end = dec.raw_decode(text)
        out[p["labels"]["scenario"]] = p
        text = text[end:].lstrip()
    return out


def estimate(stdout: str) -> int:
    line = next(l for l in stdout.splitlines() if " runs, about " in l)
    return int(line.split(" runs, about ")[1].split(" s")[0])


def touch_of(plan: dict) -> float:
    """The buffers' set-up of a plan shown by `--show`, by the estimate's rule."""
    from xtalk.campaign.estimate import touch_seconds
    from xtalk.plan import Plan
    return touch_seconds(Plan.model_validate(plan))


def alone_touch_of(plan: dict) -> float:
    """The same for the pass of its first enemy alone (enemy_alone: a stand-in victim)."""
    from xtalk.enemy_alone import _alone_plan
    from xtalk.plan import Plan
    p = Plan.model_validate(plan)
    return touch_of(_alone_plan(p, p.enemies[0], "x").model_dump(mode="json"))


def quickstart_variant(tmp_path: Path, **replace: str) -> Path:
    text = QUICKSTART.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    f = tmp_path / "quickstart.toml"
    f.write_text(text)
    return f


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_quickstart_resolves_to_the_fixtures_caches_and_cpus(name, tmp_path):
    doc = fixture_doc(name)
    ncpu, llc = KNOWN[name]
    llc = llc or llc_of(doc)
    assert (doc["cpu"]["count"], llc_of(doc)) == (ncpu, llc), "the fixture no longer says what its source says"
    exp = QUICKSTART
    if name == CONTAINER.name:  # FIFO is refused there (test below); the same experiment under SCHED_OTHER
        exp = quickstart_variant(tmp_path, **{'policy = "fifo"\npriority = 90': 'policy = "other"'})
    r = xtalk("plan", "--machine", MACHINES / name, exp, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"fixture {MACHINES / name}" in r.stdout
    assert "calibrated on the target at run time" in r.stdout
    p = plans(r.stdout)
    assert set(p) == {"solo", "read", "chase"}
    solo = p["solo"]["victim"]
    assert solo["body"]["bytes"] == llc // 4  # bytes = "llc/4" from the fixture's last level
    assert solo["placement"]["cpus"] == [ncpu - 1]  # cpus = "last"
    read = p["read"]["enemies"]
    assert [e["placement"]["cpus"] for e in read] == [[c] for c in range(ncpu - 1)]  # "others", one per CPU
    assert {e["load"]["bytes"] for e in read} == {4 * llc}
    # 15 runs of settle + (warm-up + jobs) periods + the per-run cost, the three calibration
    # passes of victim.utilization (a fixture calibrates nothing, but the run will), the
    # feasibility pass of the one configuration, each as long as a calibration pass, its
    # three noise passes of 1.5 s of periods (150 jobs of 10 ms), and one pass of each enemy
    # alone (the per-CPU copies of read share one, as do those of chase), and the command's own cost.
    # Every run and pass also touches its processes' buffers first: the victim's alone in a
    # solo pass; with the enemies, all at once (campaign/estimate.py touch_seconds).
    from xtalk.enemy_alone import PASS_JOBS as ALONE_JOBS, PASS_PERIOD_NS
    v = p["solo"]["victim"]
    touch = {name: touch_of(plan) for name, plan in p.items()}
    touch["solo"] = touch_of({**p["solo"], "enemies": []})
    alone_touch = {name: alone_touch_of(plan) for name, plan in p.items() if plan["enemies"]}
    base_s = p["solo"]["settle_ms"] / 1e3 + (v["jobs"] + v["warmup_jobs"]) * v["period_ns"] / 1e9 + RUN_OVERHEAD_S
    runs_s = 5 * sum(base_s + touch[name] for name in p)
    pass_s = p["solo"]["settle_ms"] / 1e3 + (PASS_JOBS + PASS_WARMUP) * v["period_ns"] / 1e9 + RUN_OVERHEAD_S + touch["solo"]
    noise_s = p["solo"]["settle_ms"] / 1e3 + (150 + PASS_WARMUP) * v["period_ns"] / 1e9 + RUN_OVERHEAD_S + touch["solo"]
    alone_s = sum(p["solo"]["settle_ms"] / 1e3 + (ALONE_JOBS + 2) * PASS_PERIOD_NS / 1e9 + RUN_OVERHEAD_S + alone_touch[name]
                  for name in ("read", "chase"))
    assert estimate(r.stdout) == round(COMMAND_OVERHEAD_S + runs_s + 3 * pass_s + pass_s + 3 * noise_s + alone_s)
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "quickstart.toml"])  # nothing written


def test_fifo_is_refused_in_the_containers_cgroup_and_deadline_plans(tmp_path):
    r = xtalk("plan", "--machine", CONTAINER, QUICKSTART, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line, line
    assert "victim.sched.policy" in line and "SCHED_FIFO refused" in line
    assert "/sys/fs/cgroup/process_api/38ef0e9a5795cf1487e32004c4bc87d3" in line  # the fixture's group, not ours
    assert "no real-time runtime" in line and "'deadline'" in line
    # SCHED_DEADLINE must not be pinned to a subset: the victim runs unpinned, enemies on CPU 0.
    dl = quickstart_variant(tmp_path, **{'policy = "fifo"\npriority = 90': 'policy = "deadline"\nreservation = { runtime = "5ms" }',
                                         'cpus = "last"\n': "", 'cpus = "others"': 'cpus = "first"'})
    r = xtalk("plan", "--machine", CONTAINER, dl, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert plans(r.stdout)["solo"]["victim"]["sched"] == {"policy": "deadline", "runtime_ns": 5_000_000,
                                                         "deadline_ns": 10_000_000, "period_ns": 10_000_000}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_characterize_quick_plans_on_each_fixture(name, tmp_path):
    ncpu = KNOWN[name][0]
    r = xtalk("characterize", "--quick", "--plan", "--machine", MACHINES / name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    counts = [1, ncpu - 1] if ncpu - 1 > 2 else list(range(1, ncpu))
    from xtalk.characterize import QUICK_ENEMIES
    scenarios = 1 + len(QUICK_ENEMIES) * len(counts)  # solo + the quick enemies (the control among them) × copies
    probes = [l for l in r.stdout.splitlines() if l.startswith("probe ")]
    assert len(probes) == 6, r.stdout
    for line in probes:
        assert f": {4 * scenarios} runs ({scenarios} scenarios × 4)" in line, line
        assert f"victim on CPU {ncpu - 1}," in line, line
    total = sum(int(l.rsplit("about ", 1)[1].split(" s")[0]) for l in probes)
    last = r.stdout.strip().splitlines()[-1]
    assert f"× {ncpu}: 6 probes, about " in last and "nothing started" in last, last
    assert abs(int(last.split("about ")[1].split(" s")[0]) - total) <= 6  # the rounding of six terms
    assert list(tmp_path.iterdir()) == []  # no results directory, no experiment files


def test_record_round_trips(tmp_path):
    f = tmp_path / "this.json"
    r = xtalk("sysinfo", "--record", f)
    assert r.returncode == 0, r.stderr
    doc = json.loads(f.read_text())
    assert doc["facts_version"] == 1 and doc["fixture"]["hand_made"] is False
    assert set(doc["policies"]) == {"fifo", "rr", "deadline", "nice"} and "allowed_cpus" in doc["process"]
    live = xtalk("plan", QUICKSTART, "--show")
    recorded = xtalk("plan", "--machine", f, QUICKSTART, "--show")
    assert (live.returncode, recorded.returncode) == (0, 0), live.stderr + recorded.stderr
    assert plans(live.stdout) == plans(recorded.stdout)  # the same resolution, CPU for CPU, byte for byte
    assert estimate(live.stdout) == estimate(recorded.stdout)
    shown = xtalk("sysinfo", "--machine", f, "--json")
    assert json.loads(shown.stdout) == doc  # the agent hands the fixture back as the machine's facts


def test_agent_checks_against_the_fixture_and_refuses_to_run_it(agent, tmp_path):
    env = {**os.environ, "XTALK_MACHINE": str(MACHINES / "x86-2socket-64core.json")}
    # CPU 40 and hardware cycles exist on the 2-socket fixture, not necessarily here.
    plan = write_plan(tmp_path, small_plan(cpus=[40], counters=[{"event": "cycles"}]))
    ok = subprocess.run([str(agent), "check", str(plan)], capture_output=True, text=True, env=env)
    assert (ok.returncode, ok.stdout.strip()) == (0, "ok"), ok.stderr
    env_a53 = {**env, "XTALK_MACHINE": str(MACHINES / "cortex-a53-4core.json")}
    plan40 = write_plan(tmp_path, small_plan(cpus=[40]), "p40.json")
    bad = subprocess.run([str(agent), "check", str(plan40)], capture_output=True, text=True, env=env_a53)
    assert bad.returncode == 2 and "CPU 40 does not exist or is offline; online CPUs: 0-3" in bad.stderr, bad.stderr
    plan3 = write_plan(tmp_path, small_plan(cpus=[3], counters=[{"event": "cycles"}]), "p3.json")
    bad = subprocess.run([str(agent), "check", str(plan3)], capture_output=True, text=True, env=env_a53)
    assert bad.returncode == 2 and "victim.counters[0].event" in bad.stderr and "'cycles' cannot be counted" in bad.stderr, bad.stderr
    out = tmp_path / "out"
    run = subprocess.run([str(agent), "run", str(plan), "--out", str(out)], capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "for planning and checking only" in run.stderr and "\n" not in run.stderr.strip(), run.stderr
    assert not out.exists()


def test_agent_check_of_an_array_names_the_refused_plan_and_whether_the_machine_refused_it(agent, tmp_path):
    """`check` of many plans prints the refused plan's place, field and kind as one JSON line
    on stdout (its stderr line as before): the host maps it to a configuration."""
    env = {**os.environ, "XTALK_MACHINE": str(CONTAINER)}

    def check(*plans: dict) -> tuple[subprocess.CompletedProcess, dict]:
        p = subprocess.run([str(agent), "check", "-"], input=json.dumps(list(plans)), capture_output=True, text=True, env=env)
        assert p.returncode == 2 and "\n" not in p.stderr.strip(), p.stdout + p.stderr
        return p, json.loads(p.stdout)

    fifo = small_plan(sched={"policy": "fifo", "priority": 80})
    p, d = check(small_plan(), fifo)
    assert (d["plan"], d["field"], d["machine"]) == (1, "victim.sched.policy", True), d
    assert p.stderr.strip() == f"xtalk-agent: plan: victim.sched.policy: {d['message']}"
    _, d = check(small_plan(), small_plan(), small_plan(cpus=[99]), fifo)
    assert (d["plan"], d["field"], d["machine"]) == (2, "victim.placement.cpus[0]", False), d
    _, d = check({"version": 1})
    assert (d["plan"], d["machine"]) == (0, False), d


def test_xtalk_run_refuses_a_fixture_before_anything_starts(tmp_path):
    r = xtalk("run", QUICKSTART, "--results", tmp_path / "results",
              env={**os.environ, "XTALK_MACHINE": str(CONTAINER)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "machine fixture, for planning only" in r.stderr and "\n" not in r.stderr.strip()
    assert not (tmp_path / "results").exists()


def test_a_broken_fixture_is_one_line_naming_the_field(tmp_path):
    doc = fixture_doc("cortex-a53-4core.json")
    del doc["process"]["mem_available_bytes"]
    f = tmp_path / "broken.json"
    f.write_text(json.dumps(doc))
    r = xtalk("plan", "--machine", f, QUICKSTART)
    assert r.returncode == 2 and "process.mem_available_bytes is missing" in r.stderr and "xtalk sysinfo --record" in r.stderr, r.stderr
    assert "\n" not in r.stderr.strip()
    r = xtalk("plan", "--machine", tmp_path / "absent.json", QUICKSTART)
    assert r.returncode == 2 and "--machine:" in r.stderr and "is not a file" in r.stderr, r.stderr


def test_hand_made_fixtures_say_so():
    for name in KNOWN:
        origin = fixture_doc(name)["fixture"]
        assert origin["hand_made"] is (name != "dev-2vcpu-amd.json"), name
        assert origin["source"], name


def test_cgroup_layout_comes_from_the_fixture(agent, tmp_path):
    """A group with RT runtime needs the v1 cpu controller: this machine has it, the cgroup-v2
    board does not, and the check says so for the board."""
    plan = small_plan(cpus=[1])
    plan["groups"] = [{"name": "rt", "rt_runtime_us": 500000}]
    plan["victim"]["group"] = "rt"
    f = write_plan(tmp_path, plan)
    board = subprocess.run([str(agent), "check", str(f)], capture_output=True, text=True,
                           env={**os.environ, "XTALK_MACHINE": str(MACHINES / "cortex-a53-4core.json")})
    assert board.returncode == 2, board.stderr
    assert "groups[0]: this kernel cannot provide it: RT group scheduling (cpu.rt_runtime_us) needs the cgroup v1 cpu controller" in board.stderr
    dev = subprocess.run([str(agent), "check", str(f)], capture_output=True, text=True,
                         env={**os.environ, "XTALK_MACHINE": str(MACHINES / "dev-2vcpu-amd.json")})
    assert (dev.returncode, dev.stdout.strip()) == (0, "ok"), dev.stderr


def test_skip_unavailable_leaves_out_the_configurations_the_containers_cgroup_refuses(tmp_path):
    """The container refuses SCHED_FIFO/RR (its cgroup has no RT runtime): with
    --skip-unavailable those configurations are skipped with the agent's cause, and the
    deadline one is planned; left with none, one line and exit 2."""
    configurations = ROOT / "examples" / "configurations.toml"
    r = xtalk("plan", "--machine", CONTAINER, configurations, "--skip-unavailable", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())  # the console wraps long lines
    for name, policy in (("fifo", "SCHED_FIFO"), ("rr", "SCHED_RR")):
        assert f"configuration {name} skipped: victim.sched.policy: {policy} refused" in out, out
    assert out.count("or use policy 'deadline'") == 2, out
    assert "configuration deadline skipped" not in out
    order = out.split("order: ")[1].split(", ")
    assert order and all("-deadline-" in run for run in order), order
    # Without a runnable configuration: refused as a whole, naming each cause.
    text = configurations.read_text()
    assert '[[configuration]]\nname = "deadline"\npreset = "deadline"\n\n' in text
    none = tmp_path / "no-deadline.toml"
    none.write_text(text.replace('[[configuration]]\nname = "deadline"\npreset = "deadline"\n\n', ""))
    r = xtalk("plan", "--machine", CONTAINER, none, "--skip-unavailable", cwd=tmp_path)
    line = r.stderr.strip()
    assert r.returncode == 2 and "\n" not in line and not r.stdout.strip(), r.stdout + r.stderr
    assert "none of the configurations can run on this machine" in line and "'fifo': victim.sched.policy: SCHED_FIFO refused" in line


def test_a_configuration_whose_enemies_take_a_refused_policy_is_skipped_naming_the_scenario(tmp_path):
    exp = tmp_path / "hog.toml"
    exp.write_text("""name = "hog"
repetitions = 1
[victim]
body = "pi"
iterations = 1000
period = "5ms"
jobs = 5
cpus = "last"
[[scenario]]
name = "read"
enemies = [{ kind = "read", bytes = "1MiB", cpus = "first" }]
[[configuration]]
name = "plain"
[[configuration]]
name = "rt-enemies"
enemies = { policy = "fifo", priority = 50 }
""")
    r = xtalk("plan", "--machine", CONTAINER, exp, "--skip-unavailable", cwd=tmp_path)
    out = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "configuration rt-enemies skipped: scenario 'read': enemies[0].sched.policy: SCHED_FIFO refused" in out, out
    assert out.split("order: ")[1].split(", ") == ["0-plain-solo-r0", "1-plain-read-r0"], out
