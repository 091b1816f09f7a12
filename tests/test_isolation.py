"""Isolation: configurations and presets, cgroups per partition, the memory-bandwidth
regulator, and leaving the machine as found, also after a crash."""

import json
import signal
import subprocess
from pathlib import Path

import pytest

import capabilities
from conftest import needs_root, needs_two_cpus, processes_named, small_plan, wait_for, write_plan, xtalk
from xtalk.config.experiment import load
from xtalk.config.expand import expand
from xtalk.store.jobs import read_job_log


@pytest.fixture
def needs_v1_pids():
    """These tests read the run's groups in the v1 pids hierarchy."""
    if why := capabilities.cgroup_v1("pids"):
        pytest.skip(why)


def _dead(name: str) -> bool:
    """An entry named after an agent pid that no longer runs: a leak. (A live agent's
    entries are legitimate: other xtalk runs may share this machine.)"""
    digits = "".join(ch for ch in name.split("-", 1)[-1] if ch.isdigit())
    return bool(digits) and not Path(f"/proc/{digits}").exists()


def leftover_cgroups() -> list[str]:
    root = Path("/sys/fs/cgroup")
    return [str(d) for ctl in root.iterdir() if ctl.is_dir() for d in ctl.glob("xtalk-*") if _dead(d.name)]


def journals() -> list[str]:
    d = Path("/run/xtalk")
    return sorted(p.name for p in d.glob("journal-*.jsonl") if _dead(p.name)) if d.exists() else []


CONFIGS = """
name = "cfg"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "128KiB"
period = "2ms"
jobs = 30
cpus = "last"
policy = "fifo"
priority = 80
reservation = { runtime = "500us" }
[[scenario]]
name = "pi"
enemies = [{ kind = "pi", cpus = "others", per_cpu = true }]
[[configuration]]
name = "own"
[[configuration]]
name = "rr"
preset = "rr"
[[configuration]]
name = "dl"
preset = "deadline"
[[configuration]]
name = "rrcg"
preset = "rr+cgroups"
[[configuration]]
name = "dlcg"
preset = "deadline+cgroups"
"""


def test_presets_set_what_seed_000_compares(tmp_path, facts):
    f = tmp_path / "c.toml"
    f.write_text(CONFIGS)
    skipped = []
    runs = {(r.configuration, r.scenario): r.plan for r in expand(load(f), facts, skip_unavailable=True, skipped=skipped)}
    own, rr, dl = runs[("own", "pi")], runs[("rr", "pi")], runs[("dl", "pi")]
    assert own.victim.sched.policy == "fifo" and own.enemies[0].sched.policy == "other"
    assert rr.victim.sched.policy == "rr" and rr.victim.sched.priority == 80 and rr.enemies[0].sched.priority == 50
    assert dl.victim.sched.policy == "deadline" and dl.victim.sched.runtime_ns == 500_000 and dl.victim.placement.cpus is None
    assert all(e.sched.policy == "deadline" and e.placement.cpus is None for e in dl.enemies)
    if ("rrcg", "pi") in runs:
        cg = runs[("rrcg", "pi")]
        groups = {g.name: g for g in cg.groups}
        assert groups["victim"].rt_runtime_us == 500 and groups["victim"].rt_period_us == 10_000
        assert groups["victim"].rt_runtime_us + groups["enemies"].rt_runtime_us == 9_500, "5 % left to the system"
        assert cg.victim.group == "victim" and all(e.group == "enemies" for e in cg.enemies)
    names = [s["configuration"] for s in skipped]
    if not facts.environment["capabilities"]["deadline_group_servers"]["available"]:
        # The reason: no group servers in this kernel, or (v2 without the cpu controller) no
        # cpu controller to hold the groups at all.
        why = skipped[names.index("dlcg")]["reason"]
        assert "Abeni" in why if not capabilities.cgroup_v1("cpu") else "cpu controller" in why, why
    # rr+cgroups needs RT group scheduling (v1): without it, it is skipped with the reason.
    assert ("rrcg" in names) == bool(capabilities.rt_group()), skipped


def test_unavailable_configuration_is_bad_input_unless_skipped(tmp_path, facts, needs_rt_group, needs_fifo):
    if facts.environment["capabilities"]["deadline_group_servers"]["available"]:
        pytest.skip("this kernel offers SCHED_DEADLINE group servers")
    f = tmp_path / "c.toml"
    f.write_text(CONFIGS)
    out = xtalk("plan", f)
    assert out.returncode == 2 and "configuration[4] 'dlcg'" in out.stderr and "--skip-unavailable" in out.stderr
    out = xtalk("plan", f, "--skip-unavailable")
    assert out.returncode == 0 and "dlcg skipped" in out.stdout


@needs_root
@needs_two_cpus
def test_configurations_run_side_by_side(tmp_path, needs_fifo, needs_rr, needs_deadline):
    f = tmp_path / "c.toml"
    f.write_text(CONFIGS)
    out = xtalk("run", f, "--results", tmp_path / "res", "--skip-unavailable")
    assert out.returncode == 0, out.stderr
    (res,) = (tmp_path / "res").iterdir()
    table = json.loads((res / "summary.json").read_text())
    got = {(r["configuration"], r["scenario"]) for r in table}
    assert {("own", "solo"), ("own", "pi"), ("rr", "solo"), ("dl", "pi")} <= got
    assert all(r["runs_ok"] == r["runs"] for r in table), table
    skipped = json.loads((res / "experiment.json").read_text())["skipped_configurations"]
    assert all(s["configuration"] == "dlcg" or (s["configuration"] == "rrcg" and capabilities.rt_group())
               for s in skipped), skipped
    assert not leftover_cgroups() and not journals()


@needs_root
def test_groups_exist_during_the_run_and_vanish_after(agent, tmp_path, facts, needs_rr, needs_rt_group, needs_v1_pids):
    plan = small_plan(jobs=400, period_ns=5_000_000, sched={"policy": "rr", "priority": 60})
    plan["groups"] = [{"name": "victim", "rt_runtime_us": 2000, "rt_period_us": 10000, "pids_max": 16, "cpu_weight": 200},
                      {"name": "enemies", "pids_max": 16, "freezable": True}]
    plan["victim"]["group"] = "victim"
    plan["enemies"] = [{"name": "e", "load": {"kind": "pi"}, "group": "enemies"}]
    out = tmp_path / "run"
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", out])
    victim = wait_for(lambda: processes_named(("xt-victim",)), timeout=20)
    assert victim
    cg = Path(f"/proc/{victim[0][0]}/cgroup").read_text()
    assert f"xtalk-{p.pid}/victim" in cg
    assert Path(f"/sys/fs/cgroup/pids/xtalk-{p.pid}/victim/pids.max").read_text().strip() == "16"
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    assert not leftover_cgroups() and not journals()
    meta = json.loads((out / "run.json").read_text())
    assert meta["configuration"]["restored"] and len(meta["configuration"]["groups"]) == 2


@needs_root
@needs_two_cpus
def test_regulator_caps_a_read_enemy(agent, tmp_path, facts, needs_fifo):  # the regulator runs at FIFO
    budget = 20_000_000  # 20 MB per 10 ms: 2 GB/s
    plan = small_plan(jobs=150, period_ns=10_000_000, cpus=[facts.online_cpus[-1]])
    plan["enemies"] = [{"name": "r", "load": {"kind": "read", "bytes": 64 << 20}, "placement": {"cpus": [facts.online_cpus[0]]}}]
    plan["housekeeping_cpus"] = [facts.online_cpus[0]]
    plan["regulator"] = {"period_us": 10_000, "budget_bytes": budget}
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan), "--out", tmp_path / "run"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    rate = meta["enemies"][0]["window_rate"] / (budget / 0.01)
    reg = meta["regulator"]
    assert rate < 1.15, f"achieved {rate:.2f} × the budget"
    assert reg["accounting"] == "cooperative" and reg["throttles"] > 20 and reg["cpu_ns"] > 0
    assert reg["overshoot_bytes_max"] < budget / 4
    # On a busy machine the enemy may not even reach its budget; where it did in most
    # periods, it must have had nearly all of it.
    if reg["throttles"] > 0.8 * reg["periods"]:
        assert rate > 0.8, f"throttled in {reg['throttles']}/{reg['periods']} periods but achieved {rate:.2f} × the budget"


@needs_root
def test_killed_run_is_restored_by_the_next_start(agent, tmp_path, facts, needs_v1_pids, needs_fifo):  # regulator: FIFO
    """SIGKILL the agent in the middle of a regulated, cgroup-using, IRQ-steering run: its
    changes stay (it could not undo them); the next `xtalk run` restores everything first."""
    irqs = {p: p.read_text().strip() for p in Path("/proc/irq").glob("*/smp_affinity_list")}
    plan = small_plan(jobs=2000, period_ns=5_000_000)
    plan["groups"] = [{"name": "e", "pids_max": 32, "freezable": True}]
    plan["enemies"] = [{"name": "r", "load": {"kind": "read", "bytes": 8 << 20}, "group": "e"}]
    plan["housekeeping_cpus"] = [facts.online_cpus[0]]
    plan["steer_irqs"] = True
    plan["regulator"] = {"period_us": 10_000, "budget_bytes": 5_000_000, "throttle": "freeze"}
    out = tmp_path / "run"
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", out])
    assert wait_for(lambda: out.joinpath("jobs.bin").exists() and len(read_job_log(out / "jobs.bin")) > 20, timeout=20)
    assert Path(f"/run/xtalk/journal-p{p.pid}.jsonl").exists() and list(Path("/sys/fs/cgroup/pids").glob(f"xtalk-{p.pid}"))
    p.kill()
    p.wait()
    # Children die with the agent, except one caught frozen by the regulator: a frozen task
    # cannot die until thawed, which the next start does.
    assert wait_for(lambda: {n for _, n in processes_named()} <= {"xt-enemy-0"}, timeout=10), processes_named()
    assert leftover_cgroups(), "a killed agent cannot undo its changes"
    exp = tmp_path / "e.toml"
    exp.write_text('name = "after"\nrepetitions = 1\nsettle = "10ms"\n[victim]\nbody = "sum"\nbytes = "64KiB"\nperiod = "2ms"\njobs = 5\n')
    # Any agent's start restores dead agents' journals: on a machine shared with other xtalk
    # runs, one of theirs may have done it first (the machine is restored all the same).
    pending = Path(f"/run/xtalk/journal-p{p.pid}.jsonl").exists()
    run = xtalk("run", exp, "--results", tmp_path / "res")
    assert run.returncode == 0, run.stderr
    assert "restored after an earlier run that died" in run.stdout or not pending, run.stdout
    assert not leftover_cgroups() and not journals()
    assert not processes_named()
    after = {p: p.read_text().strip() for p in Path("/proc/irq").glob("*/smp_affinity_list")}
    assert {k: v for k, v in after.items() if k in irqs} == {k: v for k, v in irqs.items() if k in after}


@needs_root
def test_recover_undoes_a_dead_agents_journal(agent, tmp_path):
    target = tmp_path / "setting"
    target.write_text("new")
    made = tmp_path / "made"
    made.mkdir()
    Path("/run/xtalk").mkdir(exist_ok=True)
    dead = 4_000_000 - 7  # above pid_max on most systems: certainly not running
    j = Path(f"/run/xtalk/journal-{dead}.jsonl")
    j.write_text(json.dumps({"op": "mkdir", "path": str(made)}) + "\n"
                 + json.dumps({"op": "write", "path": str(target), "old": "old", "new": "new"}) + "\n" + '{"op": "wri')
    out = subprocess.run([agent, "recover"], capture_output=True, text=True)
    # One line per change; a "setting" that is not a kernel file is never written (refused,
    # and the entry dropped: the journal is not retried forever).
    assert out.returncode == 0 and f"agent {dead}: removed directory {made}" in out.stdout, out.stdout
    assert f"agent {dead}: refused: did not write {target}" in out.stdout
    assert target.read_text() == "new" and not made.exists() and not j.exists()


@needs_root
def test_regulator_is_refused_where_fifo_is(agent, tmp_path):
    """The regulator runs at SCHED_FIFO: where the kernel grants it a regulated plan checks;
    in a cgroup without RT runtime (a container; tests/hostile/no_rt.sh) it is refused before
    anything starts, naming the regulator and the cause."""
    plan = small_plan()
    plan["enemies"] = [{"name": "r", "load": {"kind": "read", "bytes": 1 << 20}}]
    plan["regulator"] = {"period_us": 10_000, "budget_bytes": 1_000_000}
    out = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    line = out.stderr.strip()
    if not capabilities.policy("fifo"):
        assert out.returncode == 0, line
    else:
        assert out.returncode == 2 and "\n" not in line and "plan: regulator" in line and "SCHED_FIFO" in line, line


@pytest.mark.parametrize("mutate,needle", [
    (lambda p: p.update(regulator={"period_us": 10_000, "budget_bytes": 0}), "regulator.budget_bytes"),
    (lambda p: p.update(regulator={"period_us": 10_000, "budget_bytes": 1000}), "no enemy to regulate"),
    (lambda p: p.update(groups=[{"name": "g", "cpus": []}]), "groups[0].cpus"),
    (lambda p: p["victim"].update(group="nope"), "victim.group"),
    (lambda p: p.update(steer_irqs=True), "steer_irqs"),
    (lambda p: p.update(enemies=[{"name": "e", "load": {"kind": "pi"}}],
                        regulator={"period_us": 10_000, "budget_bytes": 1000, "event": "bogus-event", "source": "hardware"}),
     "regulator.event"),
    (lambda p: p.update(enemies=[{"name": "e", "load": {"kind": "pi"}}],
                        regulator={"period_us": 10_000, "budget_bytes": 1000, "throttle": "freeze"}), "freezable"),
])
def test_inconsistent_settings_are_refused(agent, tmp_path, mutate, needle):
    plan = small_plan()
    mutate(plan)
    out = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    assert out.returncode == 2 and needle in out.stderr, out.stderr


def test_hardware_accounting_needs_the_event(agent, tmp_path, facts):
    """Hardware accounting counts a PMU event per enemy; where the event cannot be counted the
    plan is refused, naming what the machine offers."""
    plan = small_plan()
    plan["enemies"] = [{"name": "e", "load": {"kind": "read", "bytes": 1 << 20}}]
    plan["regulator"] = {"period_us": 10_000, "budget_bytes": 1_000_000, "source": "hardware"}
    out = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)
    if out.returncode == 0:
        assert facts.environment["capabilities"]["pmu"]["core_pmu"], "accepted only where a PMU counts the event"
    else:
        assert out.returncode == 2 and "regulator.source" in out.stderr and "cooperative" in out.stderr, out.stderr
