"""One ε grammar and one `[[application]]` grammar for experiment files, campaign files and
the command line (docs/experiments.md, "ε"): each old spelling still loads to the same model
and says so in one line per file; the new one says nothing; the examples and the docs'
snippets use only the new one; a bad value is one line naming the field and the fix, exit 2.
No agent runs here (`xtalk plan` of these files asks none)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import xtalk
from xtalk.campaign import schema as campaign_schema
from xtalk.campaign.detect import is_campaign_file
from xtalk.config import experiment
from xtalk.errors import UsageError
from xtalk.results import epsilon as eps

ROOT = Path(__file__).resolve().parents[1]

VICTIM = """name = "v"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
epsilon = {EPS}
"""

APPLICATIONS = """name = "apps"
[[application]]
name = "a"
criticality = "A"
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
epsilon = {EPS}

[[application]]
name = "b"
criticality = "D"
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
epsilon = {EPS}
"""

CAMPAIGN = """name = "c"
[[application]]
name = "app"
criticality = "B"
epsilon = {EPS}
{VICTIM}
"""
FLAT_VICTIM = 'body = "sum"\nbytes = "64KiB"\nperiod = "2ms"\njobs = 5\ncpus = "last"'
NESTED_VICTIM = 'victim = { body = "sum", bytes = "64KiB", period = "2ms", jobs = 5, cpus = "last" }'


def _write(tmp_path, text, name="f.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _deprecations(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if ": deprecated: " in line]


# (template, old ε, the same ε in the one grammar, the old spellings it holds)
CASES = [
    (VICTIM, '{ metric = "exec", bound = "1.2x" }', '{ metric = "exec", statistic = "max", bound = "1.2x" }',
     ["without 'statistic'"]),
    (VICTIM, '{ bound = "12ms" }', '{ metric = "exec", statistic = "max", bound = "12ms" }',
     ["without 'metric'", "without 'statistic'"]),
    (APPLICATIONS, '{ metric = "execution", statistic = "p99", relative = 2.0 }',
     '{ metric = "exec", statistic = "p99", bound = "2x" }', ['metric = "execution"', "relative = 2.0"]),
    (APPLICATIONS, '{ metric = "response", statistic = "p999", bound = "4ms" }',
     '{ metric = "response", statistic = "p99.9", bound = "4ms" }', ['statistic = "p999"']),
    (APPLICATIONS, '{ relative = 1.5 }', '{ metric = "response", statistic = "p99", bound = "1.5x" }',
     ["relative = 1.5", "without 'metric'", "without 'statistic'"]),
]


@pytest.mark.parametrize("template, old, new, spellings", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_each_old_epsilon_spelling_of_an_experiment_loads_the_same_and_says_so_once(tmp_path, capsys, template, old,
                                                                                    new, spellings):
    old_file = _write(tmp_path, template.replace("{EPS}", old), "old.toml")
    new_file = _write(tmp_path, template.replace("{EPS}", new), "new.toml")
    a, b = experiment.load(old_file), experiment.load(new_file)
    said = _deprecations(capsys)
    assert a == b
    # One line per old spelling, though the applications file writes each twice; none for the new file.
    assert len(said) == len(spellings), said
    for line, spelling in zip(said, spellings):
        assert line.startswith(f"{old_file}: deprecated: ") and spelling in line, line
    assert all(str(new_file) not in line for line in said)
    experiment.load(old_file)  # once per file: a second load says nothing
    assert _deprecations(capsys) == []


def test_every_old_spelling_of_a_campaign_loads_the_same_and_says_so_once(tmp_path, capsys):
    old = CAMPAIGN.replace("{EPS}", '{ on = "exec", relative = 1.5 }').replace("{VICTIM}", NESTED_VICTIM)
    new = CAMPAIGN.replace("{EPS}", '{ metric = "exec", statistic = "max", bound = "1.5x" }').replace("{VICTIM}", FLAT_VICTIM)
    old_file, new_file = _write(tmp_path, old, "old.toml"), _write(tmp_path, new, "new.toml")
    a, _ = campaign_schema.load(old_file)
    b, _ = campaign_schema.load(new_file)
    assert a == b
    said = _deprecations(capsys)
    expect = ['victim = { ... } is now', 'on = "exec" is now metric = "exec"', 'relative = 1.5 is now bound = "1.5x"',
              "without 'statistic' meant statistic = \"max\""]
    assert len(said) == len(expect), said
    for needle in expect:
        assert sum(needle in line and line.startswith(f"{old_file}: deprecated: ") for line in said) == 1, (needle, said)
    campaign_schema.load(old_file)
    assert _deprecations(capsys) == []


def test_old_and_new_spellings_expand_to_the_same_runs(tmp_path):
    from xtalk.campaign.grid import expand_campaign
    from xtalk.targets.agent import TargetFacts

    facts = TargetFacts(online_cpus=[0, 1], caches={"l1d": 32768, "l2": 1 << 20, "llc": 8 << 20}, environment={})
    new = CAMPAIGN.replace("{EPS}", '{ metric = "response", statistic = "p99", bound = "3ms" }').replace("{VICTIM}", FLAT_VICTIM)
    old = CAMPAIGN.replace("{EPS}", '{ on = "response", statistic = "p99", bound = "3ms" }').replace("{VICTIM}", NESTED_VICTIM)
    runs = [expand_campaign(campaign_schema.parse(text, "c.toml"), facts, "c.toml").runs for text in (old, new)]
    assert len(runs[0]) > 0
    assert [(r.labels, r.plan) for r in runs[0]] == [(r.labels, r.plan) for r in runs[1]]


def test_xtalk_plan_says_each_old_spelling_once_and_nothing_for_the_new(tmp_path):
    """Agent-marked (tests/conftest.py AGENT_TESTS): planning asks the target's facts."""
    old = _write(tmp_path, APPLICATIONS.replace("{EPS}", '{ metric = "execution", statistic = "p99", relative = 2.0 }'),
                 "old.toml")
    new = _write(tmp_path, APPLICATIONS.replace("{EPS}", '{ metric = "exec", statistic = "p99", bound = "2x" }'), "new.toml")
    outs = [xtalk("plan", f) for f in (old, new)]
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    assert outs[0].stdout.replace("old.toml", "new.toml") == outs[1].stdout
    assert outs[1].stderr == ""
    assert outs[0].stderr.strip().splitlines() == [
        f'{old}: deprecated: epsilon: metric = "execution" is now metric = "exec" (as on the command line)',
        f'{old}: deprecated: epsilon: relative = 2.0 is now bound = "2x" (a factor of alone)']


def test_a_flat_application_file_is_a_campaign_only_when_it_says_so(tmp_path):
    one = _write(tmp_path, CAMPAIGN.replace("{EPS}", '{ metric = "exec", statistic = "max", bound = "2x" }')
                 .replace("{VICTIM}", FLAT_VICTIM), "one.toml")
    two = _write(tmp_path, APPLICATIONS.replace("{EPS}", '{ metric = "exec", statistic = "max", bound = "2x" }'), "two.toml")
    grid = _write(tmp_path, two.read_text() + '\n[[grid]]\naxes = { "victim.bytes" = ["16KiB", "32KiB"] }\n', "grid.toml")
    assert is_campaign_file(one)  # one application: an experiment would refuse it
    assert not is_campaign_file(two)  # two, measured side by side
    assert is_campaign_file(grid)  # a campaign-only key


@pytest.mark.parametrize("template, bad, field, fix", [
    (VICTIM, '{ metric = "latency", statistic = "max", bound = "2x" }', "victim.epsilon.metric", "should be 'exec' or 'response'"),
    (VICTIM, '{ metric = "exec", statistic = "worst", bound = "2x" }', "victim.epsilon.statistic", 'write e.g. statistic = "max"'),
    (VICTIM, '{ metric = "exec", statistic = "max", bound = "fast" }', "victim.epsilon.bound", 'a factor of alone such as "1.2x"'),
    (VICTIM, '{ metric = "exec", statistic = "max", bound = "-2x" }', "victim.epsilon.bound", "the factor must be positive"),
    (VICTIM, '{ metric = "exec", statistic = "max", bound = "2x", relative = 2.0 }', "victim.epsilon", "give exactly one of 'bound'"),
    (VICTIM, '{ metric = "exec", statistc = "max", bound = "2x" }', "victim.epsilon.statistc", "did you mean 'statistic'?"),
    (APPLICATIONS, '{ metric = "exec", statistic = "max", relative = "lots" }', "application[0].epsilon", 'write bound = "1.2x"'),
])
def test_a_bad_epsilon_is_one_line_naming_the_field_and_the_fix(tmp_path, template, bad, field, fix):
    f = _write(tmp_path, template.replace("{EPS}", bad))
    with pytest.raises(UsageError) as e:
        experiment.load(f)
    line = str(e.value)
    assert line.startswith(f"{f}: {field}: ") and fix in line and "\n" not in line, line


def test_a_bad_campaign_application_exits_2_naming_the_key_where_the_file_has_it(tmp_path):
    text = CAMPAIGN.replace("{EPS}", '{ metric = "exec", statistic = "max", bound = "2x" }').replace("{VICTIM}", FLAT_VICTIM)
    f = _write(tmp_path, text.replace("jobs = 5", "jobs = 5\nperiodd = 3"))
    out = xtalk("plan", f)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"xtalk: {f}:10: application[0].periodd: unknown key; did you mean 'period'? (or remove it)"
    typo = _write(tmp_path, text.replace('criticality = "B"', 'criticality = "B"\ndescriptin = "the loop"'), "typo.toml")
    out = xtalk("plan", typo)  # a key of the application's own, not of its victim: still found
    assert out.returncode == 2 and "typo.toml:5: application[0].descriptin: unknown key; did you mean 'description'?" \
        in out.stderr, out.stderr
    both = _write(tmp_path, text + NESTED_VICTIM + "\n", "both.toml")
    out = xtalk("plan", both)
    assert out.returncode == 2 and "the victim's keys go in the [[application]] table itself" in out.stderr, out.stderr


def test_the_command_line_speaks_the_file_grammar():
    """`--epsilon METRIC:STATISTIC:BOUND` is the file's three keys, values and meaning."""
    from xtalk.config.epsilon import VictimEpsilon

    for text in ("exec:max:1.2x", "response:p99.9:12ms", "exec:median:250us"):
        metric, statistic, bound = text.split(":")
        assert eps.parse(text) == VictimEpsilon(metric=metric, statistic=statistic, bound=bound).spec()
    with pytest.raises(UsageError, match="metric 'execution' is not 'exec' or 'response'"):
        eps.parse("execution:max:1.2x")


OLD = [(re.compile(r'\bon\s*=\s*"(exec|response)"'), "on = (metric)"), (re.compile(r'"execution"'), '"execution"'),
       (re.compile(r"\brelative\s*=\s*[0-9]"), "relative = (bound = \"Nx\")"), (re.compile(r'"p999"'), '"p999"'),
]


def _nested_victims(text: str) -> bool:
    """Whether an `[[application]]` table holds a `victim = { ... }` (in a `[[configuration]]`
    the key is the victim's settings, not an old spelling)."""
    header = None
    for line in text.splitlines():
        if line.lstrip().startswith("["):
            header = line.split("#")[0].strip()
        elif header == "[[application]]" and re.match(r"^\s*victim\s*=", line):
            return True
    return False


def _snippets() -> list[tuple[str, str]]:
    """Every example file and every TOML snippet of the docs and the README."""
    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").rglob("*.toml"))
           if "models" not in p.parts]
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", md.read_text(), re.S)):
            out.append((f"{md.relative_to(ROOT)} toml block {i}", block))
    return out


def test_examples_and_docs_use_no_old_spelling(capsys):
    assert _nested_victims(CAMPAIGN.replace("{VICTIM}", NESTED_VICTIM)) and not _nested_victims(CAMPAIGN.replace("{VICTIM}", FLAT_VICTIM))
    snippets = _snippets()
    assert len(snippets) > 30
    for where, text in snippets:
        for pattern, name in OLD:
            assert not pattern.search(text), f"{where}: old spelling {name}"
        assert not _nested_victims(text), f"{where}: old spelling victim = {{ ... }} in [[application]]"
    for p in sorted((ROOT / "examples").rglob("*.toml")):
        if "models" in p.parts:
            continue
        (campaign_schema.load if is_campaign_file(p) else experiment.load)(p)
    assert _deprecations(capsys) == []


def test_worst_takes_the_metric_in_the_words_of_epsilon(tmp_path, capsys):
    """`xtalk worst --metric exec | response`; the old `execution` is read and said once."""
    from xtalk.worst.inputs import request

    victim = 'body = "chase", bytes = "l2", jobs = 5'
    new = request(None, victim, "10m", "p99", "exec", tmp_path / "a", None, False, 0)
    assert capsys.readouterr().err == ""
    old = request(None, victim, "10m", "p99", "execution", tmp_path / "b", None, False, 0)
    assert old.metric == new.metric == "exec"
    assert capsys.readouterr().err.strip() == ('--metric: deprecated: "execution" is now "exec" '
                                               '(as in --epsilon and epsilon = { metric = "exec" })')
    with pytest.raises(UsageError, match="--metric: 'latency' is not one of exec, response"):
        request(None, victim, "10m", "p99", "latency", tmp_path / "c", None, False, 0)
