"""Adding an enemy is one Rust file and one registry line: a copy of the agent's sources
gets `enemies/toy.rs` and `toy => KIND;` in the registry, is built (the release build
cache copied, so only the agent crate compiles), and the toy enemy runs from a TOML
experiment through the `xtalk` command line, with the host pointed at that agent
($XTALK_AGENT) and at its catalog ($XTALK_CATALOG) and nothing else changed. Its bad
parameters are refused as any enemy's are: one line naming the field, exit code 2."""

import json

import pytest

from conftest import needs_two_cpus, processes_named, xtalk
from toy_agent import build_with, env_of

#: An agent built from sources: make test-slow.
pytestmark = pytest.mark.slow

TOY = r'''//! `toy`: a fixture enemy that sleeps `pause_ns` and counts `step` per chunk.
use super::kind::{Dflt, Kind, Param};
use super::EnemyLoad;

pub struct Toy {
    step: u64,
    pause_ns: u64,
}

impl EnemyLoad for Toy {
    fn chunk(&mut self) -> u64 {
        std::thread::sleep(std::time::Duration::from_nanos(self.pause_ns));
        self.step
    }
}

pub const KIND: Kind = Kind::new("toy", "a fixture enemy that counts", "ticks", &[
    Param::u64("step", "ticks per chunk").range(1, 1000).default(Dflt::U64(1)),
    Param::u64("pause_ns", "sleep per chunk").range(1_000, 1_000_000).unit("ns").file_default("100us"),
], |a, _| Ok(Box::new(Toy { step: a.u64("step"), pause_ns: a.u64("pause_ns") })));
'''

REGISTRY_LINE = "    crashloop => KIND;\n"

EXPERIMENT = """
name = "toy"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "5ms"
jobs = 20
cpus = "last"
[[scenario]]
name = "toy"
enemies = [{ kind = "toy", step = 7, pause = "200us", cpus = "others" }]
"""


@pytest.fixture(scope="module")
def toy_agent(tmp_path_factory):
    """(agent binary, catalog file) of the agent built with the toy enemy added."""
    return build_with(tmp_path_factory.mktemp("toy"), "enemies", "toy", TOY, REGISTRY_LINE, "toy => KIND;")


def test_the_toy_is_in_the_new_agents_catalog(toy_agent):
    doc = json.loads(toy_agent[1].read_text())
    toy = next(k for k in doc["enemies"] if k["kind"] == "toy")
    assert [p["name"] for p in toy["params"]] == ["step", "pause_ns"] and toy["unit"] == "ticks"


@needs_two_cpus
def test_the_toy_enemy_runs_from_an_experiment_file(toy_agent, tmp_path):
    f = tmp_path / "toy.toml"
    f.write_text(EXPERIMENT)
    out = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility", env=env_of(toy_agent))
    assert out.returncode == 0, out.stderr + out.stdout
    (res,) = (tmp_path / "res").iterdir()
    runs = {json.loads((d / "run.json").read_text())["plan"]["labels"]["scenario"]: json.loads((d / "run.json").read_text())
            for d in (res / "runs").iterdir()}
    run = runs["toy"]
    assert run["status"] == "completed", run.get("reason")
    load = run["plan"]["enemies"][0]["load"]
    assert load == {"kind": "toy", "step": 7, "pause_ns": 200_000}, load  # the file's duration, resolved
    (e,) = run["enemies"]
    assert e["kind"] == "toy" and e["unit"] == "ticks"
    assert e["ops"] > 0 and e["ops"] % 7 == 0, e
    # At most one chunk per 200 us sleep: a bound, not this machine's timing.
    assert e["rate"] <= 7 * 5000 * 1.01, e


@pytest.mark.parametrize("param,needle", [
    ("step = 5000", "scenario[0].enemies[0].step: should be at most 1000"),
    ("bytes = 4096", "'bytes' is not a parameter of enemy 'toy' (its parameters: pause, step)"),
    ('pause = "10ms"', "scenario[0].enemies[0].pause"),
])
def test_bad_toy_parameters_are_one_line_and_exit_2(toy_agent, tmp_path, param, needle):
    f = tmp_path / "toy.toml"
    f.write_text(EXPERIMENT.replace('step = 7, pause = "200us"', param))
    out = xtalk("run", f, "--results", tmp_path / "res", env=env_of(toy_agent))
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "res").exists()
    assert not processes_named()
