"""The distributed engine on a LocalCluster of 2 workers on 127.0.0.1: every run lands once
in the shared store, and a worker (a target) never holds two runs at once."""

from __future__ import annotations

import json

import pytest

import xtalk
from campaign_util import campaign_dirs, tiny
from conftest import processes_named, xtalk as run_xtalk
from xtalk.campaign import journal

distributed = pytest.importorskip("distributed")


@pytest.fixture
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      resources={"xtalk_target": 1}, silence_logs=50) as c:
        yield c


def test_campaign_on_a_local_dask_cluster(cluster, tmp_path):
    f = tiny(tmp_path, jobs=30)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--cluster", cluster.scheduler_address, timeout=150)
    assert out.returncode == 0, out.stderr
    assert "6 done, 0 failed, 0 remaining of 6" in out.stdout, out.stdout
    (store,) = campaign_dirs(tmp_path / "res")
    events = journal.read(store / "journal.jsonl")
    done = [e for e in events if e.get("state") == "done"]
    assert sorted(e["run"] for e in done) == sorted(r["run_id"] for r in json.loads((store / "campaign.json").read_text())["runs"])
    # One run at a time per worker: the intervals each worker spent on runs never overlap.
    by_worker: dict = {}
    for e in done:
        by_worker.setdefault(e["worker"], []).append((e["started"], e["ended"]))
    assert len(by_worker) == 2, by_worker  # both workers took work
    for spans in by_worker.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
    assert not any((store / "staging").iterdir())
    assert len(xtalk.open(store).jobs()) == 6 * 30
    assert not processes_named()
