"""Bad experiment files: one line naming the field and the fix, exit code 2, nothing started."""

import pytest

from conftest import xtalk

GOOD = """
name = "e"
repetitions = 1
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
cpus = "last"
[[scenario]]
name = "r"
enemies = [{ kind = "read", bytes = "1MiB", cpus = "others", per_cpu = true }]
"""


def run_bad(tmp_path, text):
    f = tmp_path / "exp.toml"
    f.write_text(text)
    out = xtalk("run", f, "--results", tmp_path / "res")
    return out


@pytest.mark.parametrize("old,new,needle", [
    ('jobs = 5', 'jobs = 5\ncolour = "red"', "victim.colour: unknown key"),
    ('jobs = 5', 'jobs = "five"', "victim.jobs"),
    ('jobs = 5\n', '', "'jobs' is required; add it"),
    ('cpus = "last"', 'cpus = [4096]', "victim.cpus: CPU 4096 does not exist"),
    ('body = "sum"', 'body = "sorting"', "victim.body"),
    ('period = "2ms"', 'period = "2 fortnights"', "victim.period: cannot read duration"),
    ('cpus = "last"', 'cpus = "last"\npolicy = "fifo"', "policy 'fifo' needs 'priority'"),
    ('cpus = "last"', 'policy = "deadline"\nreservation = { runtime = "3ms", deadline = "2ms" }',
     "victim.sched.runtime_ns"),
    ('kind = "read"', 'kind = "nuke"', "scenario[0].enemies[0].kind"),
    ('bytes = "1MiB"', 'bytes = "99TiB"', "only"),
    # A bound of the plan's load model, named in the file's key (not prefixed with the kind).
    ('bytes = "1MiB"', 'bytes = "1KiB"', "scenario[0].enemies[0].bytes: Input should be greater than or equal to 4096 (got 1024)"),
    ('name = "r"', 'name = "solo"', "scenario 'solo'"),
    ('repetitions = 1', 'repetitions = 1\n[victim', "not valid TOML"),
])
def test_bad_experiment(tmp_path, old, new, needle):
    assert old in GOOD
    out = run_bad(tmp_path, GOOD.replace(old, new, 1))
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0], lines[0]
    assert not (tmp_path / "res").exists(), "nothing may start on bad input"


def test_missing_file(tmp_path):
    out = xtalk("run", tmp_path / "nope.toml")
    assert out.returncode == 2 and "cannot read" in out.stderr


def test_plan_needs_a_file_or_schema():
    out = xtalk("plan")
    assert out.returncode == 2 and "--schema" in out.stderr
