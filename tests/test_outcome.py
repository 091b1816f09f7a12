"""The run outcome model without the agent: its checked-in schema is current, a missing,
cut-short or drifted run.json gives one clear line, an unfinished run stays readable, and
the synthetic results the report's tests use are built through the model."""

import json

import jsonschema
import pytest

from xtalk.outcome import (OutcomeError, RunOutcome, checked_in_schema, json_schema, load_outcome, read_outcome,
                           write_outcome)
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.store import open as open_results

PLAN = {"version": 1, "run_id": "r", "timeout_s": 30.0, "settle_ms": 20.0,
        "victim": {"body": {"kind": "sum", "bytes": 262144}, "period_ns": 2_000_000, "jobs": 5},
        "labels": {"scenario": "solo"}}


def test_checked_in_schema_is_current():
    assert checked_in_schema() == json_schema(), "run `python -m xtalk.outcome > src/xtalk/schema/run-outcome.schema.json`"


def test_missing_run_json_is_one_line(tmp_path):
    with pytest.raises(OutcomeError, match=r"run.json: no run.json; give a run directory") as e:
        load_outcome(tmp_path)
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    assert read_outcome(tmp_path) is None


def test_cut_short_run_json_is_one_line(tmp_path):
    (tmp_path / "run.json").write_text('{"run_id": "r", "status": "runn')
    with pytest.raises(OutcomeError, match=r"not JSON .* at line 1\): the file was cut short or corrupted") as e:
        load_outcome(tmp_path)
    assert "\n" not in str(e.value)
    assert read_outcome(tmp_path) is None


@pytest.mark.parametrize("doc,field", [
    ({"run_id": "r", "status": "completed", "scenario": "solo"}, "scenario"),          # a field the model does not know
    ({"run_id": "r", "status": "finished"}, "status"),                                 # a status that is not one
    ({"run_id": "r", "status": "completed", "jobs_recorded": "many"}, "jobs_recorded"),
    ({"run_id": "r", "status": "completed", "version": 2}, "version"),
    ({"run_id": "r", "status": "completed", "enemies": [{"name": "e"}]}, "enemies.0.kind"),
    ({"run_id": "r", "status": "completed", "plan": {**PLAN, "bogus": 1}}, "plan.bogus"),
    ({"run_id": "r"}, "status"),
])
def test_drift_names_the_field(tmp_path, doc, field):
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(OutcomeError) as e:
        load_outcome(tmp_path)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'run.json'}: {field}: "), line
    with pytest.raises(OutcomeError):  # drift is not a missing run: read_outcome raises too
        read_outcome(tmp_path)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, checked_in_schema())


def test_a_run_the_agent_did_not_finish_stays_readable(tmp_path):
    """`running` with only the plan (the agent was killed), then the host's mark."""
    doc = {"run_id": "r", "status": "running", "plan": PLAN, "started_unix_ns": 1}
    (tmp_path / "run.json").write_text(json.dumps(doc))
    o = load_outcome(tmp_path)
    assert o.status == "running" and o.plan.victim.jobs == 5 and o.jobs_recorded is None and o.enemies == []
    assert o.version == 1 and o.to_dict() == doc  # the absent version stays absent
    marked = o.model_copy(update={"status": "failed", "reason": "agent ended abnormally", "restored": ["nothing"]})
    write_outcome(tmp_path, marked)
    again = load_outcome(tmp_path)
    assert again == marked and again.to_dict() == {**doc, "status": "failed", "reason": "agent ended abnormally",
                                                   "restored": ["nothing"]}
    jsonschema.validate(again.to_dict(), checked_in_schema())


def test_a_version_written_by_the_agent_is_kept():
    doc = {"version": 1, "run_id": "r", "status": "completed", "reason": None}
    assert RunOutcome.model_validate(doc).to_dict() == doc


def test_synthetic_results_are_outcomes(tmp_path):
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2, jobs=20,
                         victim={"sched": {"policy": "fifo", "priority": 90}})
    runs = open_results(root).runs()
    assert len(runs) == 4 and set(runs.status) == {"completed"}
    for d in runs.dir:
        o = load_outcome(d)
        jsonschema.validate(o.to_dict(), checked_in_schema())
        assert o.plan.victim.sched.priority == 90 and o.plan.victim.period_ns == 1_000_000
        assert o.labels()["scenario"] in ("solo", "read") and o.pids.victim > 0
