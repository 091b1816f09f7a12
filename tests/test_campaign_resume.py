"""kill -9 of xtalk at random instants, then resume: every planned run ends with exactly one
completed result, none lost, none repeated, and nothing is left running."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

import xtalk
from campaign_util import campaign_dirs, tiny
from conftest import XTALK, processes_named, wait_for
from xtalk.campaign import journal

KILLS = 10


def _start(args):
    return subprocess.Popen([*XTALK, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _verify(store):
    """Exactly the planned runs, each completed once, and a clean store."""
    planned = [r["run_id"] for r in json.loads((store / "campaign.json").read_text())["runs"]]
    assert len(planned) == 6
    events = journal.read(store / "journal.jsonl")
    last = journal.states(events)
    assert {r: last[r]["state"] for r in planned} == {r: "done" for r in planned}
    # Never repeated: one `done` per run in the journal, one directory per run in runs/.
    done = Counter(e["run"] for e in events if e.get("state") == "done")
    assert set(done.values()) == {1}, done
    assert sorted(d.name for d in (store / "runs").iterdir()) == sorted(planned)
    assert not (store / "staging").exists() or not any((store / "staging").iterdir())
    res = xtalk.open(store)
    runs = res.runs()
    assert sorted(runs.run_id) == sorted(planned) and set(runs.status) == {"completed"}
    jobs = res.jobs()
    assert jobs.groupby("run_id").size().to_dict() == {r: 40 for r in planned}
    # What the kills interrupted was moved aside, never merged into a result.
    for d in (store / "attempts").iterdir() if (store / "attempts").exists() else []:
        assert d.name.rsplit(".", 1)[0] in planned


@pytest.mark.slow  # ten kills and resumes of live campaigns: make test-slow
def test_kill_at_random_instants_then_resume_completes_exactly_the_planned_runs(tmp_path):
    f = tiny(tmp_path, jobs=40)
    rng = random.Random(20261121)
    kills = mid_run = campaigns = 0
    deadline = time.monotonic() + 150
    while kills < KILLS and time.monotonic() < deadline:
        # One tiny campaign, killed again and again until a run or resume ends on its own.
        base = tmp_path / f"res{campaigns}"
        campaigns += 1
        for attempt in range(9):
            dirs = campaign_dirs(base)
            # The pre-flight is skipped: its own kills are test_campaign_preflight's (at a chosen
            # instant); here every kill that waits for a victim lands in a run.
            p = _start(["campaign", "resume", dirs[0]] if dirs else ["campaign", "run", f, "--results", base,
                                                                      "--skip-feasibility"])
            if rng.random() < 0.5:
                # Kills that land while a victim runs (the agent, staging, rename window)...
                if wait_for(lambda: processes_named(("xt-victim",)) or p.poll() is not None, timeout=20) and p.poll() is None:
                    time.sleep(rng.uniform(0.0, 0.12))
            else:
                # ...and kills at any instant: start-up, creation, journal writes, between runs.
                wait_for(lambda: p.poll() is not None, timeout=rng.uniform(0.05, 3.0))
            if p.poll() is None and attempt < 8:  # the last attempt is left to finish
                mid_run += bool(processes_named(("xt-victim",)))
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=30)
                kills += 1
                continue
            p.wait(timeout=120)
            assert p.returncode == 0, p.stderr.read()
            break
        assert not processes_named()
        (store,) = campaign_dirs(base)
        _verify(store)
    print(f"{kills} kills ({mid_run} during a run) over {campaigns} campaign(s)")
    assert kills >= KILLS, f"only {kills} kills in {campaigns} campaigns"
    assert mid_run >= 3, f"only {mid_run} of {kills} kills landed during a run"
