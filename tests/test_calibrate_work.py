"""Work from time: `utilization` sets the victim's work per job on the target."""

import json

import pytest

from conftest import needs_root, xtalk

EXPERIMENT = """
name = "cal"
repetitions = 1
settle = "20ms"
[victim]
body = "{body}"
{size}
utilization = "{share}"
period = "4ms"
jobs = 10
warmup_jobs = 2
cpus = "last"
"""


def _run(tmp_path, body, share, size=""):
    f = tmp_path / f"{body}-{share.rstrip('%')}.toml"
    f.write_text(EXPERIMENT.format(body=body, share=share, size=size))
    # Calibration, not feasibility, is under test (a loaded machine may miss at 40 %).
    p = xtalk("run", f, "--results", tmp_path / "res" / f.stem, "--skip-feasibility")
    assert p.returncode == 0, p.stdout + p.stderr
    (out,) = (tmp_path / "res" / f.stem).iterdir()
    return p, out, json.loads((out / "experiment.json").read_text())["calibration"]


@needs_root
@pytest.mark.parametrize("body,knob,size", [("chase", "accesses", 'bytes = "256KiB"'), ("pi", "iterations", "")])
def test_more_of_the_period_takes_more_work_and_every_run_uses_it(tmp_path, body, knob, size):
    _, out, low = _run(tmp_path, body, "10%", size)
    p, out, high = _run(tmp_path, body, "40%", size)
    assert low["knob"] == high["knob"] == knob and 1 <= len(high["passes"]) <= 4
    assert "calibration pass 1" in p.stdout
    # Four times the share: clearly more work (noise moves the ratio, never below 2).
    assert high["work"] > 2 * low["work"], (low, high)
    for run in (out / "runs").iterdir():
        plan = json.loads((run / "run.json").read_text())["plan"]
        assert plan["victim"]["body"][knob] == high["work"]
        assert plan["labels"]["calibrated_work"].startswith(f"{knob}={high['work']} for 40% of 4 ms")
    assert (out / "calibration" / "calibration-0" / "jobs.bin").exists(), "the passes are kept"


@pytest.mark.parametrize("change,needle", [
    ('utilization = "30%"\naccesses = 5', "either 'accesses' or 'utilization'"),
    ('utilization = "95%"', "outside (0, 90%]"),
    ('utilization = "lots"', "cannot read 'lots'"),
    ('utilization = "nan"', "outside"),
])
def test_bad_utilization_is_one_line(tmp_path, change, needle):
    f = tmp_path / "bad.toml"
    f.write_text(EXPERIMENT.format(body="chase", share="30%", size='bytes = "64KiB"').replace('utilization = "30%"', change))
    p = xtalk("plan", f)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, p.stderr


def test_utilization_is_refused_for_a_body_without_work(tmp_path):
    f = tmp_path / "sum.toml"
    f.write_text(EXPERIMENT.format(body="sum", share="30%", size='bytes = "64KiB"'))
    p = xtalk("plan", f)
    assert p.returncode == 2 and "not 'sum'; remove it" in p.stderr, p.stderr


def test_the_first_chase_guess_is_sized_by_time_not_by_the_buffer():
    from xtalk.calibrate_work import SLOW_ACCESS_NS, _first_guess
    from xtalk.plan import body_model

    target_ns = 1.2e6  # 30 % of a 4 ms period
    huge = body_model("chase")(bytes=1200 << 20, accesses=1)  # 4 × a 300 MiB L3: one pass is 19.7 M loads
    small = body_model("chase")(bytes=32 << 10, accesses=1)
    assert _first_guess(huge, target_ns) * SLOW_ACCESS_NS <= target_ns
    assert _first_guess(small, target_ns) == (32 << 10) // 64, "a small buffer: one pass over it"


@needs_root
def test_a_buffer_far_past_the_caches_calibrates_without_a_pass_of_overloaded_jobs(tmp_path):
    # One pass over 256 MiB is 4 M dependent loads, hundreds of ms a job against 4 ms; the
    # first pass must start near the period instead (its jobs are paid in full).
    # The bound leaves room for a loaded machine (a guess at 200 ns an access ran 1.6 periods
    # at 1 µs an access beside six builds) and still fails the uncapped guess by ~100x.
    _, _, cal = _run(tmp_path, "chase", "30%", 'bytes = "256MiB"')
    assert cal["passes"][0]["accesses"] <= 4_000_000 // 100, cal["passes"]
    assert cal["passes"][0]["utilization"] < 5.0, cal["passes"]
