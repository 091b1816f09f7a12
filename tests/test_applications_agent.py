"""Several measured processes in one run: the victim and the plan's applications are each
forked, released at the same instant and recorded in their own logs (the store tells their
jobs apart by `application`); a `may_fail` application's crash is recorded while the others
complete; any other application's failure ends the run; nothing is left behind."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import processes_named, small_plan, write_plan
from xtalk import store
from xtalk.outcome import load_outcome
from xtalk.store.jobs import convert_run, read_job_log

CRASH = ["/bin/sh", "-c", "kill -SEGV $$"]


def plan_with(*applications, run_id="apps") -> dict:
    plan = small_plan(run_id=run_id, jobs=30, period_ns=1_000_000)
    plan["applications"] = list(applications)
    return plan


def app(name, body, jobs=24, period_ns=2_000_000, **kw) -> dict:
    return {"name": name, "body": body, "period_ns": period_ns, "jobs": jobs, "warmup_jobs": 1, **kw}


def crash(name="crash", **kw) -> dict:
    return {"name": name, "body": {"kind": "command", "argv": CRASH}, "period_ns": 200_000_000, "jobs": 1, **kw}


def left_as_found(out):
    """What this run changed is undone (the session's end checks the whole machine, under the
    machine lock): no measured process or enemy of this session alive, every change restored,
    the run's group gone, every record moved off tmpfs into the run directory."""
    assert not processes_named(("xt-victim", "xt-app", "xt-enemy", "xtalk-agent"))
    meta = load_outcome(out)
    assert meta.configuration.restored and meta.configuration.restore_errors == []
    group = meta.configuration.run_group.dir
    assert group is None or not Path(group).exists()
    records = [p for p in out.rglob("*.bin")]
    assert records and not any(p.is_symlink() for p in records), records


def run(agent, tmp_path, plan, name="run"):
    out = tmp_path / "runs" / name
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan, f"{name}.json"), "--out", out],
                       capture_output=True, text=True, timeout=60)
    return p, out


def test_each_application_is_recorded_in_its_own_log_from_one_release(agent, tmp_path):
    plan = plan_with(app("summer", {"kind": "sum", "bytes": 65536}, jobs=36, period_ns=1_000_000),
                     app("pi", {"kind": "pi", "iterations": 20_000}))
    p, out = run(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    meta = load_outcome(out)
    assert meta.status == "completed" and meta.jobs_recorded == 32
    left_as_found(out)
    assert [(a.name, a.status, a.jobs_recorded, a.jobs_planned) for a in meta.applications] == [
        ("summer", "completed", 37, 37), ("pi", "completed", 25, 25)]
    assert all(a.exit == "exited with status 0" and a.dir == f"applications/{a.name}" for a in meta.applications)
    # One release instant for every measured process, each on its own period's grid.
    assert {a.t0_ns for a in meta.applications} == {meta.t0_ns} and meta.t0_ns > 0
    for a, period in (("summer", 1_000_000), ("pi", 2_000_000)):
        j = read_job_log(out / "applications" / a / "jobs.bin")
        assert (j.release_ns == meta.t0_ns + j.job * period).all()
    # The store: one table, each row naming its process.
    jobs = convert_run(out)
    assert jobs.groupby("application", observed=True).size().to_dict() == {"victim": 32, "summer": 37, "pi": 25}
    assert (jobs[jobs.application == "pi"].exec_ns > 0).all()
    rows = store.open(tmp_path).connect().execute(
        "SELECT application, count(*) FROM jobs WHERE NOT warmup GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("pi", 24), ("summer", 36), ("victim", 30)]


def test_a_may_fail_application_that_crashes_is_recorded_and_the_others_complete(agent, tmp_path):
    plan = plan_with(app("pi", {"kind": "pi", "iterations": 20_000}), crash(may_fail=True))
    plan["victim"]["name"] = "aocs"
    p, out = run(agent, tmp_path, plan)
    assert p.returncode == 0, p.stderr
    meta = load_outcome(out)
    assert meta.status == "completed" and meta.jobs_recorded == 32
    left_as_found(out)
    pi, dead = meta.applications
    assert (pi.status, pi.jobs_recorded) == ("completed", 25)
    assert (dead.status, dead.may_fail) == ("failed", True)
    assert "signal 11" in dead.exit
    assert any("crash failed and the run went on" in n for n in meta.notes)
    counts = convert_run(out).groupby("application", observed=True).size().to_dict()
    assert counts["aocs"] == 32 and counts["pi"] == 25 and "victim" not in counts


def test_a_failure_of_an_application_not_marked_may_fail_ends_the_run(agent, tmp_path):
    plan = plan_with(app("pi", {"kind": "pi", "iterations": 20_000}, jobs=400), crash())
    p, out = run(agent, tmp_path, plan)
    assert p.returncode == 1, p.stderr
    meta = load_outcome(out)
    assert meta.status == "failed"
    assert meta.reason.startswith("application crash killed by signal 11"), meta.reason
    pi, dead = meta.applications
    assert dead.status == "failed" and pi.status == "stopped" and pi.jobs_recorded < 401
    left_as_found(out)


def test_the_agent_refuses_duplicate_application_names(agent, tmp_path):
    plan = plan_with(app("pi", {"kind": "pi", "iterations": 10}), app("pi", {"kind": "sum", "bytes": 64}))
    p = subprocess.run([agent, "check", write_plan(tmp_path, plan)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("xtalk-agent: plan: applications[1].name: 'pi' is used twice"), p.stderr


def test_a_one_victim_result_from_before_applications_reads_as_the_victim(agent, tmp_path):
    p, out = run(agent, tmp_path, small_plan(run_id="old", jobs=10, period_ns=1_000_000))
    assert p.returncode == 0, p.stderr
    # A table written before the column existed: every reader gives its rows to "victim".
    convert_run(out).drop(columns="application").to_parquet(out / "jobs.parquet")
    assert convert_run(out).application.unique().tolist() == ["victim"]
    assert store.open(tmp_path).jobs().application.unique().tolist() == ["victim"]
    from xtalk.store.frames import load
    assert load(tmp_path).measured.application.astype(str).unique().tolist() == ["victim"]


def test_the_host_model_and_the_agent_agree_on_applications(agent, tmp_path):
    import jsonschema
    import pydantic

    from xtalk.plan import Plan, checked_in_schema

    plan = plan_with(app("pi", {"kind": "pi", "iterations": 10}), crash(may_fail=True))
    doc = json.loads(Plan.model_validate(plan).to_json())
    jsonschema.validate(doc, checked_in_schema())
    assert doc["victim"]["name"] == "victim" and [a["may_fail"] for a in doc["applications"]] == [False, True]
    p = subprocess.run([agent, "check", write_plan(tmp_path, doc)], capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stdout.strip()) == (0, "ok"), p.stderr
    with pytest.raises(pydantic.ValidationError, match=r"applications\[0\]\.name: 'victim' is used twice"):
        Plan.model_validate(plan_with(app("victim", {"kind": "pi", "iterations": 10})))
    with pytest.raises(pydantic.ValidationError, match="may_fail"):
        Plan.model_validate({**plan, "victim": {**plan["victim"], "may_fail": True}})
