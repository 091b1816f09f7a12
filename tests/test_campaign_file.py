"""Campaign files: strict parsing with file:line errors, grids, two-way feasibility,
exclusions, interleaving. No run starts here."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from conftest import xtalk
from xtalk.campaign.grid import expand_campaign, variants
from xtalk.campaign.lines import line_of
from xtalk.campaign.schema import parse
from xtalk.errors import UsageError
from xtalk.targets.agent import TargetFacts

BASE = """name = "c"
repetitions = 2

[[application]]
name = "app"
criticality = "A"
epsilon = { metric = "response", statistic = "max", bound = "3ms" }
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
cpus = "last"

[[configuration]]
name = "other"

[[configuration]]
name = "fifo"
policy = "fifo"
priority = 80

[[scenario]]
name = "read"
enemies = [{ kind = "read", bytes = "1MiB", cpus = "others" }]
"""

FACTS = TargetFacts(online_cpus=[0, 1], caches={"l1d": 32768, "l2": 1 << 20, "llc": 8 << 20}, environment={})


@pytest.mark.parametrize("old,new,line,needle", [
    ('jobs = 5\n', 'jobs = 5\ncolour = "red"\n', 12, "application[0].colour: unknown key"),
    ('jobs = 5\n', 'jobs = 0\n', 11, "application[0].jobs: should be at least 1"),
    ('criticality = "A"\n', 'criticality = "E"\n', 6, "application[0].criticality: should be 'A', 'B', 'C' or 'D' (got 'E'); change it"),
    ('priority = 80', 'priority = 800', 20, "configuration[1].priority: should be at most 99 (got 800); change it"),
    ('bound = "3ms" }', 'bound = "3ms", relative = 1.2 }', 7, "give exactly one of 'bound'"),
    ('metric = "response"', 'metric = "latency"', 7, "application[0].epsilon.metric: should be 'exec' or 'response'"),
    ('statistic = "max"', 'statistic = "worst"', 7, "application[0].epsilon.statistic: 'worst' is not max, median"),
    ('bytes = "1MiB", cpus', 'bytes = "1MiB", colour = 1, cpus', 24, "scenario[0].enemies[0].colour: unknown key"),
    ('name = "app"\n', '', 4, "application[0].name: required; add it"),
    ('priority = 80', 'priority = = 80', 20, "not valid TOML: Invalid value (column 12); fix the syntax"),
    # ε bounds read at plan time as an experiment's are (issue 31 item 5), not by the summary
    # of the finished campaign.
    ('bound = "3ms" }', 'bound = "banana" }', 7, "cannot read duration 'banana'"),
    ('bound = "3ms" }', 'bound = "-5ms" }', 7, "cannot read duration '-5ms'"),
    ('bound = "3ms" }', 'bound = "0ms" }', 7, "duration must be positive"),
    ('bound = "3ms" }', 'bound = "1e999ms" }', 7, "is not a finite duration"),
    ('bound = "3ms" }', 'bound = "inf" }', 7, "cannot read duration 'inf'"),
    ('bound = "3ms" }', 'bound = "1e9x" }', 7, "application[0].epsilon.bound: the factor '1e9x' is above 1000"),
])
def test_bad_campaign_file_is_one_line_with_file_line_field_and_fix(tmp_path, old, new, line, needle):
    assert old in BASE
    f = tmp_path / "c.toml"
    f.write_text(BASE.replace(old, new))
    out = xtalk("campaign", "plan", f)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"xtalk: {f}:{line}: "), err
    assert needle in err, err


def test_line_lookup_follows_tables_arrays_and_inline_tables():
    text = BASE + '\n[[grid]]\nmode = "zip"\naxes = { "victim.bytes" = ["16KiB"] }\n[[two_way]]\nname = "t"\nenemy = { kind = "pi" }\n'
    assert line_of(text, ("configuration", 1, "policy")) == 19
    assert line_of(text, ("application", 0, "epsilon", "bound")) == 7
    assert line_of(text, ("grid", 0, "axes")) == 28
    assert line_of(text, ("two_way", 0, "enemy", "kind")) == 31
    assert line_of(text, ("scenario", 0, "enemies", 0, "bytes")) == 24


def test_combination_errors_name_the_cell(tmp_path):
    # A configuration that is fine alone but not with this victim: found before any run.
    c = parse(BASE.replace('priority = 80', 'priority = 80\n[[configuration]]\nname = "rr"\npolicy = "rr"'), "c.toml")
    with pytest.raises(UsageError, match=r"configuration 'rr'.*victim: policy 'rr' needs 'priority'"):
        expand_campaign(c, FACTS, "c.toml")


def test_grid_modes_give_the_expected_variants():
    product = parse(BASE + '[[grid]]\naxes = { "victim.bytes" = ["16KiB", "256KiB", "16MiB"], "enemy.bytes" = ["1MiB", "2MiB"] }\n', "c")
    assert len(variants(product)) == 6
    zipped = parse(BASE + '[[grid]]\nmode = "zip"\naxes = { "victim.bytes" = ["16KiB", "256KiB"], "victim.period" = ["1ms", "2ms"] }\n', "c")
    assert [p for _, p in variants(zipped)] == [{"victim.bytes": "16KiB", "victim.period": "1ms"},
                                                {"victim.bytes": "256KiB", "victim.period": "2ms"}]
    listed = parse(BASE + '[[grid]]\nmode = "list"\npoints = [{ "victim.bytes" = "l1d/2" }, { "victim.bytes" = "l2/2" }]\n', "c")
    runs = expand_campaign(listed, FACTS).runs
    # 2 configurations × 2 variants × (solo + read) × 2 repetitions
    assert len(runs) == 16
    sizes = Counter(r.plan.victim.body.bytes for r in runs)
    assert sizes == {16384: 8, 524288: 8}
    assert {r.labels["victim.bytes"] for r in runs} == {"l1d/2", "l2/2"}
    with pytest.raises(UsageError, match="zip' needs axes of equal length"):
        parse(BASE + '[[grid]]\nmode = "zip"\naxes = { "victim.bytes" = ["16KiB"], "victim.period" = ["1ms", "2ms"] }\n', "c")
    with pytest.raises(UsageError, match=r"c:\d+: grid\[0\]: axis 'bytes' is not a victim or enemy field"):
        parse(BASE + '[[grid]]\naxes = { "bytes" = ["16KiB"] }\n', "c")


TWO_WAY = """
[[two_way]]
name = "pi"
enemy = { kind = "pi", policy = "deadline", reservation = { runtime = "1ms" } }
share = "reservation.runtime"
counts = [1, 2, 4]
totals = ["1ms", "3ms", "10ms"]
"""


def test_two_way_cells_split_the_total_evenly_and_exclude_infeasible_ones():
    c = parse(BASE.replace('period = "2ms"', 'period = "4ms"') + TWO_WAY, "c")
    exp = expand_campaign(c, FACTS)
    cells = {(r.labels["enemies"], r.labels["total"]): r.plan for r in exp.runs if r.labels.get("two_way") == "pi"}
    # period 4 ms, 2 cores: 1 ms/1, 1 ms/2, 1 ms/4, 3 ms/1, 3 ms/2, 3 ms/4 fit; 10 ms ≥ 2 × 4 ms never fits.
    assert sorted(cells) == sorted([(n, t) for t in ("1ms", "3ms") for n in ("1", "2", "4")])
    plan = cells[("4", "3ms")]
    assert len(plan.enemies) == 4
    assert {e.sched.runtime_ns for e in plan.enemies} == {750_000}
    assert {e.sched.period_ns for e in plan.enemies} == {4_000_000}
    reasons = Counter(why.split()[0] + " " + why.split()[1] for _, why in exp.excluded)
    # Per configuration: 10 ms on 1 or 2 enemies exceeds a period each; on 4, the machine.
    assert reasons == {"per-enemy share": 2 * 2, "total demand": 1 * 2}
    c2 = parse(BASE + TWO_WAY, "c")  # period 2 ms: 3 ms on one enemy exceeds its period
    assert any("per-enemy share 3 ms ≥ period 2 ms" in why for _, why in expand_campaign(c2, FACTS).excluded)


def test_two_way_intensity_share_is_cpu_time_per_period_as_a_duty_cycle():
    c = parse(BASE.replace('period = "2ms"', 'period = "10ms"') + """
[[two_way]]
name = "duty"
enemy = { kind = "pi", cpus = "others" }
share = "intensity"
counts = [1, 2, 4]
totals = ["2ms", "7ms", "30ms"]
""", "c")
    exp = expand_campaign(c, FACTS)
    cells = {(r.labels["enemies"], r.labels["total"]): r.plan for r in exp.runs if r.labels.get("two_way") == "duty"}
    # 30 ms is more than 2 cores × 10 ms whatever the count: excluded, like the seed's table.
    assert sorted(cells) == sorted([(n, t) for t in ("2ms", "7ms") for n in ("1", "2", "4")])
    assert {e.intensity for e in cells[("1", "7ms")].enemies} == {70.0}
    assert {e.intensity for e in cells[("4", "2ms")].enemies} == {5.0}
    assert len(cells[("4", "7ms")].enemies) == 4


def test_exclusions_and_interleaving():
    c = parse(BASE.replace("repetitions = 2", 'repetitions = 3\nexclude = [{ configuration = "fifo", scenario = "read" }]'), "c")
    runs = expand_campaign(c, FACTS).runs
    assert len(runs) == 3 * 3  # (other: solo, read; fifo: solo) × 3
    assert not [r for r in runs if r.labels["configuration"] == "fifo" and r.labels["scenario"] == "read"]
    # Interleaved: each repetition holds every remaining cell once, in a shuffled order.
    for rep in range(3):
        block = runs[rep * 3:(rep + 1) * 3]
        assert {r.labels["repetition"] for r in block} == {str(rep)}
    orders = {tuple((r.labels["configuration"], r.labels["scenario"]) for r in runs[k * 3:(k + 1) * 3]) for k in range(3)}
    assert len(orders) > 1, "every repetition in the same order"
    assert [r.run_id for r in runs] == [r.run_id for r in expand_campaign(c, FACTS).runs]  # seeded
    assert len({r.run_id for r in runs}) == len(runs)
    bad = parse(BASE.replace("repetitions = 2", 'repetitions = 2\nexclude = [{ colour = "red" }]'), "c")
    with pytest.raises(UsageError, match=r"exclude\[0\].colour: no run has this label"):
        expand_campaign(bad, FACTS)


def test_schema_command_prints_a_json_schema():
    out = xtalk("campaign", "schema")
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    assert {"application", "configuration", "grid", "two_way", "exclude"} <= set(schema["properties"])
    assert schema["required"] == ["name", "application"]


@pytest.mark.parametrize("enemy, share, needle", [
    ('{ kind = "icache" }', "bytes", "'bytes' is not a parameter of enemy 'icache'"),
    ('{ kind = "read", bytes = "1MiB" }', "elements", "'elements' is not a parameter of enemy 'read'"),
])
def test_a_two_way_share_the_enemy_kind_lacks_is_refused_in_one_line_from_the_catalog(enemy, share, needle):
    text = BASE + f'\n[[two_way]]\nname = "w"\nenemy = {enemy}\nshare = "{share}"\ncounts = [1, 2]\ntotals = ["1MiB", "2MiB"]\n'
    with pytest.raises(UsageError, match=re.escape(needle)):
        parse(text, "c")


def test_a_two_way_byte_share_below_the_kinds_minimum_is_excluded_with_the_catalogs_bound():
    text = BASE + ('\n[[two_way]]\nname = "m"\nenemy = { kind = "memhog", bytes = "1MiB" }\nshare = "bytes"\n'
                   'counts = [1, 4]\ntotals = ["2MiB"]\n')
    exp = expand_campaign(parse(text, "c"), FACTS)
    assert any("per-enemy buffer 524288 B is below 1048576 B" in why for _, why in exp.excluded)
    assert any(r.labels.get("two_way") == "m" and r.labels["enemies"] == "1" for r in exp.runs)
