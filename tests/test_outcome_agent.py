"""The run outcome is one contract: every kind of run.json the agent writes (completed with
enemies, failed, timed out, set-up refused, interrupted, killed; taskset, command and latency
victims; counters, trace, regulator) fits the host's strict model and its checked-in schema,
and survives the round trip (the model's dump is the file as the agent wrote it)."""

import json
import signal
import subprocess
import time

import jsonschema

from conftest import needs_root, needs_two_cpus, small_plan, wait_for, write_plan
from xtalk.outcome import checked_in_schema, load_outcome, parse_outcome

MS = 1_000_000


def run_agent(agent, tmp_path, plan, name="run"):
    out = tmp_path / name
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan, f"{name}.json"), "--out", out],
                       capture_output=True, text=True, timeout=120)
    return p, out


def checked(out):
    """The run's outcome through the loader, after checking the file against the schema and
    the round trip."""
    doc = json.loads((out / "run.json").read_text())
    jsonschema.validate(doc, checked_in_schema())
    outcome = parse_outcome(doc)
    assert outcome.to_dict() == doc, "the model's dump differs from what the agent wrote"
    assert parse_outcome(outcome.to_dict()) == outcome
    return outcome


@needs_two_cpus
def test_completed_with_enemies_and_software_counters(agent, tmp_path, facts):
    cpus = facts.online_cpus
    plan = small_plan(jobs=40, cpus=[cpus[-1]], counters=[{"event": "task-clock"}, {"event": "context-switches"}],
                      enemies=[{"name": "r", "load": {"kind": "read", "bytes": 1 << 20}, "placement": {"cpus": [cpus[0]]}},
                               {"name": "p", "load": {"kind": "pi"}, "placement": {"cpus": [cpus[0]]}, "intensity": 50.0}])
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    o = checked(out)
    assert o.status == "completed" and o.reason is None and o.jobs_recorded == o.jobs_planned == 42
    assert [e.name for e in o.enemies] == ["r", "p"] and [e.kind for e in o.enemies] == ["read", "pi"]
    assert o.enemies[0].unit == "bytes" and o.enemies[0].ops > 0 and o.enemies[1].target_intensity == 50.0
    assert set(o.pids.enemies) == {"r", "p"} and o.pids.victim > 0
    assert o.counters.events == ["task-clock", "context-switches"] and o.counters.read_with == "read(2)"
    assert o.environment.cpu.count == len(cpus) and o.environment.agent_version
    assert o.configuration.restored is True and o.configuration.restore_errors == []
    assert o.plan.labels == {"scenario": "solo"} and o.enemy_kinds() == ["read", "pi"]


def test_failed_victim(agent, tmp_path):
    plan = small_plan(jobs=1, period_ns=100 * MS, body={"kind": "command", "argv": ["sh", "-c", "exit 3"]},
                      warmup_jobs=0)
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 1, p.stderr
    o = checked(out)
    assert o.status == "failed" and "status 3" in o.victim_exit
    assert o.probes is not None and o.probes.file == "probes.bin"


def test_timeout(agent, tmp_path):
    plan = {**small_plan(jobs=1, period_ns=1000 * MS, body={"kind": "command", "argv": ["sleep", "30"]},
                                 warmup_jobs=0), "timeout_s": 1.5}
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 1, p.stderr
    o = checked(out)
    assert o.status == "timeout" and "timeout_s" in o.reason


def test_taskset_victim(agent, tmp_path, last_cpu):
    tasks = [{"name": "a", "period_ns": 10 * MS, "wcet_ns": 1 * MS}, {"name": "b", "period_ns": 20 * MS, "wcet_ns": 2 * MS}]
    plan = small_plan(jobs=6, period_ns=20 * MS, body={"kind": "taskset", "tasks": tasks}, cpus=[last_cpu], warmup_jobs=0)
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    o = checked(out)
    assert o.status == "completed" and [t.name for t in o.plan.victim.body.tasks] == ["a", "b"]


def test_latency_victim(agent, tmp_path):
    p, out = run_agent(agent, tmp_path, small_plan(jobs=20, body={"kind": "latency"}))
    assert p.returncode == 0, p.stderr
    assert checked(out).plan.victim.body.kind == "latency"


def test_trace(agent, tmp_path, needs_tracefs):
    plan = {**small_plan(jobs=20), "trace": {"events": ["sched:sched_switch"]}}
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    o = checked(out)
    assert o.trace.file == "trace.dat" and o.trace.capture == "raw" and o.trace.events == ["sched:sched_switch"]


@needs_two_cpus
@needs_root
def test_regulator(agent, tmp_path, facts, needs_fifo):
    cpus = facts.online_cpus
    plan = small_plan(jobs=20, cpus=[cpus[-1]], enemies=[{"name": "r", "load": {"kind": "read", "bytes": 1 << 20},
                                                          "placement": {"cpus": [cpus[0]]}}])
    plan["regulator"] = {"period_us": 10_000, "budget_bytes": 50_000_000}
    p, out = run_agent(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    o = checked(out)
    assert o.regulator.mode == "budget" and o.regulator.periods > 0


def test_set_up_failed(agent, tmp_path):
    """A run whose set-up fails before any child is forked (here its job log cannot be made:
    the name is taken by a directory): only the plan, the environment, the reason and the
    undoing are written."""
    out = tmp_path / "run"
    (out / "jobs.bin").mkdir(parents=True)
    p = subprocess.run([agent, "run", write_plan(tmp_path, small_plan(jobs=5)), "--out", out],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    o = checked(out)
    assert o.status == "failed" and "jobs.bin" in o.reason and o.jobs_recorded is None and o.pids is None
    assert o.configuration.restored is True and o.configuration.groups is None and o.environment is not None


def _started(out):
    try:
        return json.loads((out / "run.json").read_text())["status"] == "running"
    except (OSError, ValueError, KeyError):
        return False


def test_interrupted_and_killed(agent, tmp_path):
    """SIGTERM: the agent ends the run as `interrupted`. SIGKILL: run.json stays `running`
    (still a readable outcome), and recovery marks it failed."""
    plan = small_plan(jobs=500, period_ns=20 * MS)
    for sig, name in ((signal.SIGTERM, "term"), (signal.SIGKILL, "kill")):
        out = tmp_path / name
        proc = subprocess.Popen([agent, "run", write_plan(tmp_path, {**plan, "run_id": name}, f"{name}.json"), "--out", out],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: _started(out), timeout=60)
            time.sleep(0.3)
            proc.send_signal(sig)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        o = checked(out)
        assert load_outcome(out).run_id == name
        if sig == signal.SIGTERM:
            assert proc.returncode == 130 and o.status == "interrupted"
        else:
            # Any agent's start recovers a dead run (another may start on this machine now).
            assert o.status in ("running", "failed") and o.plan.run_id == "kill" and o.environment is not None
            rec = subprocess.run([agent, "recover"], capture_output=True, text=True, timeout=120)
            assert rec.returncode == 0, rec.stderr
            o = checked(out)
            assert o.status == "failed" and f"pid {proc.pid}" in o.reason
