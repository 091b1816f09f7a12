"""Probe bindings besides C/C++: Python (`xtalk.probe`) and Rust (bindings/rust/xtalk-probe).
Each writes the header's records into the buffer the agent hands over, and the host reads them
back as it reads a C program's: a real program under the agent, not a buffer faked here."""

import subprocess
import sys

import pandas as pd

from conftest import ROOT
from test_probes import command_plan, run
from xtalk import installed
from xtalk.store.jobs import convert_run
from xtalk.store.probes import read_probe_events

CRATE = ROOT / "bindings" / "rust" / "xtalk-probe"

PY_APP = """
import os, sys
from xtalk import probe
sink = os.open(os.devnull, os.O_WRONLY)
assert probe.attached()
for k in range(40):
    with probe.span(5):
        os.write(sink, b"x")          # libc write: the preload library's probe 1001, nested
        sum(range(2000))
try:
    with probe.span(6):
        raise ValueError
except ValueError:
    pass
assert probe.dropped() == 0
"""


def _samples(out):
    convert_run(out)
    return pd.read_parquet(out / "probes.parquet")


def test_python_probes_share_the_buffer_with_the_preload_library(agent, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(PY_APP)
    p, out = run(agent, tmp_path, command_plan([sys.executable, app], preload=str(installed.preload_library())))
    assert p.returncode == 0, p.stderr
    s = _samples(out)
    spans, writes = s[s.probe == 5], s[(s.name == "write")]
    assert len(spans) == 40 and (spans.duration_ns > 0).all()
    assert len(s[s.probe == 6]) == 1, "a span's end is written when its body raises"
    assert len(writes) >= 40 and set(writes.tid) == set(spans.tid), "one thread, one buffer, two writers"
    # Each span holds its write: both clocks are the same counter, converted once.
    inside = [((writes.begin_ns >= b) & (writes.end_ns <= e)).sum() for b, e in zip(spans.begin_ns, spans.end_ns)]
    assert min(inside) >= 1
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert s.begin_ns.min() >= jobs.start_ns.iloc[0] and s.end_ns.max() <= jobs.end_ns.iloc[0]


def test_python_probes_outside_xtalk_do_nothing(tmp_path):
    p = subprocess.run([sys.executable, "-c", "from xtalk import probe; probe.begin(1); probe.end(1); "
                        "print(probe.attached(), probe.dropped())"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0 and p.stdout.split() == ["False", "0"], p.stderr


def test_rust_probes_are_read_back_by_the_host(agent, tmp_path):
    b = subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "steps", "--manifest-path",
                        CRATE / "Cargo.toml"], capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr
    p, out = run(agent, tmp_path, command_plan([CRATE / "target" / "release" / "examples" / "steps", 30, 1000]))
    assert p.returncode == 0, p.stderr
    ev = read_probe_events(out)
    assert len(ev) == 60 and set(ev.id) == {1}
    assert (ev.kind.to_numpy()[::2] == "begin").all() and (ev.kind.to_numpy()[1::2] == "end").all()
    s = _samples(out)
    assert len(s) == 30 and (s.duration_ns > 0).all() and s.begin_ns.is_monotonic_increasing
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert s.begin_ns.min() >= jobs.start_ns.iloc[0] and s.end_ns.max() <= jobs.end_ns.iloc[0]
