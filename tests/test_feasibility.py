"""The solo feasibility run: a victim that cannot hold its period alone, or whose DEADLINE
runtime is below its need, is refused before the first run with the numbers and what to
set; --skip-feasibility runs it anyway and the guards say what is wrong."""

import json

import pytest

from conftest import needs_root, xtalk

# 2·10^7 terms take several ms on any CPU (one term a cycle at 5 GHz: 4 ms) > the 1 ms period.
OVERLOADED = """
name = "over"
repetitions = 1
[victim]
body = "pi"
iterations = 20000000
period = "1ms"
jobs = 3
warmup_jobs = 0
cpus = "last"
"""

# 10^6 terms need well over the 0.2 ms of CPU this reservation gives each period (a term
# a cycle at 5 GHz: 0.2 ms), so every job is throttled; the short period keeps the pass short.
THROTTLED = """
name = "dl"
repetitions = 1
[victim]
body = "pi"
iterations = 1000000
period = "10ms"
jobs = 3
warmup_jobs = 0
policy = "deadline"
reservation = { runtime = "200us" }
"""


def _refused(tmp_path, text, needle):
    f = tmp_path / "exp.toml"
    f.write_text(text)
    p = xtalk("run", f, "--results", tmp_path / "res")
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and needle in err[0], p.stdout + p.stderr
    assert not (tmp_path / "res").exists(), "a refused experiment leaves no results directory"
    return err[0]


@needs_root
def test_a_victim_overloaded_alone_is_refused_with_a_period_that_would_do(tmp_path):
    line = _refused(tmp_path, OVERLOADED, "victim.period: the victim cannot hold its period alone")
    assert "lengthen the period to about" in line and "victim.iterations = " in line


@needs_root
def test_a_deadline_runtime_below_the_need_is_refused_with_the_runtime_to_set(tmp_path):
    line = _refused(tmp_path, THROTTLED, "victim.reservation.runtime: 0.2 ms is below the victim's solo need")
    assert "set runtime = \"" in line and "seed 000 §7.2.1" in line


@needs_root
def test_skip_feasibility_runs_it_and_the_guard_fires_on_solo(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(OVERLOADED)
    p = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility")
    (out,) = (tmp_path / "res").iterdir()
    rows = {r["scenario"]: r for r in json.loads((out / "summary.json").read_text())}
    assert "overloaded_solo" in {w["kind"] for w in rows["solo"]["warnings"]}, p.stdout + p.stderr
    assert "overloaded alone" in " ".join(p.stdout.split())


# Beside a healthy application, one of the same overloaded pi body: each application runs
# alone in the solo pass, and the overloaded one is refused by its field and name.
APPLICATIONS = """
name = "apps"
repetitions = 1
settle = "10ms"
application_scenarios = [{scenarios}]

[[application]]
name = "fine"
criticality = "A"
body = "pi"
iterations = 1000
period = "10ms"
jobs = 3
cpus = "last"

[[application]]
name = "over"
criticality = "C"
body = "pi"
iterations = 20000000
period = "1ms"
jobs = 3
cpus = "last"
"""


@needs_root
@pytest.mark.parametrize("scenarios", ['"alone", "pairs"', '"all"'])
def test_an_application_overloaded_alone_is_refused_beside_a_healthy_one(tmp_path, scenarios):
    """With `alone` scenarios the pass runs `alone:over`; without them, `over` taken alone
    out of the first run that holds it."""
    line = _refused(tmp_path, APPLICATIONS.format(scenarios=scenarios),
                    "application[1].period: application 'over' cannot hold its period alone (median job")
    assert "against a 1 ms deadline" in line and "lengthen the period to about" in line
    assert "application[1].iterations = " in line and "utilization" not in line, line


def test_the_estimate_counts_one_solo_pass_per_application(tmp_path, facts):
    """`xtalk plan`'s estimate counts a short pass for each application with periodic jobs
    (no noise passes: those are a victim's)."""
    from xtalk.calibrate_work import PASS_JOBS, PASS_WARMUP
    from xtalk.config.expand import expand
    from xtalk.config.experiment import load
    from xtalk.feasibility import estimated_seconds

    f = tmp_path / "exp.toml"
    f.write_text(APPLICATIONS.format(scenarios='"all"'))
    runs = expand(load(f), facts)
    want = sum(0.01 + (PASS_JOBS + PASS_WARMUP) * period for period in (10e-3, 1e-3))
    assert estimated_seconds(runs, 0.0) == pytest.approx(want)


def _pi_plan(iterations: int, policy: str = "other"):
    from xtalk.plan import Plan

    return Plan(run_id="p", timeout_s=60.0, victim={"body": {"kind": "pi", "iterations": iterations},
                                                     "period_ns": 1_000_000, "jobs": 3, "warmup_jobs": 0,
                                                     "sched": {"policy": policy}})


def test_the_refusal_follows_from_its_numbers():
    """Pure (no agent): a job that fits its deadline but misses alone waits to run, so the fix
    offered is the policy or a quiet machine, never a longer period or less work (a pass with
    a 1 ms job missing 60 % of 5 ms deadlines was once told to shorten the period to 4 ms and
    to raise its work); a job that does not fit gets a longer period and less work; a healthy
    pass is not refused."""
    from xtalk.feasibility import infeasible

    waits = infeasible(_pi_plan(2000), "victim", "the victim", "", 1.0e6, 5.0e6, 0.60, 20)
    assert waits.startswith("victim.policy: the victim misses 60% of 20 jobs alone although its median job takes 20%")
    assert "it waits to run" in waits and 'under policy "other"' in waits and 'policy = "fifo"' in waits
    assert "lengthen the period" not in waits and "lower the work" not in waits
    slow = infeasible(_pi_plan(20_000_000), "victim", "the victim", "", 4.0e6, 1.0e6, 1.0, 3)
    assert slow.startswith("victim.period: the victim cannot hold its period alone")
    assert 'lengthen the period to about "14ms"' in slow and "victim.iterations = " in slow
    assert infeasible(_pi_plan(2000), "victim", "the victim", "", 0.2e6, 1.0e6, 0.10, 20) is None
