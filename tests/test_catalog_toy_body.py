"""Adding a victim body is one Rust file and one registry line, as adding an enemy is
(test_catalog_toy.py): a copy of the agent's sources gets `victims/toy.rs` and
`toy => BODY;` in the registry, is built (the release build cache copied, so only the agent
crate compiles), and the toy body runs as the victim of a TOML experiment through the
`xtalk` command line, with the host pointed at that agent ($XTALK_AGENT) and its catalog
($XTALK_CATALOG) and nothing else changed. Its bad parameters are refused as any body's
are: one line naming the field, exit code 2."""

import json

import pytest

from conftest import processes_named, xtalk
from toy_agent import build_with, env_of

#: An agent built from sources: make test-slow.
pytestmark = pytest.mark.slow

TOY = r'''//! `toy`: a fixture body whose job adds 1 `iterations` times (the result kept).
use super::body::{BodyKind, Run};
use super::JobBody;
use crate::enemies::kind::Param;

pub struct Toy {
    n: u64,
}

impl JobBody for Toy {
    fn run_job(&mut self) -> u64 {
        (0..std::hint::black_box(self.n)).fold(0u64, |a, _| std::hint::black_box(a + 1))
    }
}

pub const BODY: BodyKind = BodyKind::new("toy", "a fixture body that counts", &[
    Param::u64("iterations", "additions per job").range(1, 1_000_000),
], Run::Jobs(|a, _| Ok(Box::new(Toy { n: a.u64("iterations") }))))
.work("iterations");
'''

REGISTRY_LINE = "    pub attach => BODY;\n"

EXPERIMENT = """
name = "toybody"
repetitions = 1
settle = "20ms"
[victim]
body = "toy"
iterations = 5000
period = "5ms"
jobs = 10
"""


@pytest.fixture(scope="module")
def toy_agent(tmp_path_factory):
    """(agent binary, catalog file) of the agent built with the toy body added."""
    return build_with(tmp_path_factory.mktemp("toybody"), "victims", "toy", TOY, REGISTRY_LINE, "toy => BODY;")


def test_the_toy_body_is_in_the_new_agents_catalog(toy_agent):
    doc = json.loads(toy_agent[1].read_text())
    toy = next(b for b in doc["bodies"] if b["body"] == "toy")
    assert [p["name"] for p in toy["params"]] == ["iterations"] and toy["work"] == "iterations" and toy["run"] == "jobs"


def test_the_toy_body_runs_from_an_experiment_file(toy_agent, tmp_path):
    f = tmp_path / "toy.toml"
    f.write_text(EXPERIMENT)
    out = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility", env=env_of(toy_agent))
    assert out.returncode == 0, out.stderr + out.stdout
    (res,) = (tmp_path / "res").iterdir()
    (d,) = (res / "runs").iterdir()
    run = json.loads((d / "run.json").read_text())
    assert run["status"] == "completed", run.get("reason")
    assert run["plan"]["victim"]["body"] == {"kind": "toy", "iterations": 5000}
    assert run["jobs_recorded"] == run["jobs_planned"] >= 10, run  # every job of the toy recorded


@pytest.mark.parametrize("param,needle", [
    ("iterations = 2000000", "victim.iterations: Input should be less than or equal to 1000000"),  # its declared bound
    ("", "body 'toy' needs 'iterations' or 'utilization'"),  # its work knob, from the catalog
])
def test_bad_toy_parameters_are_one_line_and_exit_2(toy_agent, tmp_path, param, needle):
    f = tmp_path / "toy.toml"
    f.write_text(EXPERIMENT.replace("iterations = 5000", param))
    out = xtalk("run", f, "--results", tmp_path / "res", env=env_of(toy_agent))
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "res").exists()
    assert not processes_named()
