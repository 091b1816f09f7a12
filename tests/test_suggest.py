""""Did you mean": a mistyped key or enemy kind in an experiment or campaign file is one line,
exit 2, with the nearest spelling when there is one near (and only then)."""

import re

import pytest

from conftest import ROOT, xtalk
from xtalk.campaign.schema import load as load_campaign
from xtalk.config.experiment import load
from xtalk.errors import UsageError

QUICKSTART = (ROOT / "examples" / "quickstart.toml").read_text()
CAMPAIGN = (ROOT / "examples" / "bessad-contention.toml").read_text()


def _error(tmp_path, text: str, loader=load) -> str:
    f = tmp_path / "x.toml"
    f.write_text(text)
    with pytest.raises(UsageError) as e:
        loader(f)
    return str(e.value)


@pytest.mark.parametrize("old, new, field, near", [
    ('kind = "read"', 'kind = "reed"', "scenario[0].enemies[0].kind", "did you mean 'read'?"),
    ("\nrepetitions =", "\nrepetitons =", "repetitons", "did you mean 'repetitions'?"),
    ('\nperiod = "10ms"', '\nperod = "10ms"', "victim.perod", "did you mean 'period'?"),
    ('bytes = "4*llc", cpus', 'byts = "4*llc", cpus', "scenario[0].enemies[0].byts", "did you mean 'bytes'?"),
])
def test_a_near_miss_is_named(tmp_path, old, new, field, near):
    assert old in QUICKSTART
    line = _error(tmp_path, QUICKSTART.replace(old, new, 1))
    assert f": {field}: " in line and near in line, line
    assert "\n" not in line


@pytest.mark.parametrize("old, new, fix", [
    ('kind = "read"', 'kind = "zzzz"', "(got 'zzzz'); change it"),
    ("\nrepetitions =", "\nxyzzy =", "xyzzy: unknown key; remove it or check its spelling"),
])
def test_nothing_near_suggests_nothing(tmp_path, old, new, fix):
    line = _error(tmp_path, QUICKSTART.replace(old, new, 1))
    assert fix in line and "did you mean" not in line, line


def test_a_campaign_key_near_miss_is_named(tmp_path):
    line = _error(tmp_path, CAMPAIGN.replace("\nrepetitions =", "\nrepetitons =", 1), load_campaign)
    assert re.search(r"x\.toml:\d+: repetitons: unknown key; did you mean 'repetitions'\? \(or remove it\)$", line), line


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text(QUICKSTART.replace('kind = "read"', 'kind = "reed"', 1))
    r = xtalk("plan", f)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.rstrip().endswith("did you mean 'read'?"), r.stderr
