"""The agent is the one source of its catalog: the checked-in copy is what the agent
prints, docs/enemies.md's parameter tables are made from it, the host's plan models take
their loads from it, and host and agent agree on how long a run is."""

import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import XTALK
from xtalk import catalog
from xtalk import limits
from xtalk.plan import LOAD_MODELS, Plan, checked_in_schema, run_seconds

ROOT = Path(__file__).resolve().parents[1]


def test_checked_in_catalog_is_what_the_agent_prints(agent):
    out = subprocess.run([agent, "catalog", "--json"], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == json.loads(catalog.checked_in_text()), \
        "run `make catalog` (xtalk-agent catalog --json > src/xtalk/schema/catalog.json)"


def test_enemy_docs_tables_are_made_from_the_catalog():
    text = (ROOT / "docs" / "enemies.md").read_text()
    assert catalog.render_doc(text) == text, "run `make docs`"
    # Every kind and every parameter is in the document.
    for k in catalog.current().kinds.values():
        assert f"#### `{k.name}`" in text
        for p in k.params:
            assert f"`{p.file_key}`" in text


def test_experiment_docs_name_every_kind_of_the_catalog():
    # docs/experiments.md's `kind` row once left out five kinds the validator accepts.
    (row,) = [line for line in (ROOT / "docs" / "experiments.md").read_text().splitlines() if line.startswith("| `kind` |")]
    named = set(re.findall(r"`([a-z0-9]+)`", row.split("|")[3]))
    assert named == set(catalog.current().kinds), f"missing: {set(catalog.current().kinds) - named}, not kinds: {named - set(catalog.current().kinds)}"


def test_limits_and_load_models_come_from_the_catalog():
    cat = catalog.current()
    assert limits.MAX_JOBS == cat.limits["max_jobs"] and limits.MAX_ENEMIES == cat.limits["max_enemies"]
    assert set(LOAD_MODELS) == set(cat.kinds)
    schema = checked_in_schema()
    chase = schema["$defs"]["ChaseLoad"]["properties"]
    assert chase["chains"]["maximum"] == cat.limits["max_chains"] == cat.kinds["chase"].param("chains").max
    icache = schema["$defs"]["IcacheLoad"]["properties"]
    assert icache["functions"]["maximum"] == icache["functions"]["default"] == cat.limits["max_functions"]


@pytest.mark.parametrize("kind", sorted(catalog.current().kinds))
def test_every_declared_bound_is_enforced_by_the_plan_models(kind):
    """Below the minimum or above the maximum of each integer parameter is refused by the
    host's model, as the agent refuses it (tests/check_bounds.rs and the fuzz tests)."""
    k = catalog.kind(kind)
    model = LOAD_MODELS[kind]
    base = {"kind": kind}
    for p in k.params:
        if p.required:
            base[p.name] = {"u64": p.min or 1, "bool": False, "str": "/x", "strings": ["true"]}.get(p.type) \
                if p.type != "choice" else p.choices[0]
    model.model_validate(base)
    for p in k.params:
        if p.type != "u64":
            continue
        if p.min:
            with pytest.raises(ValueError):
                model.model_validate({**base, p.name: p.min - 1})
        if p.max is not None:
            with pytest.raises(ValueError):
                model.model_validate({**base, p.name: p.max + 1})


def _plan(body: dict, period_ns: int, jobs: int, warmup: int, timeout_s: float) -> dict:
    return {"version": 1, "run_id": "len", "timeout_s": timeout_s, "settle_ms": 10.0,
            "victim": {"body": body, "period_ns": period_ns, "jobs": jobs, "warmup_jobs": warmup}}


@pytest.mark.parametrize("body,period_ns,jobs,warmup", [
    ({"kind": "sum", "bytes": 4096}, 1_000_000, 37, 3),
    # Two tasks, hyperperiod 20 ms: 3 job records per hyperperiod, plus the late one.
    ({"kind": "taskset", "tasks": [{"name": "a", "period_ns": 10_000_000, "wcet_ns": 10_000},
                                   {"name": "b", "period_ns": 20_000_000, "wcet_ns": 10_000}]}, 20_000_000, 30, 6),
])
def test_host_and_agent_agree_on_the_run_length(agent, tmp_path, body, period_ns, jobs, warmup):
    """The agent refuses a watchdog no longer than the run (`Victim::run_periods` in plan.rs); the host's
    one rule (plan.run_seconds) puts that edge at the same place."""
    need = run_seconds(Plan.model_validate(_plan(body, period_ns, jobs, warmup, 1.0)))
    for timeout, ok in ((need - 1e-3, False), (need + 1e-3, True)):
        f = tmp_path / "plan.json"
        f.write_text(json.dumps(_plan(body, period_ns, jobs, warmup, timeout)))
        out = subprocess.run([agent, "check", f], capture_output=True, text=True)
        if ok:
            assert out.returncode == 0, out.stderr
        else:
            assert out.returncode == 2 and "timeout_s" in out.stderr, out.stderr
            jsonschema.validate(json.loads(f.read_text()), checked_in_schema())


def test_a_file_that_is_no_catalog_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "catalog.json"
    bad.write_text('{"version": 99, "enemies": []}')
    out = subprocess.run([*XTALK, "plan", "--schema"], capture_output=True, text=True,
                         env={**os.environ, catalog.ENV_VAR: str(bad)})
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "XTALK_CATALOG=" in lines[0] and "catalog version 99" in lines[0], out.stderr


def test_the_fault_enemies_are_the_catalogs_class_fault_and_every_host_list_reads_it():
    """One list of fault enemies, from the agent's declarations: syscallstorm loads kernel
    paths at a rate and breaks nothing, so it is `timing`; the worst-case search leaves the
    faults out, the evidence bundle looks for them, the enemy-alone pass skips their rates."""
    from xtalk.evidence.objectives import FAULT_KINDS
    from xtalk.worst.space import EXCLUDED

    faults = catalog.fault_kinds()
    assert faults == {"memhog", "fdexhaust", "forkbomb", "diskfill", "crashloop"}
    assert catalog.kind("syscallstorm").klass == "timing" and "syscallstorm" not in EXCLUDED
    assert FAULT_KINDS == faults and faults <= set(EXCLUDED)
    assert {k.klass for k in catalog.current().kinds.values()} == {"timing", "fault"}


def test_every_body_is_declared_and_the_host_reads_its_knob_sections_and_model():
    from xtalk.calibrate_work import knob_of
    from xtalk.plan import BODY_MODELS, body_model
    from xtalk.report import victim_kinds as vk

    assert set(BODY_MODELS) == set(catalog.body_names()) == {
        "chase", "sum", "spawn", "pi", "syscall", "latency", "aocs", "command", "taskset", "attach"}
    assert {b: knob_of(body_model(b).model_construct()) for b in ("chase", "pi", "syscall", "aocs", "sum")} == {
        "chase": "accesses", "pi": "iterations", "syscall": "calls", "aocs": "repeat_step", "sum": None}
    assert vk.hidden("latency") == {"slowdown", "distributions", "series", "spikes", "pwcet"}
    assert vk.hidden("taskset") == set(catalog.EXECUTION) and vk.hidden(vk.PERIODIC) == set()
    assert [b for b in catalog.body_names() if catalog.body(b).plain] == ["chase", "sum", "spawn", "pi", "syscall"]
    # A declared bound reaches the plan model: the agent's chase needs two cache lines.
    with pytest.raises(ValueError):
        body_model("chase")(bytes=64)
