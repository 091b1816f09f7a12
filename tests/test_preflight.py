"""Pre-flight: a policy the kernel will refuse is refused before anything starts, with its
true cause. Root inside a cgroup without RT runtime has CAP_SYS_NICE, yet SCHED_FIFO fails."""

import json
import os
from pathlib import Path

import pytest

import capabilities
import leftovers
from conftest import ROOT, TOKEN, needs_root, xtalk
from xtalk.outcome import read_outcome

CPU_V1 = Path("/sys/fs/cgroup/cpu")

EXPERIMENT = """
name = "fifo"
repetitions = 1
[victim]
body = "pi"
iterations = 1000
period = "5ms"
jobs = 5
cpus = "last"
policy = "fifo"
priority = 80
"""


@pytest.fixture
def no_rt_group():
    """A cpu cgroup with cpu.rt_runtime_us = 0 (a new group's default), removed afterwards."""
    if why := capabilities.rt_group() or ("" if (CPU_V1 / "cpu.rt_runtime_us").exists() else f"no v1 cpu hierarchy at {CPU_V1}"):
        pytest.skip(why)
    g = CPU_V1 / f"xtalk-test-no-rt-{os.getpid()}"
    g.mkdir()
    try:
        assert (g / "cpu.rt_runtime_us").read_text().strip() == "0"
        yield g
    finally:
        g.rmdir()


@needs_root
def test_fifo_in_a_cgroup_without_rt_runtime_is_refused_naming_the_group(tmp_path, no_rt_group):
    exp = tmp_path / "fifo.toml"
    exp.write_text(EXPERIMENT)

    def enter():  # the xtalk process (and so its agent) sits in the group, as in a container
        (no_rt_group / "cgroup.procs").write_text(str(os.getpid()))

    p = xtalk("run", exp, "--results", tmp_path / "res", preexec_fn=enter)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stdout + p.stderr
    assert "victim.sched.policy" in lines[0] and str(no_rt_group) in lines[0] and "cpu.rt_runtime_us = 0" in lines[0], lines[0]
    assert "'deadline'" in lines[0], "the fix is named"
    assert not (tmp_path / "res").exists(), "nothing started"
    # The same experiment from where this test runs is accepted (the group was the cause).
    assert xtalk("plan", exp).returncode == 0


#: EXPERIMENT under two configurations: its own (fifo) and the deadline preset.
TWO_CONFIGURATIONS = EXPERIMENT.replace('name = "fifo"', 'name = "fifo-or-deadline"') + """
[[configuration]]
name = "fifo"

[[configuration]]
name = "deadline"
preset = "deadline"
"""


def _in(group: Path):
    """A preexec_fn: the xtalk process (and so its agents) sits in `group`, as in a container."""
    return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))


@needs_root
def test_skip_unavailable_skips_the_configurations_whose_policy_is_refused_and_runs_the_others(tmp_path, no_rt_group, needs_deadline):
    exp = tmp_path / "two.toml"
    exp.write_text(TWO_CONFIGURATIONS)
    before = leftovers.snapshot(TOKEN, locked=False)
    # `plan` says what `run` will do: the example's fifo and rr configurations skipped, with the cause.
    p = xtalk("plan", ROOT / "examples" / "configurations.toml", "--skip-unavailable", preexec_fn=_in(no_rt_group))
    out = " ".join(p.stdout.split())  # the console wraps long lines
    assert p.returncode == 0, p.stdout + p.stderr
    for name, policy in (("fifo", "SCHED_FIFO"), ("rr", "SCHED_RR")):
        assert f"configuration {name} skipped: victim.sched.policy: {policy} refused" in out, out
    assert "configuration deadline skipped" not in out and "-deadline-" in out.split("order: ")[1], out

    r = xtalk("run", exp, "--results", tmp_path / "res", "--skip-unavailable", "--skip-feasibility", preexec_fn=_in(no_rt_group))
    assert r.returncode == 0, r.stdout + r.stderr
    said = " ".join(r.stdout.split())
    assert "configuration fifo skipped: victim.sched.policy: SCHED_FIFO refused" in said and "cpu.rt_runtime_us = 0" in said, said
    [res] = (tmp_path / "res").iterdir()
    doc = json.loads((res / "experiment.json").read_text())
    [skipped] = doc["skipped_configurations"]
    assert skipped["configuration"] == "fifo" and str(no_rt_group) in skipped["reason"] and "'deadline'" in skipped["reason"], skipped
    assert doc["order"] and {o["configuration"] for o in doc["order"]} == {"deadline"}
    for o in doc["order"]:
        meta = read_outcome(res / "runs" / o["run_id"])
        assert meta is not None and meta.status == "completed", (o, meta)
    assert "| fifo / (all) | skipped |" in (res / "summary.md").read_text(), "the summary has the skipped row"
    assert not (no_rt_group / "cgroup.procs").read_text().strip()
    assert leftovers.snapshot(TOKEN, locked=False) <= before, "the machine is left as found"


@needs_root
def test_without_skip_unavailable_a_refused_configuration_refuses_the_experiment(tmp_path, no_rt_group):
    exp = tmp_path / "two.toml"
    exp.write_text(TWO_CONFIGURATIONS)
    for command in ("run", "plan"):
        p = xtalk(command, exp, *(["--results", tmp_path / "res"] if command == "run" else []), preexec_fn=_in(no_rt_group))
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and "victim.sched.policy: SCHED_FIFO refused" in lines[0], p.stdout + p.stderr
    assert not (tmp_path / "res").exists(), "nothing started"


@needs_root
def test_every_configuration_refused_is_one_line_and_nothing_started(tmp_path, no_rt_group):
    exp = tmp_path / "fifo.toml"
    exp.write_text(EXPERIMENT)
    p = xtalk("run", exp, "--results", tmp_path / "res", "--skip-unavailable", "--skip-feasibility", preexec_fn=_in(no_rt_group))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stdout + p.stderr
    assert "none of the configurations can run on this machine" in lines[0] and "victim.sched.policy" in lines[0], lines[0]
    assert not (tmp_path / "res").exists(), "nothing started"
