"""Every command that runs something goes through the target and its per-machine lock:
`xtalk run`, `intrusiveness` and `characterize` wait for a run of another command (a
campaign) holding the machine, then run; or, past $XTALK_LOCK_TIMEOUT, refuse in one line
with nothing started, as a campaign does. The lock here is a private file of the test
($XTALK_TARGET_LOCK), so the machine's real lock is not held."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import XTALK, processes_named, wait_for, xtalk
from xtalk.targets.base import LocalTarget
from xtalk.targets.lock import TargetBusy, target_lock

pytestmark = pytest.mark.agent  # drives the agent (conftest.py's tripwire)

TINY = """
name = "tiny"
repetitions = 1
settle = "10ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 20
warmup_jobs = 2
cpus = "last"
"""


@pytest.fixture
def held(tmp_path, monkeypatch):
    """The machine lock (a private file of this test) held by this process, as a campaign's
    run holds it; commands started from here give up after one second."""
    path = tmp_path / "target.lock"
    monkeypatch.setenv("XTALK_TARGET_LOCK", str(path))
    monkeypatch.setenv("XTALK_LOCK_TIMEOUT", "1")
    with target_lock(path, timeout=5, say=lambda _: None):
        yield path


def through_the_target(monkeypatch) -> list[str]:
    """Record each run that goes through `LocalTarget.run` (which then runs it for real)."""
    calls: list[str] = []
    real = LocalTarget.run

    def run(self, plan, run_dir):
        calls.append(plan.run_id)
        return real(self, plan, run_dir)

    monkeypatch.setattr(LocalTarget, "run", run)
    return calls


def _no_run_started(results: Path) -> bool:
    return not list(results.rglob("run.json")) and not list(results.rglob("jobs.bin"))


def test_xtalk_run_refuses_in_one_line_while_another_run_holds_the_machine(tmp_path, held):
    exp = tmp_path / "exp.toml"
    exp.write_text(TINY)
    out = xtalk("run", exp, "--results", tmp_path / "res", "--skip-feasibility", env=dict(os.environ))
    assert out.returncode == 3, out.stderr
    lines = out.stderr.strip().splitlines()
    assert f"waiting for {os.getpid()}" in out.stderr, out.stderr
    assert lines[-1].startswith("xtalk: the machine is busy:") and "XTALK_LOCK_TIMEOUT" in lines[-1], out.stderr
    assert "Traceback" not in out.stderr
    assert _no_run_started(tmp_path / "res")
    assert not processes_named()


def test_xtalk_run_waits_for_the_holder_then_runs(tmp_path, monkeypatch):
    path = tmp_path / "target.lock"
    exp = tmp_path / "exp.toml"
    exp.write_text(TINY)
    env = {**os.environ, "XTALK_TARGET_LOCK": str(path), "XTALK_LOCK_TIMEOUT": "120"}
    err = tmp_path / "stderr"
    with target_lock(path, timeout=5, say=lambda _: None):
        with open(err, "w") as e:
            proc = subprocess.Popen([*XTALK, "run", str(exp), "--results", str(tmp_path / "res"), "--skip-feasibility"],
                                    stdout=subprocess.DEVNULL, stderr=e, env=env)
        try:
            assert wait_for(lambda: "waiting for" in err.read_text(), timeout=120), err.read_text()
            time.sleep(0.5)  # still waiting: nothing of the run has started while we hold the machine
            assert proc.poll() is None and _no_run_started(tmp_path / "res")
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    assert proc.wait(timeout=300) == 0, err.read_text()
    runs = list((tmp_path / "res").rglob("run.json"))
    assert len(runs) == 1 and '"completed"' in runs[0].read_text()


def test_intrusiveness_goes_through_the_target_and_its_lock(tmp_path, held, monkeypatch):
    from xtalk import intrusiveness

    calls = through_the_target(monkeypatch)
    exp = tmp_path / "exp.toml"
    exp.write_text(TINY)
    with pytest.raises(TargetBusy, match="the machine is busy"):
        intrusiveness.run(exp, repetitions=1, jobs=10, results=tmp_path / "res", console=Console(quiet=True))
    assert len(calls) == 1 and _no_run_started(tmp_path / "res")


def test_characterize_waits_for_the_machine_lock_like_a_campaign(tmp_path, held):
    from xtalk.characterize import characterize

    # Its first run is the calibration of the probes' work (targets/local.py: run_plan).
    with pytest.raises(TargetBusy, match="the machine is busy"):
        characterize(tmp_path / "res", quick=True, console=Console(quiet=True), repetitions=1,
                     enemies=["pi"], jobs=5)
    assert _no_run_started(tmp_path / "res")
