"""`xtalk calibrate --intrusiveness` on an experiment of `[[application]]`s: each application
is measured alone with timestamps only, with counters and (as root) with the kernel trace,
against its own timestamps, as the victim of a `[victim]` experiment is."""

import json

import pytest
from rich.console import Console

pytestmark = pytest.mark.agent  # drives the agent (conftest.py's tripwire)

APPLICATIONS = """
name = "apps"
repetitions = 1
settle = "10ms"
application_scenarios = ["pairs"]

[[application]]
name = "a"
criticality = "A"
body = "pi"
iterations = 1000
period = "2ms"
jobs = 5
cpus = "last"

[[application]]
name = "b"
criticality = "D"
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
cpus = "first"
"""


def test_each_application_is_measured_alone_against_its_own_timestamps(tmp_path):
    from xtalk import intrusiveness, store

    exp = tmp_path / "exp.toml"
    exp.write_text(APPLICATIONS)
    out = intrusiveness.run(exp, repetitions=1, jobs=10, results=tmp_path / "res", console=Console(quiet=True))
    rows = json.loads((out / "intrusiveness.json").read_text())
    seen = {(r["application"], r["observation"]) for r in rows}
    assert {("a", "timestamps"), ("a", "counters"), ("b", "timestamps"), ("b", "counters")} <= seen, rows
    assert all(r["ratio"] == 1.0 for r in rows if r["observation"] == "timestamps")
    jobs = store.open(out).jobs()
    # Each run holds one application alone, every job its own.
    assert set(jobs.groupby("run_id").application.nunique()) == {1}
    assert set(jobs.application) == {"a", "b"} and len(jobs) == 10 * len(rows)
