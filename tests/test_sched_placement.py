"""Analysis and simulation place servers and tasks on CPUs the same way (sched.placement):
seed 001 Table 4.3 gets one CPU per VM in `sched analyze`, `sched vm` and `sched simulate`
alike, an overloaded CPU is refused by all three, and m-core generated sets are analysed and
simulated partitioned on m CPUs, the simulated responses never above the analytic bounds."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from xtalk.sched.cli import app
from xtalk.sched.generate import generate_taskset
from xtalk.sched.placement import place_partitions, place_tasks
from xtalk.sched.simulate import SimPartition, simulate
from xtalk.sched.taskset import Task, hyperperiod, load_taskset
from xtalk.sched.uniproc import response_time_analysis, utilization

runner = CliRunner()
T43 = "examples/models/seed001-table43.toml"


def _rows(output: str) -> dict[str, list[str]]:
    """Table rows of a rich table in the output, by first cell."""
    rows = {}
    for ln in output.splitlines():
        if ln.count("│") > 3:
            cells = [c.strip() for c in ln.split("│")[1:-1]]
            rows[cells[0]] = cells
    return rows


def test_table43_each_vm_on_its_own_cpu():
    placed = place_partitions(load_taskset(T43))
    assert {k: [p.name for p in ps] for k, ps in placed.items()} == {0: ["VM1"], 1: ["VM2"]}


def test_table43_vm_analysis_schedulable_without_flags():
    r = runner.invoke(app, ["vm", T43])
    assert r.exit_code == 0, r.output
    assert r.output.count("  schedulable") == 2 and "NOT" not in r.output
    assert "CPU 0: VM1 (0.800)" in r.output and "CPU 1: VM2 (0.800)" in r.output


@pytest.mark.parametrize("policy", ["ps", "ds", "cbs"])
def test_table43_simulated_responses_within_the_analysed_bounds(policy):
    a = runner.invoke(app, ["analyze", T43])
    assert a.exit_code == 0 and "verdict: schedulable" in a.output, a.output
    bounds = {name: float(row[4]) for name, row in _rows(a.output).items() if name.startswith("T")}
    assert bounds == {"T1": 420.0, "T2": 1040.0, "T3": 420.0, "T4": 940.0}  # PRM bounds, seed 001 Table 4.3
    s = runner.invoke(app, ["simulate", T43, "--policy", policy])
    assert s.exit_code == 0, s.output
    assert "on 2 CPUs" in s.output and "deadline-miss ratio 0.0000" in s.output
    sim = {name: row for name, row in _rows(s.output).items() if name.startswith("T")}
    assert {n: row[1] for n, row in sim.items()} == {"T1": "0", "T2": "0", "T3": "1", "T4": "1"}
    for name, row in sim.items():
        assert 0 < float(row[5]) <= bounds[name], (name, row, bounds)


def test_one_cpu_overloaded_is_refused_by_every_command(tmp_path):
    f = tmp_path / "shared.toml"
    f.write_text(open(T43).read().replace('period = "200ms"\n', 'period = "200ms"\ncpu = 0\n'))
    for cmd in (["analyze", str(f)], ["vm", str(f)], ["simulate", str(f)]):
        r = runner.invoke(app, cmd)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1, (cmd, r.output)
        assert "CPU 0 would reserve bandwidth 1.600 > 1" in lines[0] and "fix:" in lines[0]
    g = tmp_path / "one.toml"
    g.write_text(open(T43).read().replace('scheduler = "rm"', 'scheduler = "rm"\ncpus = 1'))
    r = runner.invoke(app, ["simulate", str(g)])
    assert r.exit_code == 2 and "system.cpus" in r.output and "VM2" in r.output


def test_partitions_that_fit_share_a_cpu(tmp_path):
    f = tmp_path / "fit.toml"
    f.write_text(open(T43).read().replace('"160ms"', '"80ms"'))
    placed = place_partitions(load_taskset(f))
    assert [p.name for p in placed[0]] == ["VM1", "VM2"] and list(placed) == [0]


def test_generated_mcore_set_is_analysed_on_m_cpus(tmp_path):
    out = tmp_path / "m2.toml"
    r = runner.invoke(app, ["generate", "--seed", "3", "--m", "2", "--k", "3", "--total", "1.5", "-o", str(out)])
    assert r.exit_code == 0 and "cpus = 2" in out.read_text()
    system = load_taskset(out)
    assert system.cpus == 2 and utilization(system.tasks) > 1
    a = runner.invoke(app, ["analyze", str(out)])
    assert a.exit_code == 0 and "2 CPUs, partitioned" in a.output and "CPU 0" in a.output and "CPU 1" in a.output
    # on one CPU the same tasks (U = 1.5) cannot be schedulable
    one = tmp_path / "m1.toml"
    one.write_text(out.read_text().replace("cpus = 2", "cpus = 1"))
    assert "NOT schedulable" in runner.invoke(app, ["analyze", str(one)]).output


def test_four_tasks_of_u04_fit_two_cpus_not_one(tmp_path):
    body = "".join(f'[[task]]\nname = "t{i}"\nwcet = 4\nperiod = 10\n\n' for i in range(4))
    f = tmp_path / "t.toml"
    f.write_text("[system]\ncpus = 2\n\n" + body)
    r = runner.invoke(app, ["analyze", str(f)])
    assert r.exit_code == 0 and "verdict: schedulable" in r.output
    s = runner.invoke(app, ["simulate", str(f)])
    assert s.exit_code == 0 and "deadline-miss ratio 0.0000" in s.output and "on 2 CPUs" in s.output
    g = tmp_path / "u.toml"
    g.write_text(body)
    assert "verdict: NOT schedulable" in runner.invoke(app, ["analyze", str(g)]).output


@pytest.mark.parametrize("m", [2, 3])
def test_partitioned_simulation_never_exceeds_rta_on_generated_sets(m):
    rng = np.random.default_rng(100 + m)
    judged = 0
    for _ in range(40):
        tasks = generate_taskset(rng, m=m, k=3, dist=None, total=float(rng.uniform(0.5, 0.9)) * m,
                                 periods="choice", choices=[10, 20, 30, 40, 60, 120])
        for k, group in place_tasks(tasks, m, "rm").items():
            rta = {r.task.name: r for r in response_time_analysis(group)}
            if not all(r.schedulable for r in rta.values()):
                continue
            judged += 1
            h = hyperperiod([t.period for t in group])
            res = simulate([SimPartition(f"cpu{k}", group)], h + max(t.d for t in group))
            assert res.deadline_miss_ratio == 0
            for name, resp in res.max_response_by_task().items():
                # the simulator rounds each job's demand to its 1 µs tick
                assert resp <= rta[name].response + 0.01, (name, resp, rta[name].response)
    assert judged >= 20  # most CPUs pass, so the comparison is not vacuous


def test_place_tasks_keeps_every_task_once():
    tasks = [Task(f"t{i}", w, p) for i, (w, p) in enumerate([(3, 10), (5, 10), (2, 20), (8, 40), (1, 5)])]
    placed = place_tasks(tasks, 2)
    names = sorted(t.name for ts in placed.values() for t in ts)
    assert names == sorted(t.name for t in tasks)
    assert all(utilization(ts) <= 1 for ts in placed.values())
