"""The noise floor of the solo feasibility run against the effect the experiment wants to
see (`min_effect`): the repetitions it takes, a warning when there are fewer, a refusal
with --require-effect (exit 2, no results directory)."""

import json

import pytest

from conftest import needs_root, xtalk
from xtalk.feasibility import noise_floor, repetitions_needed

# A light victim: 2·10^4 pi terms, far inside the 5 ms period.
LIGHT = """
name = "noise"
repetitions = 2
min_effect = "{effect}"
[victim]
body = "pi"
iterations = 20000
period = "5ms"
jobs = 20
warmup_jobs = 2
cpus = "last"
"""


def test_the_repetitions_follow_the_spread_and_the_effect():
    # 2·(1.96·0.05/0.05)² = 7.7 → 8; a spread 4 times smaller needs the floor of 2.
    assert repetitions_needed(0.05, 0.05) == 8
    assert repetitions_needed(0.0125, 0.05) == 2
    assert repetitions_needed(0.02, 0.01) == 31  # 2·(1.96·2)² = 30.7
    n = noise_floor([100.0, 110.0, 90.0], 0.05, repetitions=3, jobs=20)
    assert abs(n["spread"] - 0.1) < 1e-12 and n["repetitions_needed"] == 31  # 2·(1.96·0.1/0.05)² = 30.7


def test_min_effect_is_read_as_a_share(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text(LIGHT.format(effect="five"))
    p = xtalk("plan", f)
    assert p.returncode == 2 and "min_effect" in p.stderr and "30%" in p.stderr, p.stderr


@needs_root
def test_an_effect_below_the_noise_is_refused_with_the_numbers(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text(LIGHT.format(effect="0.001%"))  # no machine resolves 10^-5 in 2 repetitions
    p = xtalk("run", f, "--results", tmp_path / "res", "--require-effect")
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1, p.stdout + p.stderr
    assert "repetitions: solo spread: the solo median varies" in err[0] and "the experiment has 2" in err[0], err
    assert "set repetitions = " in err[0]
    assert not (tmp_path / "res").exists()


@needs_root
def test_without_the_flag_it_warns_and_runs_recording_the_floor(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text(LIGHT.format(effect="0.001%"))
    p = xtalk("run", f, "--results", tmp_path / "res")
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    # Before the runs an estimate only: the verdict belongs to the runs' own CIs (test_noise_floor).
    assert "an estimate before the runs" in out, p.stdout
    (res,) = (tmp_path / "res").iterdir()
    feas = json.loads((res / "experiment.json").read_text())["feasibility"][0]
    noise = feas["noise_floor"]
    assert noise["passes"] == 3 and noise["repetitions"] == 2 and noise["repetitions_needed"] > 2, noise
    assert noise["jobs_per_pass"] == 20  # sized by time (1.5 s of 5 ms), capped by the run's 20 jobs
    assert noise["min_effect"] == pytest.approx(1e-5)
    # After the runs, the floor again from the experiment's own two solo runs.
    runs = feas["noise_floor_runs"]
    assert runs["source"] == "solo runs" and runs["passes"] == 2 and len(runs["median_exec_ns"]) == 2, runs
    assert "2 solo runs" in out
