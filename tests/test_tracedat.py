"""trace.dat, the agent's raw capture (trace-cmd's format, version 6): the host's reader on a
recorded file (ns stamps, the text parser's column names, trace-cmd agreeing where installed),
and damage read around and said, never raised. The live capture: tests/test_trace.py."""

import shutil
import subprocess
import warnings
from pathlib import Path

import pandas as pd
import pytest

from test_trace import REPORT_LINE
from xtalk.errors import Damaged
from xtalk.trace import tracedat
from xtalk.trace.parse import parse_file, trace_file

# Recorded by the agent on a busy 2-vCPU guest (Linux 6.18): 10 jobs of a `sum` victim
# (SCHED_OTHER, 2 ms) on CPU 1, which slept 4 times (late behind the other tasks, it mostly
# went straight on); events sched_switch, sched_wakeup, sched_waking, sched_process_fork,
# irq_handler_entry/exit, softirq_entry/exit.
FIXTURE = Path(__file__).parent / "fixtures" / "trace_sample.dat"
VICTIM = 10957


def said(f):
    """(f's result, the Damaged lines it warned)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = f()
    return out, [str(x.message) for x in w if issubclass(x.category, Damaged)]


def test_recorded_trace_dat_decodes_at_ns_with_the_text_parsers_names():
    ev, damage = said(lambda: parse_file(FIXTURE))
    assert not damage
    assert ev.attrs["resolution_ns"] == 1
    counts = ev.event.value_counts()
    assert counts["sched_switch"] == 92 and counts["sched_wakeup"] == 64 and counts["irq_handler_entry"] == 3
    assert ev.ts_ns.is_monotonic_increasing and (ev.ts_ns % 1000 != 0).mean() > 0.9, "ns stamps, not µs"
    sw = ev[ev.event == "sched_switch"]
    mine = sw[sw.prev_pid == VICTIM]
    assert len(mine) == 4 and set(mine.prev_comm) == {"xt-victim"} and set(mine.prev_state) == {"S", "Z"}  # it slept, then exited
    assert (mine.comm == "xt-victim").all() and (mine.pid == VICTIM).all()
    wake = ev[(ev.event == "sched_wakeup") & (ev.target_pid == VICTIM)]
    assert len(wake) >= 4 and (wake.target_comm == "xt-victim").all() and (wake.target_cpu == 1).all()
    irq = ev[ev.event == "irq_handler_entry"]
    assert irq.name.str.len().min() > 0 and irq.irq.notna().all()  # the __data_loc string
    assert set(ev[ev.event == "softirq_entry"].name) <= set(tracedat.SOFTIRQS)
    assert set(ev[ev.event == "irq_handler_exit"].ret) <= {"handled", "unhandled"}
    fork = ev[ev.event == "sched_process_fork"]
    assert fork.child_pid.notna().all() and (fork.parent_comm.str.len() > 0).all()


@pytest.mark.skipif(shutil.which("trace-cmd") is None, reason="needs trace-cmd (Debian's trace-cmd; tests/peers.sh installs it)")
def test_trace_cmd_reads_the_same_events_and_stamps():
    rep = subprocess.run([shutil.which("trace-cmd"), "report", "-t", FIXTURE], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    lines = [m for m in map(REPORT_LINE.match, rep.stdout.splitlines()) if m]
    theirs = sorted((int(m["sec"]) * 1_000_000_000 + int(m["ns"]), int(m["cpu"]), int(m["pid"]), m["event"]) for m in lines)
    ev = parse_file(FIXTURE)
    assert theirs == sorted(zip(ev.ts_ns.astype(int), ev.cpu.astype(int), ev.pid.astype(int), ev.event))


def test_the_run_directory_prefers_trace_dat(tmp_path):
    assert trace_file(tmp_path) is None
    (tmp_path / "trace.txt").write_text("")
    assert trace_file(tmp_path) == tmp_path / "trace.txt"
    shutil.copy(FIXTURE, tmp_path / "trace.dat")
    assert trace_file(tmp_path) == tmp_path / "trace.dat"


@pytest.mark.parametrize("how", ["header cut", "emptied", "pages cut", "page garbled", "commit too large"])
def test_damage_is_read_around_and_said(tmp_path, how):
    data = bytearray(FIXTURE.read_bytes())
    whole = len(parse_file(FIXTURE))
    off1 = tracedat.read(FIXTURE).cpus[1][0]
    if how == "header cut":
        data = data[:5000]
    elif how == "emptied":
        data = b""
    elif how == "pages cut":
        data = data[:off1 + 4096 + 100]
    elif how == "page garbled":
        data[off1 + 64:off1 + 1064] = bytes(b ^ 0x5A for b in data[off1 + 64:off1 + 1064])
    else:
        data[off1 + 8:off1 + 16] = (1 << 20).to_bytes(8, "little")
    p = tmp_path / "trace.dat"
    p.write_bytes(bytes(data))
    ev, damage = said(lambda: parse_file(p))
    assert damage and all(str(p) in d for d in damage), damage
    assert len(ev) < whole and list(ev.columns[:5]) == ["ts_ns", "cpu", "comm", "pid", "event"]
    if how in ("pages cut", "commit too large"):
        assert (ev.cpu == 0).sum() == (parse_file(FIXTURE).cpu == 0).sum(), "the intact CPU is read whole"


def test_an_unknown_version_is_refused_by_name(tmp_path):
    p = tmp_path / "trace.dat"
    data = bytearray(FIXTURE.read_bytes())
    data[10:11] = b"7"
    p.write_bytes(bytes(data))
    with pytest.raises(tracedat.TraceDatError, match="version 7"):
        tracedat.read(p)
    assert pd.api.types.is_integer_dtype(parse_file(FIXTURE).ts_ns)


def test_a_post_mortem_keeps_the_trace_dat_tail_as_text(tmp_path):
    from xtalk.campaign.postmortem import _dat_tail

    tail = _dat_tail(FIXTURE, 5).splitlines()
    assert len(tail) == 6 and tail[0].split()[:5] == ["ts_ns", "cpu", "comm", "pid", "event"]
    cut = tmp_path / "trace.dat"
    cut.write_bytes(FIXTURE.read_bytes()[:3000])
    said_ = _dat_tail(cut, 5)
    assert str(cut) in said_ and "header" in said_
