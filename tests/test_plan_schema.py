"""The run plan is one contract: the checked-in schema, the host's models and the agent's
parser must agree."""

import json
import subprocess

import jsonschema
import pytest

from conftest import small_plan, write_plan
from xtalk.plan import Plan, checked_in_schema, json_schema


def test_checked_in_schema_is_current():
    assert checked_in_schema() == json_schema(), "run `xtalk plan --schema > src/xtalk/schema/run-plan.schema.json`"


def test_host_plans_validate_against_schema_and_agent(tmp_path, agent):
    plan = Plan.model_validate(small_plan(enemies=[{"name": "r", "load": {"kind": "read", "bytes": 1 << 20}}]))
    doc = json.loads(plan.to_json())
    jsonschema.validate(doc, checked_in_schema())
    out = subprocess.run([agent, "check", write_plan(tmp_path, doc)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def check(agent, tmp_path, plan) -> subprocess.CompletedProcess:
    return subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True)


def mutate(path: str, value, plan=None):
    plan = plan or small_plan()
    *parents, last = path.split(".")
    d = plan
    for p in parents:
        d = d[int(p)] if isinstance(d, list) else d[p]
    d[last] = value
    return plan


@pytest.mark.parametrize("path,value,field,hint", [
    ("victim.bogus", 1, "victim", "unknown field `bogus`"),
    ("victim.jobs", "many", "victim.jobs", "invalid type"),
    ("victim.jobs", 0, "victim.jobs", "at least 1"),
    ("victim.placement.cpus", [4096], "victim.placement.cpus[0]", "does not exist"),
    ("victim.sched", {"policy": "fifo", "priority": 120}, "victim.sched.priority", "1..99"),
    ("victim.sched", {"policy": "deadline", "runtime_ns": 3_000_000, "deadline_ns": 2_000_000, "period_ns": 2_000_000},
     "victim.sched.runtime_ns", "runtime <= deadline <= period"),
    ("victim.sched", {"policy": "deadline", "runtime_ns": 1_000_000, "deadline_ns": 3_000_000, "period_ns": 2_000_000},
     "victim.sched.deadline_ns", "runtime <= deadline <= period"),
    ("timeout_s", 0.01, "timeout_s", "shorter than the run"),
    ("version", 9, "version", "not supported"),
])
def test_agent_rejects_bad_plans_with_one_line(agent, tmp_path, path, value, field, hint):
    out = check(agent, tmp_path, mutate(path, value))
    assert out.returncode == 2
    line = out.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"xtalk-agent: plan: {field}"), line
    assert hint in line


def test_missing_field_is_named(agent, tmp_path):
    plan = small_plan()
    del plan["victim"]["period_ns"]
    out = check(agent, tmp_path, plan)
    assert out.returncode == 2 and "missing field `period_ns`" in out.stderr


def test_deadline_may_not_be_pinned_to_a_subset(agent, tmp_path, facts):
    if len(facts.online_cpus) < 2:
        pytest.skip("needs two CPUs")
    plan = small_plan(cpus=[facts.online_cpus[-1]],
                      sched={"policy": "deadline", "runtime_ns": 500_000, "deadline_ns": 2_000_000, "period_ns": 2_000_000})
    out = check(agent, tmp_path, plan)
    assert out.returncode == 2 and "victim.placement.cpus" in out.stderr and "root domain" in out.stderr


def test_unprivileged_real_time_policy_is_refused(agent, tmp_path):
    """A policy the process may not use is an input error, named, before anything starts."""
    import os
    import shutil
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop privileges")
    plan = small_plan(sched={"policy": "fifo", "priority": 50})
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", str(agent), "check", "-"]
    out = subprocess.run(cmd, input=json.dumps(plan), capture_output=True, text=True)
    if "Permission denied" in out.stderr:
        pytest.skip("agent binary not reachable by user nobody")
    assert out.returncode == 2, out.stderr
    assert "victim.sched.policy" in out.stderr and "CAP_SYS_NICE" in out.stderr
