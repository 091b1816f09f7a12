"""`jobs_from` and `probes` in experiment files: accepted declarations reach the plan; every
bad one is one line naming the field and the fix, exit code 2, nothing started."""

import pytest

from conftest import xtalk
from xtalk.config import experiment
from xtalk.errors import UsageError

GOOD = """
name = "e"
repetitions = 1
[victim]
body = "command"
argv = ["./build/periodic", "-n", "10"]
probes = { 1 = "step", 2 = "wake" }
jobs_from = { probe = "step", release = "wake" }
period = "5ms"
"""


def load(tmp_path, text):
    f = tmp_path / "exp.toml"
    f.write_text(text)
    return experiment.load(f)


def test_declaration_is_read(tmp_path):
    e = load(tmp_path, GOOD)
    assert e.victim.jobs_from.probe == "step" and e.victim.jobs_from.release == "wake"
    assert e.victim.probes == {"1": "step", "2": "wake"} and e.victim.period_declared()


def test_undeclared_period_is_known(tmp_path):
    e = load(tmp_path, GOOD.replace('period = "5ms"\n', ""))
    assert not e.victim.period_declared()


def test_ids_are_canonical_and_digits_need_no_name(tmp_path):
    e = load(tmp_path, GOOD.replace('{ 1 = "step", 2 = "wake" }', '{ 01 = "step" }').replace('release = "wake"', 'release = "2"'))
    assert e.victim.probes == {"1": "step"} and e.victim.jobs_from.release == "2"


@pytest.mark.parametrize("old,new,needle", [
    ('{ probe = "step", release = "wake" }', '{ release = "wake" }', "victim.jobs_from: give exactly one of 'probe'"),
    ('{ probe = "step", release = "wake" }', '{ probe = "step", trace = "main" }', "give exactly one of"),
    ('{ probe = "step", release = "wake" }', '{ trace = "main", end = "step" }', "victim.jobs_from: 'end' names a probe"),
    ('{ probe = "step", release = "wake" }', '{ probe = "stpe" }', "victim: jobs_from.probe: no probe named 'stpe'"),
    ('{ probe = "step", release = "wake" }', '{ probe = "step", release = "wkae" }', "jobs_from.release: no probe named"),
    ('{ probe = "step", release = "wake" }', '{ probe = "step", colour = "red" }', "victim.jobs_from.colour: unknown key"),
    ('{ probe = "step", release = "wake" }', '{ probe = "a b" }', "victim.jobs_from.probe"),
    ('{ 1 = "step", 2 = "wake" }', '{ one = "step" }', "probes.one: a probe id is an integer"),
    ('{ 1 = "step", 2 = "wake" }', '{ 1 = "step", 2 = "step" }', "probes.2: the name 'step' is given twice"),
    ('{ 1 = "step", 2 = "wake" }', '{ 1 = "12" }', "probes.1: '12' is not a probe name"),
    ('body = "command"\nargv = ["./build/periodic", "-n", "10"]', 'body = "pi"\niterations = 5\njobs = 3',
     "'probes' names a command's probes"),
    ('period = "5ms"', 'period = "5ms"\nepsilon = { metric = "exec", bound = "1.5y" }', "victim.epsilon"),
    ('period = "5ms"', 'period = "5ms"\nepsilon = { metric = "cpu", bound = "1.5x" }', "victim.epsilon.metric"),
])
def test_bad_declaration(tmp_path, old, new, needle):
    assert old in GOOD
    with pytest.raises(UsageError) as e:
        load(tmp_path, GOOD.replace(old, new, 1))
    line = str(e.value)
    assert len(line.splitlines()) == 1 and needle in line, line


def test_bad_declaration_exits_2_and_starts_nothing(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(GOOD.replace('{ probe = "step", release = "wake" }', '{ probe = "stpe" }'))
    out = xtalk("run", f, "--results", tmp_path / "res")
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "victim: jobs_from.probe: no probe named 'stpe'" in lines[0], out.stderr
    assert not (tmp_path / "res").exists(), "nothing may start on bad input"


def test_jobs_from_is_for_commands(tmp_path):
    text = GOOD.replace('body = "command"\nargv = ["./build/periodic", "-n", "10"]\nprobes = { 1 = "step", 2 = "wake" }',
                        'body = "pi"\niterations = 5\njobs = 3')
    with pytest.raises(UsageError, match="jobs_from: body 'pi' makes its own jobs"):
        load(tmp_path, text)
