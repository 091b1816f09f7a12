"""Safe as root on a shared machine (issue 13, items 1, 2 and 5): a local user prepares each
attack of the issue as an unprivileged account made for the test, then the agent runs as
root, and each attack fails: the root-owned target file is untouched, the decoy process
lives, and the refusal is reported.

1. Names the agent used to create in world-writable directories (/dev/shm/xtalk-<pid>),
   taken in advance with `freezer.state` a symlink to the target and a decoy's pid in
   `cgroup.procs`; and a journal naming such a directory (what an earlier agent left):
   recovery refuses it, says so, and does not retry it forever.
2. The `fileio` enemy's files, predicted in the directory it writes to and made symlinks to
   the target.
5. A trace event name that climbs out of tracefs onto a file the user prepared.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import needs_root, write_plan
from xtalk.config.experiment import load
from xtalk.errors import UsageError

pytestmark = needs_root

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


@pytest.fixture(scope="module")
def attacker():
    """A throwaway unprivileged account: (uid, gid)."""
    if not (shutil.which("useradd") and shutil.which("setpriv")):
        pytest.skip("needs useradd and setpriv")
    name = f"xtatk{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-M", "-N", "-r", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_attacker(who, code: str, *args) -> subprocess.CompletedProcess:
    """Run Python `code` as the unprivileged account."""
    uid, gid = who
    p = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", SYSTEM_PYTHON, "-c", code, *map(str, args)],
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def target(tmp_path):
    """A root-only file the attacks aim at."""
    t = tmp_path / "secret"
    t.write_text("precious\n")
    t.chmod(0o600)
    return t


@pytest.fixture
def decoy():
    """A process nobody may kill."""
    p = subprocess.Popen(["sleep", "300"])
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def open_dir():
    """A world-writable sticky directory under /tmp, as /tmp itself."""
    d = Path(tempfile.mkdtemp(prefix="xtalk-sec-", dir="/tmp"))
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def last_pid() -> int:
    return int(Path("/proc/sys/kernel/ns_last_pid").read_text())


# Takes every name the next 150 pids would give the agent's staging directory.
PLANT_SHM = r"""
import os, sys
target, decoy, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
for pid in range(first, first + 150):
    d = f"/dev/shm/xtalk-{pid}"
    os.mkdir(d, 0o777)
    os.chmod(d, 0o777)
    os.symlink(target, f"{d}/freezer.state")
    os.symlink(target, f"{d}/jobs.bin")
    with open(f"{d}/cgroup.procs", "w") as f:
        f.write(decoy + "\n")
"""


def small_plan(**extra) -> dict:
    return {"version": 1, "run_id": "sec", "timeout_s": 30, "settle_ms": 20,
            "victim": {"body": {"kind": "sum", "bytes": 65536}, "period_ns": 2_000_000, "jobs": 30, "warmup_jobs": 1,
                       "placement": {"cpus": None}}, **extra}


def run_agent(agent, tmp_path, plan, name="run"):
    out = tmp_path / name
    p = subprocess.run([agent, "run", write_plan(tmp_path, plan, f"{name}.json"), "--out", out], capture_output=True, text=True, timeout=120)
    return p, out


def test_predicted_staging_names_in_dev_shm_are_never_used(agent, attacker, target, decoy, tmp_path):
    first = last_pid() + 1
    as_attacker(attacker, PLANT_SHM, target, decoy.pid, first)
    planted = [Path(f"/dev/shm/xtalk-{pid}") for pid in range(first, first + 150)]
    try:
        p, out = run_agent(agent, tmp_path, small_plan())
        meta = json.loads((out / "run.json").read_text())
        assert first <= meta["pids"]["agent"] < first + 150, "the agent's pid fell outside the names taken: no attack happened"
        assert p.returncode == 0 and meta["status"] == "completed", p.stderr
        assert meta["configuration"]["restored"] and meta["configuration"]["records_staged_on_tmpfs"]
        assert target.read_text() == "precious\n", "the root-only file was written through the attacker's symlink"
        assert decoy.poll() is None, "the decoy process was killed"
        # The records went through a private directory of the agent's own, not the planted one.
        assert (out / "jobs.bin").is_file() and not (out / "jobs.bin").is_symlink()
        assert all(d.is_dir() and (d / "cgroup.procs").read_text().strip() == str(decoy.pid) for d in planted), \
            "the attacker's directories are left alone"
        # Recovery (every start runs it) finds nothing to undo.
        rec = subprocess.run([agent, "recover"], capture_output=True, text=True, timeout=60)
        assert rec.returncode == 0 and "xtalk-" not in rec.stdout, rec.stdout
    finally:
        for d in planted:
            shutil.rmtree(d, ignore_errors=True)


def free_pid() -> int:
    """A pid no process has (for a dead agent's journal)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    return next(p for p in range(pid_max - 1, 300, -1) if not Path(f"/proc/{p}").exists())


def test_recovery_refuses_a_journal_naming_the_attackers_directory_and_does_not_loop(agent, attacker, target, decoy, tmp_path):
    first = last_pid() + 1
    as_attacker(attacker, PLANT_SHM.replace("first + 150", "first + 1"), target, decoy.pid, first)
    d = Path(f"/dev/shm/xtalk-{first}")
    pid = free_pid()
    journal = Path(f"/run/xtalk/journal-{pid}.jsonl")
    # What an agent before this fix journalled when the attacker had its name: a directory
    # (undone by thawing and killing what it lists), and what else a forged or stale journal
    # may hold about it.
    entries = [{"op": "mkdir", "path": str(d)}, {"op": "cgroup", "path": str(d)}, {"op": "private", "path": str(d)},
               {"op": "stage", "tmp": str(d / "jobs.bin"), "dest": str(tmp_path / "jobs.bin")},
               {"op": "write", "path": str(d / "freezer.state"), "old": "THAWED", "new": "FROZEN"}]
    Path("/run/xtalk").mkdir(mode=0o700, exist_ok=True)
    journal.write_text("".join(json.dumps(e) + "\n" for e in entries))
    try:
        rec = subprocess.run([agent, "recover"], capture_output=True, text=True, timeout=60)
        lines = [line for line in rec.stdout.splitlines() if line.startswith(f"agent {pid}: ")]
        assert rec.returncode == 0
        assert lines and all("refused" in line and str(d) in line for line in lines), rec.stdout
        assert target.read_text() == "precious\n"
        assert decoy.poll() is None
        assert not (tmp_path / "jobs.bin").exists()
        assert not journal.exists(), "an entry that cannot be undone safely is dropped, not retried at every start"
        again = subprocess.run([agent, "recover"], capture_output=True, text=True, timeout=60)
        assert f"agent {pid}:" not in again.stdout
    finally:
        journal.unlink(missing_ok=True)
        shutil.rmtree(d, ignore_errors=True)


# Every name the fileio enemy used to create, for the next 150 pids, a symlink to the target.
PLANT_FILEIO = r"""
import os, sys
target, where, first, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for pid in range(first, first + 150):
    for name in [f"xtalk-fileio-{pid}-{i}" for i in range(3)] + [f"xtalk-fileio-{pid}-shared-{nbytes}"]:
        os.symlink(target, os.path.join(where, name))
"""


def test_fileio_never_writes_through_a_planted_symlink(agent, attacker, target, open_dir, tmp_path):
    nbytes = 1 << 20
    first = last_pid() + 1
    as_attacker(attacker, PLANT_FILEIO, target, open_dir, first, nbytes)
    planted = sorted(os.listdir(open_dir))
    enemies = [{"name": "mono", "load": {"kind": "fileio", "bytes": nbytes, "shared": True, "dir": str(open_dir)}},
               {"name": "mono2", "load": {"kind": "fileio", "bytes": nbytes, "shared": True, "dir": str(open_dir)}},
               {"name": "multi", "load": {"kind": "fileio", "bytes": nbytes, "dir": str(open_dir)}}]
    p, out = run_agent(agent, tmp_path, small_plan(enemies=enemies))
    meta = json.loads((out / "run.json").read_text())
    assert first <= meta["pids"]["agent"] < first + 150, "the agent's pid fell outside the names taken: no attack happened"
    assert p.returncode == 0 and meta["status"] == "completed", (p.stderr, meta["reason"])
    assert all(e["ops"] > 0 and not e["setup_error"] for e in meta["enemies"]), meta["enemies"]
    assert target.read_text() == "precious\n" and target.stat().st_size == 9, "the root-only file was overwritten"
    assert sorted(os.listdir(open_dir)) == planted, "the run's private directory is gone, the attacker's links untouched"


def test_trace_event_names_cannot_leave_tracefs(agent, attacker, target, open_dir, tmp_path):
    # The user prepares <open_dir>/x/y/enable -> target, reachable from tracefs by "..".
    as_attacker(attacker, "import os, sys; os.makedirs(sys.argv[1] + '/x/y'); os.symlink(sys.argv[2], sys.argv[1] + '/x/y/enable')",
                open_dir, target)
    climb = "../../../.." + str(open_dir) + "/x:y"
    plan = small_plan(trace={"events": ["sched:sched_switch", climb], "buffer_kb": 1024})
    for cmd in (["check", write_plan(tmp_path, plan)], ["run", write_plan(tmp_path, plan), "--out", tmp_path / "run"]):
        p = subprocess.run([agent, *cmd], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p
        assert len(p.stderr.strip().splitlines()) == 1 and "trace.events[1]" in p.stderr and "not an event name" in p.stderr, p.stderr
    assert not (tmp_path / "run").exists(), "nothing started"
    assert target.read_text() == "precious\n"
    # The host's experiment model refuses it too, in one line naming the field.
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "t"\n[victim]\nbody = "sum"\nbytes = "256KiB"\nperiod = "2ms"\njobs = 10\n[trace]\nevents = ["' + climb + '"]\n')
    with pytest.raises(UsageError) as e:
        load(exp)
    assert "trace.events" in str(e.value) and "\n" not in str(e.value), str(e.value)
    print(e.value)
