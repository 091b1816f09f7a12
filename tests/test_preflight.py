"""Pre-flight: a policy the kernel will refuse is refused before anything starts, with its
true cause. Root inside a cgroup without RT runtime has CAP_SYS_NICE, yet SCHED_FIFO fails."""

import os
from pathlib import Path

import pytest

import capabilities
from conftest import needs_root, xtalk

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
