"""The journal and recovery, instant by instant, without running anything: a torn line, a
run published but not journaled, a half-written attempt, a run directory without an end."""

from __future__ import annotations

import json
from pathlib import Path

from xtalk.campaign import journal, layout
from xtalk.campaign.execute import recover
from xtalk.campaign.grid import expand_campaign
from xtalk.campaign.schema import parse
from xtalk.targets.agent import TargetFacts

FACTS = TargetFacts(online_cpus=[0, 1], caches={"l1d": 32768, "l2": 1 << 20, "llc": 8 << 20}, environment={})
TEXT = """name = "j"
repetitions = 2
[[application]]
name = "a"
criticality = "D"
epsilon = { metric = "response", statistic = "max", bound = "1ms" }
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 5
"""


def test_a_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path):
    p = tmp_path / "journal.jsonl"
    with journal.Journal(p) as j:
        j.append("r0", "running")
        j.append("r0", "done", seconds=0.1)
    with open(p, "ab") as f:
        f.write(b'{"t": 1, "run": "r1", "sta')  # killed mid-write
    assert [e["state"] for e in journal.read(p)] == ["running", "done"]
    with journal.Journal(p) as j:
        j.append("r1", "running")
    lines = p.read_bytes().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)
    assert journal.states(journal.read(p))["r1"]["state"] == "running"


def _campaign(tmp_path):
    exp = expand_campaign(parse(TEXT, "j.toml"), FACTS)
    store = layout.create(tmp_path, "j", TEXT, exp, {"name": "j"})
    assert not [d for d in tmp_path.iterdir() if d.name.startswith(".")]  # the hidden creation name is gone
    return store, exp


def test_a_creation_killed_before_its_rename_blocks_nothing_and_is_cleared(tmp_path):
    """A driver killed (SIGKILL, for real) between building the campaign and renaming it; the
    next `campaign run` in the same second (a fixed stamp: the clock may not tick) creates the
    campaign and removes the dead driver's half directory (CI once met the two in one second)."""
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(f"""\
        import datetime, os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_campaign_journal import FACTS, TEXT
        from xtalk.campaign import layout
        from xtalk.campaign.grid import expand_campaign
        from xtalk.campaign.schema import parse
        class Frozen(datetime.datetime):
            @classmethod
            def now(cls, tz=None):
                return datetime.datetime(2026, 11, 27, 14, 16, 34)
        layout.dt.datetime = Frozen
        layout.safepath.rename = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)
        layout.create({str(tmp_path)!r}, "j", TEXT, expand_campaign(parse(TEXT, "j.toml"), FACTS), {{"name": "j"}})
    """)
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr
    left = [d.name for d in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".j-20261127-141634.creating-"), left

    class Frozen(layout.dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return layout.dt.datetime(2026, 11, 27, 14, 16, 34)

    real = layout.dt.datetime
    layout.dt.datetime = Frozen
    try:
        exp = expand_campaign(parse(TEXT, "j.toml"), FACTS)
        first = layout.create(tmp_path, "j", TEXT, exp, {"name": "j"})
        second = layout.create(tmp_path, "j", TEXT, exp, {"name": "j"})  # same second again: the next name
    finally:
        layout.dt.datetime = real
    assert (first.name, second.name) == ("j-20261127-141634", "j-20261127-141634-1")
    assert sorted(d.name for d in tmp_path.iterdir()) == [first.name, second.name]
    assert layout.is_campaign(first) and layout.is_campaign(second)


def _finished_run(d, status="completed"):
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": d.name, "status": status, "jobs_recorded": 5}))


def test_recover_records_published_runs_and_moves_unfinished_ones_aside(tmp_path):
    store, exp = _campaign(tmp_path)
    ids = [r.run_id for r in exp.runs]
    assert len(ids) == 2
    with journal.Journal(store / layout.JOURNAL) as j:
        # ids[0]: renamed into runs/ and then killed before its `done` line.
        j.append(ids[0], "running", target="local")
        _finished_run(store / "runs" / ids[0])
        # ids[1]: killed during the run: its attempt is in staging/, and an old half directory
        # (no final status) sits in runs/ from a crash of an older version.
        j.append(ids[1], "running", target="local")
        (store / "staging" / ids[1]).mkdir(parents=True)
        (store / "staging" / ids[1] / "jobs.bin").write_bytes(b"partial")
        _finished_run(store / "runs" / ids[1], status="running")
        notes = recover(store, exp.runs, j)
        last = journal.states(j.events())
    assert last[ids[0]]["state"] == "done" and last[ids[0]]["recovered"]
    assert last[ids[1]]["state"] == "requeued"
    assert sorted(p.name for p in (store / "attempts").iterdir()) == [f"{ids[1]}.0", f"{ids[1]}.1"]
    assert [p.name for p in (store / "runs").iterdir()] == [ids[0]]
    assert not any((store / "staging").iterdir())
    assert len(notes) == 3


def test_layout_refuses_a_directory_that_is_not_a_campaign(tmp_path):
    import pytest

    from xtalk.errors import UsageError

    with pytest.raises(UsageError, match="not a campaign directory"):
        layout.load(tmp_path)


def test_kernel_log_reader_filters_by_the_run_start():
    import os
    import time

    import pytest

    from xtalk.targets.base import read_kmsg_since

    if not os.access("/dev/kmsg", os.R_OK):
        assert read_kmsg_since(0.0)[0].startswith("(kernel log not readable")
        pytest.skip("/dev/kmsg not readable here")
    everything = read_kmsg_since(0.0)
    assert everything and all(line.startswith("[") for line in everything)
    stamps = [float(line[1:line.index("]")]) for line in everything]
    assert stamps == sorted(stamps)
    # Nothing is stamped after now + 1 h: a run that starts then sees an empty log.
    assert read_kmsg_since(time.monotonic() + 3600) == []
    cut = stamps[len(stamps) // 2]
    since = read_kmsg_since(cut)
    assert all(float(line[1:line.index("]")]) >= cut for line in since)
    assert len(since) >= sum(s >= cut for s in stamps)  # the ring only grows meanwhile
