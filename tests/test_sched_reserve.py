"""`xtalk sched reserve` (src/xtalk/sched/reserve.py): the input checks (pure), then a real
SCHED_DEADLINE reservation on a spawned sleeper, read back during and gone after, and the
refusals in one line with exit 2. The tests that change a thread's policy need root and a
kernel that takes SCHED_DEADLINE: they skip, saying which is missing."""

from __future__ import annotations

import json
import os
import subprocess
import time
import sys
from pathlib import Path

import pytest

from xtalk.sched import reserve as rs
from xtalk.sched.inputs import InputError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("budget,period,says", [
    (2_000_000, 1_000_000, "exceeds Π"), (0, 1_000_000, "not positive"), (-5, 1_000_000, "not positive"),
    (500, 1_000_000, "under the kernel's minimum"), (1000, 0, "Π = 0 ns is not positive")])
def test_a_reservation_that_means_nothing_is_refused(budget, period, says):
    with pytest.raises(InputError, match=says):
        rs.check_reservation(budget, period)


def test_theta_equal_to_pi_is_a_whole_cpu_and_accepted():
    rs.check_reservation(1_000_000, 1_000_000)


@pytest.mark.parametrize("tids,says", [([], "no thread"), ([0], "not positive"), ([5, 5], "twice")])
def test_thread_lists_are_checked(tids, says):
    with pytest.raises(InputError, match=says):
        rs.check_tids(tids)


def test_restoring_a_fair_thread_asks_for_no_custom_slice():
    # sched_getattr reports the fair slice as runtime; giving it back would mark it custom.
    was = rs.Policy(rs.SCHED_OTHER, flags=rs.SCHED_FLAG_RESET_ON_FORK | 0x20, nice=10, runtime_ns=1_400_000)
    back = rs.restorable(was)
    assert (back.policy, back.nice, back.runtime_ns, back.flags) == (rs.SCHED_OTHER, 10, 0, rs.SCHED_FLAG_RESET_ON_FORK)
    assert rs.same_policy(was, back)
    dl = rs.deadline(200_000, 1_000_000)
    assert (dl.runtime_ns, dl.deadline_ns, dl.period_ns) == (200_000, 1_000_000, 1_000_000)
    assert rs.restorable(dl) == dl and not rs.same_policy(was, dl)


def _sched_policy(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/sched").read_text().splitlines() if x.startswith("policy"))
    return int(line.split(":")[1])


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def _need_deadline(pid: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("SCHED_DEADLINE needs root")
    before = rs.get_policy(pid)
    try:
        rs.set_policy(pid, rs.deadline(100_000, 10_000_000))
    except InputError as exc:
        pytest.skip(f"this kernel refuses SCHED_DEADLINE here: {exc}")
    rs.set_policy(pid, rs.restorable(before))


def test_a_sleeper_is_reserved_then_given_its_policy_back(sleeper):
    _need_deadline(sleeper)
    os.setpriority(os.PRIO_PROCESS, sleeper, 7)
    before = rs.get_policy(sleeper)
    with rs.reserved([sleeper], 300_000, 1_000_000) as rec:
        assert _sched_policy(sleeper) == rs.SCHED_DEADLINE
        now = rs.get_policy(sleeper)
        assert (now.runtime_ns, now.deadline_ns, now.period_ns) == (300_000, 1_000_000, 1_000_000)
    after = rs.get_policy(sleeper)
    assert _sched_policy(sleeper) == rs.SCHED_OTHER and after.nice == 7 and rs.same_policy(before, after)
    entry = rec["threads"][str(sleeper)]
    assert entry["during"]["policy"] == entry["end"]["policy"] == rs.SCHED_DEADLINE
    assert entry["after"]["policy"] == rs.SCHED_OTHER and entry["after"]["nice"] == 7


def test_a_gone_thread_is_refused_and_nothing_is_changed(sleeper):
    _need_deadline(sleeper)
    p = subprocess.Popen(["true"])
    p.wait()  # reaped: its id names no thread now
    with pytest.raises(InputError, match=f"thread {p.pid} is gone"):
        with rs.reserved([sleeper, p.pid], 300_000, 1_000_000):
            pass
    assert _sched_policy(sleeper) == rs.SCHED_OTHER  # checked before anything was set


def _cli(*args):
    code = "import sys; from xtalk.cli import main; sys.argv[0] = 'xtalk'; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, "sched", "reserve", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.parametrize("args,says", [
    (["--budget", "2", "--period", "1", "--tid", "1", "--", "true"], "exceeds Π"),
    (["--budget", "0", "--period", "1", "--tid", "1", "--", "true"], "not positive"),
    (["--budget", "0.5", "--period", "1", "--tid", "4194304", "--", "true"], "thread 4194304 is gone"),
    (["--budget", "0.5", "--tid", "1", "--", "true"], "Θ and Π are both needed"),
    (["--budget", "0.5", "--period", "1", "--tid", "1"], "nothing to run"),
    (["--budget", "0.5", "--period", "1", "--qmp", "/nonexistent/qmp.sock", "--", "true"], "qmp")])
def test_refusals_are_one_line_and_exit_2(args, says):
    r = _cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_cli_takes_theta_and_pi_from_sched_vm_and_records_the_run(sleeper, tmp_path):
    _need_deadline(sleeper)
    record = tmp_path / "reserve.json"
    r = _cli("--taskset", ROOT / "examples" / "models" / "guest-vm.toml", "--tid", sleeper, "--record", record, "--",
             "sh", "-c", f"grep -q '^policy *: *6$' /proc/{sleeper}/sched")
    assert r.returncode == 0, r.stderr  # the command saw the thread under SCHED_DEADLINE
    rec = json.loads(record.read_text())
    assert (rec["budget_ns"], rec["period_ns"], rec["restored"], rec["status"]) == (200_000, 1_000_000, True, 0)
    assert _sched_policy(sleeper) == rs.SCHED_OTHER


def test_sigterm_stops_the_command_and_restores_the_threads(sleeper, tmp_path):
    _need_deadline(sleeper)
    record, started = tmp_path / "reserve.json", tmp_path / "started"
    code = "import sys; from xtalk.cli import main; sys.argv[0] = 'xtalk'; sys.exit(main())"
    p = subprocess.Popen([sys.executable, "-c", code, "sched", "reserve", "--budget", "0.3", "--period", "1",
                          "--tid", str(sleeper), "--record", str(record), "--", "sh", "-c", f"touch {started}; exec sleep 60"],
                         cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if started.exists():
            break
        time.sleep(0.05)
    assert _sched_policy(sleeper) == rs.SCHED_DEADLINE
    p.terminate()
    assert p.wait(30) == 130, p.stderr.read()
    assert _sched_policy(sleeper) == rs.SCHED_OTHER
    rec = json.loads(record.read_text())
    assert rec["restored"] and rec["status"] == 130
