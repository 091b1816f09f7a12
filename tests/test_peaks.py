"""Channel peaks (peaks.py, peaks_measure.py): each enemy's rate against its channel's
measured peak, the saved file, `load = "50%"` turned into a rate, the counter signature.

All but the last test are pure (recorded machine facts, hand-made peak files); the last
measures a few peaks on this machine with the agent, briefly, and asserts only what holds
by construction (no timing of this machine)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xtalk import catalog, peaks as pk
from xtalk.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"
MACHINES = FIXTURES / "machines"


def env_of(name: str) -> dict:
    return json.loads((MACHINES / name).read_text())


@pytest.fixture
def peaks_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "peaks"
    monkeypatch.setenv(pk.ENV_DIR, str(d))
    return d


def sample(env: dict) -> pk.Peaks:
    return pk.new(env, {
        "read": pk.ChannelPeak(kind="read", unit="bytes", one=10e9, all=16e9, copies=2),
        "write": pk.ChannelPeak(kind="ntstore", unit="bytes", one=8e9, all=12e9, copies=2),
        "l2": pk.ChannelPeak(kind="l2", unit="lines", one=1e9, all=2e9, copies=2),
    }, {"l1d": pk.LevelLatency(bytes=16384, rate=1e9), "dram": pk.LevelLatency(bytes=1 << 27, rate=1e7)}, pass_ms=300)


def test_channels_come_from_the_catalog_and_match_what_the_peaks_measure():
    from xtalk.peaks_measure import BANDWIDTH

    assert pk.channel_of("read") == "read" and pk.channel_of("ntstore") == "write" and pk.channel_of("copy") == "copy"
    assert pk.channel_of("chase") == pk.LATENCY and pk.channel_of("l2") == "l2" and pk.channel_of("syscall") == "kernel"
    assert pk.channel_of("external") is None  # a command of the user's: no channel claimed
    assert pk.channel_of("no-such-kind") is None
    # Each peak is measured by an enemy that loads that very channel, in the channel's unit.
    for channel, table in BANDWIDTH:
        assert pk.channel_of(table["kind"]) == channel, table
    assert len({catalog.kind(t["kind"]).unit for ch, t in BANDWIDTH if ch in ("read", "write", "copy")}) == 1


def test_percent_of_peak_one_copy_several_copies_and_chase_levels():
    env = env_of("x86-2socket-64core.json")
    p = sample(env)
    one = pk.share("read", 5e9, p, "bytes")
    assert one.percent == pytest.approx(50.0) and one.basis == "one CPU"
    two = pk.share("read", 4e9, p, "bytes", copies=2)  # 8 GB/s together of the 16 GB/s all-CPU peak
    assert two.percent == pytest.approx(50.0) and "2 copies" in two.basis
    assert pk.share("write", 4e9, p, "bytes").percent == pytest.approx(50.0)  # write measured by ntstore
    caches = pk.caches_of(env)
    dram = pk.share("chase", 5e6, p, "accesses", footprint=4 * caches["llc"], caches=caches)
    assert dram.percent == pytest.approx(50.0) and "DRAM" in dram.basis
    l1 = pk.share("chase", 2e9, p, "accesses", footprint=caches["l1d"] // 4, caches=caches)
    assert l1.percent == pytest.approx(200.0)  # two chains in flight: beyond one chain's rate, said as it is
    # No percentage where it would mean nothing: no peaks, no channel, no peak for the channel, other units,
    # a level not measured.
    assert pk.share("read", 5e9, None, "bytes") is None
    assert pk.share("external", 1.0, p, "ms") is None
    assert pk.share("copy", 1e9, p, "bytes") is None
    assert pk.share("loads", 1e9, p, "loads") is None
    assert pk.share("chase", 1e7, p, "accesses", footprint=caches["l2"] // 4, caches=caches) is None
    # A read over a footprint that stays in a cache loads that cache, not the memory peak's channel.
    assert pk.share("read", 5e9, p, "bytes", footprint=caches["l1d"] // 2, caches=caches) is None
    assert pk.share("read", 5e9, p, "bytes", footprint=4 * caches["llc"], caches=caches).percent == pytest.approx(50.0)
    # The aligned buslock (split = false) makes cache locks, not the bus locks its peak counts.
    p.channels["bus-lock"] = pk.ChannelPeak(kind="buslock", unit="locks", one=5e5, all=5e5, copies=2)
    assert pk.share("buslock", 2.5e5, p, "locks", params={"bytes": 4096, "split": True}).percent == pytest.approx(50.0)
    assert pk.share("buslock", 2.5e5, p, "locks").percent == pytest.approx(50.0)  # split by default
    assert pk.share("buslock", 4.5e7, p, "locks", params={"bytes": 4096, "split": False}) is None


def test_saved_file_round_trips_and_is_keyed_by_the_machine(peaks_dir):
    env, other = env_of("x86-2socket-64core.json"), env_of("cortex-a53-4core.json")
    assert pk.load(env) is None
    path = pk.save(sample(env), env)
    assert path.parent == peaks_dir and path.name.startswith("x86-64-server-processor")
    doc = json.loads(path.read_text())
    assert doc["schema"] == pk.SCHEMA and doc["version"] == pk.VERSION and doc["machine"] == pk.identity(env)
    back = pk.load(env)
    assert back == sample(env).model_copy(update={"measured": back.measured})
    assert back.latency["dram"].ns == pytest.approx(100.0)
    assert pk.load(other) is None  # another machine's peaks are not these
    # A new kernel is the same hardware: the same file.
    newer = json.loads(json.dumps(env))
    newer["kernel"]["release"] = "9.9.9"
    assert pk.path_for(newer) == path


def test_a_file_of_another_version_or_schema_is_refused_with_the_fix(peaks_dir):
    env = env_of("x86-2socket-64core.json")
    path = pk.save(sample(env), env)
    doc = json.loads(path.read_text())
    for change in ({"version": pk.VERSION + 1}, {"schema": "something-else"}):
        path.write_text(json.dumps({**doc, **change}))
        with pytest.raises(UsageError, match=r"re-measure with `xtalk characterize --peaks --remeasure`"):
            pk.load(env)
    path.write_text(json.dumps({**doc, "channels": {"read": {"kind": "read", "unit": "bytes", "one": -1, "copies": 1}}}))
    with pytest.raises(UsageError, match=r"channels\.read\.one"):
        pk.load(env)
    path.write_text("{ not json")
    with pytest.raises(UsageError, match="not a peak file"):
        pk.load(env)


def test_load_percentage_becomes_the_rate_that_gives_it_back(peaks_dir):
    env = env_of("x86-2socket-64core.json")
    pk.save(sample(env), env)
    caches = pk.caches_of(env)
    rate = pk.rate_for_load("read", "50%", "f", env)
    assert rate == pytest.approx(5e9)
    assert pk.share("read", rate, pk.load(env), "bytes").percent == pytest.approx(50.0)
    per_copy = pk.rate_for_load("ntstore", "75%", "f", env, copies=2)
    assert per_copy == pytest.approx(0.75 * 12e9 / 2)
    assert pk.rate_for_load("chase", "10 %", "f", env, footprint=4 * caches["llc"], caches=caches) == pytest.approx(1e6)
    assert pk.parse_load("50% of peak", "f") == pk.parse_load(" 50 % of the peak ", "f") == 0.5
    for bad in ("0%", "150%", "50", "half", "50% of bandwidth", "50% peak"):
        with pytest.raises(UsageError, match=r"^f: .* is not a load; give a percentage"):
            pk.rate_for_load("read", bad, "f", env)
    with pytest.raises(UsageError, match=r"^f: a [0-9]+-byte read stays in the L1D, and the read peak is of memory .*give `rate`"):
        pk.rate_for_load("read", "50%", "f", env, footprint=caches["l1d"] // 2, caches=caches)
    with pytest.raises(UsageError, match=r"^f: channel 'copy' of enemy 'copy' has no peak .*give `rate` instead"):
        pk.rate_for_load("copy", "50%", "f", env)


def test_load_without_saved_peaks_is_refused_naming_the_command(peaks_dir):
    env = env_of("x86-2socket-64core.json")
    with pytest.raises(UsageError) as e:
        pk.rate_for_load("read", "50%", "scenario[0].enemies[0].load", env)
    assert str(e.value) == (f"scenario[0].enemies[0].load: no peaks saved for this machine ({pk.machine_key(env)}); "
                            "run `xtalk characterize --peaks` first")


def _experiment(tmp_path: Path, enemy: str) -> Path:
    f = tmp_path / "exp.toml"
    f.write_text(f"""name = "closed-loop"
[victim]
body = "chase"
bytes = "l2/2"
accesses = 1000
period = "10ms"
jobs = 10
cpus = "last"
[[scenario]]
name = "half"
enemies = [{enemy}]
""")
    return f


def test_experiment_load_is_expanded_into_each_copys_rate(peaks_dir, tmp_path):
    from xtalk.config.expand import expand
    from xtalk.config.experiment import load
    from xtalk.targets.agent import TargetFacts, _caches, _cpu_list

    env = env_of("x86-2socket-64core.json")
    facts = TargetFacts(_cpu_list(env["cpu"]["online"]), _caches(env), env)
    exp = load(_experiment(tmp_path, '{ kind = "read", bytes = "4*llc", cpus = [0, 1], per_cpu = true, load = "50%" }'))
    with pytest.raises(UsageError, match=r"^scenario\[0\]\.enemies\[0\]\.load: no peaks saved .* run `xtalk characterize --peaks` first"):
        expand(exp, facts)
    pk.save(sample(env), env)
    runs = expand(exp, facts)
    rates = {e.name: e.rate for e in next(r for r in runs if r.scenario == "half").plan.enemies}
    assert rates == {"read@0": pytest.approx(4e9), "read@1": pytest.approx(4e9)}  # 50 % of 16 GB/s, two copies
    assert expand(load(_experiment(tmp_path, '{ kind = "read", bytes = "4*llc", cpus = [0], load = "50% of peak" }')), facts)
    bad = _experiment(tmp_path, '{ kind = "read", bytes = "4*llc", load = "half of peak" }')
    with pytest.raises(UsageError, match=r"scenario\[0\]\.enemies\[0\]\.load: .half of peak. is not a load; give a percentage"):
        load(bad)
    both = _experiment(tmp_path, '{ kind = "read", bytes = "4*llc", load = "50%", rate = 1e9 }')
    with pytest.raises(Exception, match="'load' and 'rate' both set"):
        load(both)


def test_counter_signature_from_a_recorded_enemy_and_the_no_pmu_line():
    fx = json.loads((FIXTURES / "peaks" / "enemy-counters.json").read_text())
    enemy = fx["enemy"]
    pmu = env_of("x86-2socket-64core.json")
    sig = pk.signature(enemy, pmu)
    ops = enemy["window_ops"]
    assert sig["per_1000"] == {"l1d": pytest.approx(1000 * 105e6 / ops), "llc": pytest.approx(1000 * 100e6 / ops)}
    assert sig["bus_per_1000"] == pytest.approx(1000 * 200e6 / ops)
    assert sig["own_level"] == "llc" and sig["leakage"] == {"l1d": pytest.approx(105 / 205)}
    line = pk.signature_text(sig, pmu)
    assert line.startswith("read@0: per 1000 bytes: L1D misses 16.4, LLC misses 15.6, bus accesses 31.2")
    assert "outside its own level (LLC): L1D 51%" in line
    # The development VM has no core PMU: one line, never zeros, even if counters were there.
    vm = env_of("dev-2vcpu-amd.json")
    assert pk.signature(enemy, vm) is None
    assert pk.signature_text(None, vm) == pk.NO_PMU == "no hardware PMU: counter signature not measured"
    no_counters = {k: v for k, v in enemy.items() if k != "counters"}
    assert pk.signature(no_counters, pmu) is None
    assert "0.0" not in pk.signature_text(None, pmu) and "not measured" in pk.signature_text(None, pmu)


def test_characterize_text_says_each_enemys_share_and_the_missing_peaks_once(peaks_dir):
    import pandas as pd

    from xtalk.characterize import loads_text

    env = env_of("dev-2vcpu-amd.json")
    rows = pd.DataFrame([{"enemy": "read", "copies": 1, "kind": "read", "channel": "read", "unit": "bytes",
                          "rate_per_copy": 5e9, "percent_of_peak": float("nan"), "basis": "", "signature": ""}])
    text = loads_text(rows, env)
    assert text.count("No peaks saved for this machine: run `xtalk characterize --peaks` first") == 1
    assert text.count(pk.NO_PMU) == 1 and "0 %" not in text
    pk.save(sample(env), env)
    rows.loc[0, ["percent_of_peak", "basis"]] = [50.0, "one CPU"]
    text = loads_text(rows, env)
    assert "No peaks saved" not in text
    assert "- read ×1: 5 GB/s per copy: 50 % of the read peak (one CPU)" in text


def test_peaks_measured_here_are_positive_and_saved(agent, facts, tmp_path, monkeypatch):
    """Six passes of 50 ms (read and bus locks, one CPU and all; an L1D and an L2 chase): rates positive
    and finite, every CPU counted in the all-CPU pass, chase footprints growing level by
    level (by construction; their latencies need not on a noisy VM), the file read back."""
    from xtalk import peaks_measure

    monkeypatch.setenv(pk.ENV_DIR, str(tmp_path / "peaks"))
    x86 = facts.environment["kernel"]["machine"] == "x86_64"
    got = peaks_measure.measure(facts, agent, tmp_path / "runs", jobs=5,
                                only=["read", "bus-lock", "latency.l1d", "latency.l2"], say=lambda s: None)
    assert set(got.channels) == ({"read", "bus-lock"} if x86 else {"read"})
    if x86:  # split locks per second, by the buslock enemy, on one CPU and on every CPU
        locks = got.channels["bus-lock"]
        assert locks.kind == "buslock" and locks.unit == "locks" and locks.copies == len(facts.online_cpus)
        assert 0 < locks.one < math.inf and 0 < locks.all < math.inf
        assert pk.share("buslock", locks.one / 4, got, "locks").percent == pytest.approx(25.0)
    read = got.channels["read"]
    assert read.kind == "read" and read.unit == "bytes" and read.copies == len(facts.online_cpus)
    assert 0 < read.one < math.inf and 0 < read.all < math.inf
    assert list(got.latency) == ["l1d", "l2"]
    sizes = [lat.bytes for lat in got.latency.values()]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert all(0 < lat.ns < math.inf for lat in got.latency.values())
    path = pk.save(got, facts.environment)
    assert pk.load(facts.environment) == got and path.exists()
    assert pk.share("read", read.one / 2, got, "bytes").percent == pytest.approx(50.0)
    # Every pass is a stored run: traceable, and nothing left running.
    assert len(list((tmp_path / "runs").glob("*/run.json"))) == 2 * len(got.channels) + len(got.latency)


def test_a_read_enemy_asked_for_half_its_peak_reaches_half(agent, facts, tmp_path, monkeypatch, needs_fifo):
    """Closed loop, end to end: the read peak measured here (one copy on one CPU, 0.3 s),
    then a read enemy on that CPU with `load = "50% of peak"`, 0.5 s. Its achieved rate (its
    own bytes over the victim's window) is 45-55 % of the peak measured in this same test.
    The agent paces its count against the clock, which holds the rate only while the enemy
    gets the CPU time to do it: the enemy runs at SCHED_FIFO so that other tenants of a
    shared machine cannot take that time (at SCHED_OTHER under a load average of 10 on 2
    CPUs it fell to 44.6 % once in three)."""
    from xtalk import peaks_measure
    from xtalk.config.expand import expand
    from xtalk.config.experiment import load
    from xtalk.targets.base import LocalTarget

    monkeypatch.setenv(pk.ENV_DIR, str(tmp_path / "peaks"))
    got = peaks_measure.measure(facts, agent, tmp_path / "peak-runs", jobs=30, only=["read"], say=lambda s: None)
    pk.save(got, facts.environment)
    cpu = facts.online_cpus[0]
    f = tmp_path / "half.toml"
    f.write_text(f"""name = "closed-loop"
repetitions = 1
settle = "50ms"
[victim]
body = "sum"
bytes = "4KiB"
period = "10ms"
jobs = 50
cpus = [{facts.online_cpus[-1]}]
[[scenario]]
name = "half"
enemies = [{{ kind = "read", bytes = "4*llc", cpus = [{cpu}], policy = "fifo", priority = 10, load = "50% of peak" }}]
""")
    (run,) = [r for r in expand(load(f), facts) if r.scenario == "half"]
    (enemy,) = run.plan.enemies
    assert enemy.rate == pytest.approx(got.channels["read"].one / 2)
    out = LocalTarget(agent).run(run.plan, tmp_path / "half")
    (e,) = out.enemies
    assert out.status == "completed" and e.window_rate
    share = pk.share("read", e.window_rate, got, "bytes")
    assert 45.0 <= share.percent <= 55.0, (share.percent, e.window_rate, got.channels["read"].one)


def test_the_summary_enemy_line_gives_each_kinds_share_of_its_peak(peaks_dir, tmp_path):
    from xtalk.outcome import Environment, parse_outcome, write_outcome
    from xtalk.report.summary import summary_table, to_markdown
    from xtalk.testing.synthetic import Scenario, write_results
    from xtalk.store import open as open_results

    res = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2, jobs=20)
    # The machine the runs were measured on, as run.json records it (synthetic runs have none).
    fixture = env_of("dev-2vcpu-amd.json")
    env = Environment.model_validate({k: fixture.get(k, 0) for k in Environment.model_fields}).model_dump()
    for rj in (res / "runs").glob("*/run.json"):
        meta = json.loads(rj.read_text())
        meta["environment"] = env
        write_outcome(rj.parent, parse_outcome(meta))
        if meta["plan"]["labels"]["scenario"] == "read":
            meta["enemies"] = [{"name": n, "kind": "read", "unit": "bytes", "ops": 4_000_000_000, "seconds": 1.0, "rate": 4e9,
                                "window_ops": 4_000_000_000, "window_rate": 4e9, "target_intensity": 100.0,
                                "target_rate": 3.2e9, "setup_error": None, "ended_early": None} for n in ("read@0", "read@1")]
            write_outcome(rj.parent, parse_outcome(meta))
    line = lambda: summary_table(open_results(res)).set_index("scenario").enemy_rate["read"]  # noqa: E731
    assert line() == "read 4 GB/s"  # no peaks saved: the rate alone, as before
    pk.save(sample(env), env)
    # Held at 3.2 GB/s a copy (a `load` or a `rate`): what it was asked beside what it reached.
    assert line() == "read 4 GB/s (50 % of the read peak, 2 copies against all 2 CPUs; asked 40 %)"
    assert "50 % of the read peak" in to_markdown(summary_table(open_results(res)), "t")


def test_remeasure_without_peaks_is_refused_and_nothing_starts(tmp_path):
    from conftest import xtalk

    out = xtalk("characterize", "--remeasure", "--results", tmp_path)
    assert out.returncode == 2 and "characterize: --remeasure re-measures the peaks; add --peaks" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_pass_that_reaches_no_rate_runs_once_more_then_is_left_out(tmp_path):
    """A 50 ms pass can catch a copy that did no work in its window on a shared machine: it
    runs once more (its own directory) before its channel is left out, saying so each time.
    The target here replays recorded outcomes: the retry is the host's logic, not the agent's."""
    from types import SimpleNamespace as NS

    from xtalk import peaks_measure

    plan = NS(run_id="read.0-all", enemies=[0, 1])

    def copy(rate):
        return NS(window_rate=rate, setup_error=None, ended_early=None)

    class Replay:
        def __init__(self, outcomes):
            self.outcomes, self.dirs = list(outcomes), []

        def run(self, plan, run_dir):
            self.dirs.append(run_dir.name)
            return self.outcomes.pop(0)

    said = []
    t = Replay([NS(status="completed", enemies=[copy(5.0), copy(0.0)]), NS(status="completed", enemies=[copy(5.0), copy(6.0)])])
    got = peaks_measure._pass(t, plan, tmp_path, said.append)
    assert [e.window_rate for e in got] == [5.0, 6.0] and t.dirs == ["read.0-all", "read.0-all-try2"]
    assert said == ["peaks: read.0-all reached no rate on 1 of 2 copies (completed); once more"]
    t = Replay([NS(status="completed", enemies=[copy(0.0), copy(0.0)]), NS(status="failed", enemies=[])])
    assert peaks_measure._pass(t, plan, tmp_path, said.append) is None
    assert said[-1] == "peaks: read.0-all reached no rate on 2 of 2 copies (failed); left out" and len(t.dirs) == 2
