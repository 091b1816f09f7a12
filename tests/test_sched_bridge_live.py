"""The bridge from measurement to schedulability on a real results directory: `xtalk run` of
a shortened examples/taskset_rm.toml, then `xtalk sched analyze --wcet-from RESULTS:pi` with
the matching model. The WCETs it uses and the responses it prints beside the bounds are the
ones the store and `xtalk summary --view tasks` give for the same runs (no timing of this machine is
asserted)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, needs_root, xtalk
from xtalk.store import open as open_results

MODEL = ROOT / "examples" / "models" / "taskset-rm.toml"


def _rows(output: str) -> dict[str, list[str]]:
    return {c[0]: c for c in ([x.strip() for x in ln.split("│")[1:-1]] for ln in output.splitlines() if ln.count("│") > 5)}


@needs_root
def test_run_then_analyze_with_measured_wcets(tmp_path):
    exp = (ROOT / "examples" / "taskset_rm.toml").read_text()
    assert "repetitions = 2" in exp and "hyperperiods = 10" in exp
    f = tmp_path / "taskset_rm.toml"
    f.write_text(exp.replace("repetitions = 2", "repetitions = 1").replace("hyperperiods = 10", "hyperperiods = 3"))
    run = xtalk("run", f, "--results", tmp_path / "res")
    assert run.returncode == 0, run.stderr + run.stdout
    (res,) = (tmp_path / "res").iterdir()

    out = xtalk("sched", "analyze", MODEL, "--wcet-from", f"{res}:pi")
    assert out.returncode == 0, out.stderr + out.stdout
    rows = _rows(out.stdout)
    assert set(rows) >= {"fast", "mid", "slow"}, out.stdout

    # The same numbers as the store (WCET = max CPU time) and `xtalk summary --view tasks` (max response).
    jobs = open_results(res).jobs()
    ran = jobs[(jobs.scenario == "pi") & ~((jobs.cpu_start < 0) & (jobs.cpu_time_ns == 0))]
    assert xtalk("summary", res, "--view", "tasks").returncode == 0
    tasks = {r["name"]: r for r in json.loads((res / "tasks.json").read_text()) if r["scenario"] == "pi"}
    for i, name in enumerate(("fast", "mid", "slow")):
        wcet = ran[ran.task == i].cpu_time_ns.max() / 1e6
        assert rows[name][1] == f"{wcet:.3f}", (name, rows[name], wcet)
        assert float(rows[name][7]) == pytest.approx(tasks[name]["resp_max_ms"], abs=6e-4), (name, rows[name])
        assert rows[name][8] in ("yes", "NO (exceeds)")
        assert f"{name}: WCET = {wcet:.3f} ms, the measured max of cpu_time_ns under 'pi'" in " ".join(out.stdout.split())

    # A model of other tasks, or a scenario the experiment does not have: one line, exit 2.
    other = xtalk("sched", "analyze", ROOT / "examples/models/seed001-table41.toml", "--wcet-from", f"{res}:pi")
    assert other.returncode == 2 and "measured tasks: fast, mid, slow" in other.stderr
    absent = xtalk("sched", "analyze", MODEL, "--wcet-from", f"{res}:pi4")
    assert absent.returncode == 2 and "use one of pi, solo" in absent.stderr
    assert len(absent.stderr.strip().splitlines()) == 1
