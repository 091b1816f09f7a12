"""Fail-over without a lost worker: when the last queued run is out on a target that turns out
not to answer, the targets that found the queue empty must still be there to take it back.
(Before, they had ended, and the run went back and forth to the dead target for ever: the
live target was not down, so `target_wait` never gave up. A campaign on a live and a dead
target hung about one time in ten.)"""

from __future__ import annotations

import threading
import time

import pytest
from rich.console import Console

import xtalk
from campaign_util import tiny
from xtalk.campaign import layout
from xtalk.campaign.executor import Executor
from xtalk.campaign.prepare import prepare
from xtalk.errors import AgentError
from xtalk.targets.base import LocalTarget, Target, TargetOut, TargetUnreachable

pytestmark = pytest.mark.agent


class SlowToRefuse(Target):
    """A target that takes a run, then says after a while that it cannot be reached: it holds
    the run while the live target drains the queue."""

    name = "dead"

    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.tries = 0

    def run(self, plan, run_dir):
        self.tries += 1
        time.sleep(self.delay_s)
        raise TargetUnreachable("connection refused (planted)")


def test_a_run_given_back_by_a_dead_target_is_taken_by_a_live_one_that_found_the_queue_empty(tmp_path):
    f = tiny(tmp_path, jobs=10, **{"repetitions = 3": "repetitions = 1"})  # two runs: solo and pi
    live = LocalTarget()
    p = prepare(f, [live])
    store = layout.create(tmp_path / "res", p.campaign.name, p.text, p.expansion, {"name": p.campaign.name, "kind": "local"})
    dead = SlowToRefuse(delay_s=2.0)  # the live target's run ends well before the refusal
    ex = Executor(store, [live, dead], console=Console(quiet=True), target_wait=20, show_progress=False)
    out: dict = {}
    driver = threading.Thread(target=lambda: out.update(counts=ex.run()), daemon=True)
    driver.start()
    driver.join(30)
    if driver.is_alive():  # the live target is not down, so target_wait never gave up either
        ex.stop.set()
        driver.join(30)
        pytest.fail(f"the campaign did not end in 30 s; the dead target was tried {dead.tries} times")
    assert out["counts"] == {"done": 2, "failed": 0, "remaining": 0}, out
    assert dead.tries == 1, "the dead target was not tried again: the live one took its run back"
    assert set(xtalk.open(store).runs().status) == {"completed"}


class OutAtOnce(Target):
    """A target that is out of the campaign for good at its first run, like a lab board that
    did not boot after its power cycle (targets/labgrid.py BoardFailed)."""

    name = "broken"

    def __init__(self):
        self.tries = 0

    def run(self, plan, run_dir):
        self.tries += 1
        raise TargetOut("did not boot after a power cycle (planted)")


def _campaign(tmp_path, targets):
    f = tiny(tmp_path, jobs=10, **{"repetitions = 3": "repetitions = 1"})  # two runs: solo and pi
    p = prepare(f, [LocalTarget()])
    store = layout.create(tmp_path / "res", p.campaign.name, p.text, p.expansion, {"name": p.campaign.name, "kind": "local"})
    return store, Executor(store, targets, console=Console(quiet=True), target_wait=20, show_progress=False)


def test_a_target_out_of_the_campaign_takes_no_more_runs_and_the_others_finish(tmp_path):
    broken = OutAtOnce()
    store, ex = _campaign(tmp_path, [broken, LocalTarget()])
    assert ex.run() == {"done": 2, "failed": 0, "remaining": 0}
    assert broken.tries == 1, "a board out of the campaign took runs only to hand them back"
    assert "OUT" in ex.state["broken"].line()
    assert set(xtalk.open(store).runs().status) == {"completed"}


def test_when_every_target_is_out_the_campaign_stops_at_once_naming_resume(tmp_path):
    broken = OutAtOnce()
    store, ex = _campaign(tmp_path, [broken])
    t0 = time.monotonic()
    with pytest.raises(AgentError, match=r"every target is out of the campaign; 2 run\(s\) remain: `xtalk campaign resume"):
        ex.run()
    assert time.monotonic() - t0 < 10, "it waited for target_wait instead of stopping"
    assert broken.tries == 1
