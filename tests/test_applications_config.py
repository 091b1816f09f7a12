"""Experiments of [[application]]s, parsed and expanded without the agent: the scenarios they
make (names the verdicts rely on), the plan of each (victim, applications, faults inside their
application), configurations per application, and one clear line for each bad file."""

import pytest

from conftest import xtalk
from xtalk.config.expand import expand
from xtalk.config.experiment import Experiment
from xtalk.config.tomlfile import parse_toml
from xtalk.errors import UsageError
from xtalk.targets.agent import TargetFacts

FACTS = TargetFacts(online_cpus=[0, 1], caches={"l1d": 32768, "l2": 1 << 20, "llc": 8 << 20}, environment={})

GOOD = """
name = "coh"
repetitions = 2
settle = "50ms"

[[application]]
name = "aocs"
criticality = "A"
body = "pi"
iterations = 1000
period = "5ms"
jobs = 20
cpus = 0
policy = "fifo"
priority = 80
epsilon = { metric = "response", statistic = "p99", bound = "1.5x" }

[[application]]
name = "payload"
criticality = "C"
body = "chase"
bytes = "1MiB"
accesses = 1000
period = "5ms"
jobs = 20
cpus = 1

[[application]]
name = "logger"
criticality = "D"
body = "sum"
bytes = "64KiB"
period = "5ms"
jobs = 20
cpus = 1
epsilon = { metric = "exec", statistic = "max", bound = "4ms" }
faults = [{ kind = "forkbomb", max_procs = 16, hold = "1ms" }, { kind = "pi", policy = "fifo", priority = 90 }]

[[scenario]]
name = "stress"
enemies = [{ kind = "read", bytes = "1MiB", cpus = 1 }]

[[configuration]]
name = "shared"

[[configuration]]
name = "partitioned"
groups = [{ name = "high", cpus = 0 }, { name = "low", cpus = 1, pids_max = 32 }]
applications = { aocs = { group = "high" }, payload = { group = "low" }, logger = { group = "low" } }
"""


def parse(text: str) -> Experiment:
    from xtalk.config.experiment import format_validation_error
    from pydantic import ValidationError

    try:
        return Experiment.model_validate(parse_toml(text, "exp.toml"))
    except ValidationError as e:
        raise UsageError(format_validation_error("exp.toml", e)) from None


def plans(text: str = GOOD) -> dict:
    """(configuration, scenario) -> the plan of its first run."""
    out = {}
    for r in expand(parse(text), FACTS):
        out.setdefault((r.configuration, r.scenario), r.plan)
    return out


def test_scenarios_have_the_contract_names_in_order():
    exp = parse(GOOD)
    assert exp.application_scenario_names() == [
        "alone:aocs", "alone:payload", "alone:logger",
        "pair:aocs+payload", "pair:aocs+logger", "pair:payload+logger",
        "all", "all+stress", "fault:logger:forkbomb", "fault:logger:pi"]
    runs = expand(exp, FACTS)
    assert len(runs) == 2 * 10 * 2  # configurations × scenarios × repetitions
    # Interleaved like any experiment: every repetition holds each pair once, shuffled.
    first = [(r.configuration, r.scenario) for r in runs[:20]]
    assert len(set(first)) == 20 and first != sorted(first)
    assert all(":" not in r.run_id for r in runs), "run ids are directory names"


def test_first_application_present_is_the_victim_and_the_others_are_applications():
    p = plans()
    alone = p[("shared", "alone:payload")]
    assert alone.victim.name == "payload" and alone.applications == []
    pair = p[("shared", "pair:payload+logger")]
    assert pair.victim.name == "payload" and [a.name for a in pair.applications] == ["logger"]
    assert pair.labels["applications"] == "payload,logger" and "faulty" not in pair.labels
    every = p[("shared", "all")]
    assert every.victim.name == "aocs" and [a.name for a in every.applications] == ["payload", "logger"]
    assert every.enemies == [] and not any(a.may_fail for a in every.applications)
    # Each keeps its own body, period, placement and policy.
    assert every.victim.body.kind == "pi" and every.victim.sched.policy == "fifo" and every.victim.placement.cpus == [0]
    assert every.applications[0].body.kind == "chase" and every.applications[0].placement.cpus == [1]
    stress = p[("shared", "all+stress")]
    assert [e.name for e in stress.enemies] == ["read"] and len(stress.applications) == 2


def test_a_fault_runs_inside_its_application_which_may_fail():
    p = plans()
    for cfg, group in (("shared", None), ("partitioned", "low")):
        bomb = p[(cfg, "fault:logger:forkbomb")]
        assert bomb.labels["faulty"] == "logger" and bomb.labels["fault"] == "forkbomb"
        assert bomb.labels["applications"] == "aocs,payload,logger"
        logger = next(a for a in bomb.applications if a.name == "logger")
        assert logger.may_fail and not any(a.may_fail for a in bomb.applications if a.name != "logger")
        (e,) = bomb.enemies
        assert e.name == "logger:forkbomb" and e.load.kind == "forkbomb"
        assert e.placement.cpus == logger.placement.cpus == [1]
        assert e.group == logger.group == group
        assert e.sched == logger.sched  # the application's policy
        # A fault that sets its own policy keeps it (an RT hog inside a best-effort application).
        (hog,) = p[(cfg, "fault:logger:pi")].enemies
        assert hog.name == "logger:pi" and hog.sched.policy == "fifo" and hog.sched.priority == 90 and hog.group == group


def test_configuration_settings_per_application():
    p = plans()
    part = p[("partitioned", "all")]
    assert part.victim.group == "high" and [a.group for a in part.applications] == ["low", "low"]
    assert {g.name: g.cpus for g in part.groups} == {"high": [0], "low": [1]}
    assert p[("shared", "all")].victim.group is None
    # `victim` settings apply to every application, `applications.<name>` over them.
    text = GOOD.replace('applications = { aocs = { group = "high" }, payload = { group = "low" }, logger = { group = "low" } }',
                        'victim = { nice = 5 }\napplications = { aocs = { policy = "fifo", priority = 70 } }')
    part = plans(text)[("partitioned", "all")]
    assert part.victim.sched.priority == 70
    assert all(a.sched.policy == "other" and a.sched.nice == 5 for a in part.applications)


def test_a_faulty_first_application_is_not_the_victim():
    text = GOOD.replace('policy = "fifo"\npriority = 80\n', 'policy = "fifo"\npriority = 80\nfaults = [{ kind = "crashloop" }]\n', 1)
    crash = plans(text)[("shared", "fault:aocs:crashloop")]
    assert crash.victim.name == "payload"
    assert [(a.name, a.may_fail) for a in crash.applications] == [("logger", False), ("aocs", True)]
    assert crash.enemies[0].placement.cpus == [0] and crash.enemies[0].sched.policy == "fifo"


def test_application_scenarios_choose_the_families():
    text = GOOD.replace('name = "coh"', 'name = "coh"\napplication_scenarios = ["alone", "first", "all"]')
    names = parse(text).application_scenario_names()
    assert names == ["alone:aocs", "alone:payload", "alone:logger", "first:2", "all", "all+stress"]
    p = plans(text)
    assert p[("shared", "first:2")].labels["applications"] == "aocs,payload"


def test_aocs_files_shared_or_duplicated_per_configuration():
    aocs = """
name = "inst"
repetitions = 1
application_scenarios = ["all"]
[[application]]
name = "i1"
criticality = "A"
body = "aocs"
data = "results/aocs-data"
jobs = 10
[[application]]
name = "i2"
criticality = "A"
body = "aocs"
data = "results/aocs-data"
jobs = 10
[[configuration]]
name = "shared-files"
files = "shared"
[[configuration]]
name = "duplicated-files"
files = "duplicated"
"""
    p = plans(aocs)
    shared, dup = p[("shared-files", "all")], p[("duplicated-files", "all")]
    assert shared.victim.body.input == shared.applications[0].body.input
    assert dup.victim.body.input != dup.applications[0].body.input
    assert len({shared.victim.body.input, dup.victim.body.input, dup.applications[0].body.input}) == 3


def test_experiment_metadata_is_in_the_dump_the_results_keep():
    import json

    doc = json.loads(parse(GOOD).model_dump_json())  # runner.py writes this into experiment.json
    apps = {a["name"]: a for a in doc["application"]}
    assert [apps[n]["criticality"] for n in ("aocs", "payload", "logger")] == ["A", "C", "D"]
    assert apps["aocs"]["epsilon"] == {"metric": "response", "statistic": "p99", "bound": "1.5x"}
    assert apps["logger"]["epsilon"]["bound"] == "4ms" and apps["payload"]["epsilon"] is None
    assert doc["victim"] is None


@pytest.mark.parametrize("old,new,needle", [
    ('[[application]]\nname = "aocs"', '[victim]\nbody = "pi"\niterations = 5\njobs = 5\n[[application]]\nname = "aocs"',
     "application: an experiment has either [victim]"),
    ('name = "payload"', 'name = "aocs"', "application[1].name: 'aocs' is used twice"),
    ('name = "payload"', 'name = "pay:load"', "application[1].name: should be"),
    ('criticality = "C"', 'criticality = "E"', "application[1].criticality"),
    ('criticality = "C"\n', '', "application[1].criticality: required"),
    ('bound = "1.5x" }', 'bound = "1.5x", relative = 1.5 }', "application[0].epsilon: give exactly one of 'bound'"),
    ('bound = "1.5x" }', 'bound = "1.5y" }', "application[0].epsilon.bound: cannot read duration '1.5y'"),
    ('metric = "response"', 'metric = "latency"', "application[0].epsilon.metric"),
    ('statistic = "p99"', 'statistic = "p95x"', "application[0].epsilon.statistic: 'p95x' is not max, median, mean or pNN"),
    ('bound = "4ms"', 'bound = "4 fortnights"', "application[2].epsilon"),
    ('{ kind = "crashloop" }', '{ kind = "crashloop", cpus = 0 }', "application[2].faults[0]: a fault runs on its application's CPUs"),
    ('{ kind = "crashloop" }', '{ kind = "nuke" }', "application[2].faults[0].kind"),
    ('{ kind = "crashloop" }', '{ kind = "pi" }', "application[2]: faults: kind 'pi' is given twice"),
    ('{ kind = "crashloop" }', '{ kind = "memhog", colour = 1 }', "application[2].faults[0].colour: unknown key"),
    ('accesses = 1000', 'utilization = "30%"', "'utilization' is calibrated for a [victim] only; give 'accesses'"),
    ('logger = { group = "low" } }', 'logger = { group = "low" }, printer = {} }', "configuration[1].applications.printer: no application"),
    ('enemies = [{ kind = "read", bytes = "1MiB", cpus = 1 }]', '', "scenario[0]: beside applications a scenario adds enemies"),
    ('name = "coh"', 'name = "coh"\napplication_scenarios = ["trios"]', "application_scenarios[0]"),
])
def test_bad_application_file(old, new, needle):
    good = GOOD.replace('{ kind = "forkbomb", max_procs = 16, hold = "1ms" }', '{ kind = "crashloop" }')
    assert old in good
    with pytest.raises(UsageError) as e:
        parse(good.replace(old, new, 1))
    line = str(e.value)
    assert "\n" not in line and needle in line, line


def test_one_application_is_a_victim():
    one = GOOD[:GOOD.index("[[application]]\nname = \"payload\"")]
    with pytest.raises(UsageError, match=r"application: one application is a \[victim\]"):
        parse(one)
    with pytest.raises(UsageError, match=r"victim: required; add a \[victim\] table, or two or more"):
        parse('name = "x"\n')


def test_bad_application_file_on_the_command_line(tmp_path):
    """Exit 2, one line, nothing started (the agent is never asked: the file fails first)."""
    f = tmp_path / "exp.toml"
    f.write_text(GOOD.replace('criticality = "C"', 'criticality = "Z"'))
    out = xtalk("plan", f)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "application[1].criticality" in lines[0], out.stderr


def test_victim_experiments_keep_their_plans():
    """A [victim] file makes no application field, label or scenario of its own."""
    text = """
name = "v"
repetitions = 1
[victim]
body = "pi"
iterations = 100
jobs = 5
[[scenario]]
name = "r"
enemies = [{ kind = "read", bytes = "1MiB" }]
"""
    runs = expand(parse(text), FACTS)
    assert sorted(r.scenario for r in runs) == ["r", "solo"]
    for r in runs:
        assert not {"applications", "faulty", "fault"} & set(r.plan.labels)
        assert not getattr(r.plan, "applications", None)
        assert "applications" not in r.plan.model_dump(exclude_defaults=True)
