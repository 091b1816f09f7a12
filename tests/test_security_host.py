"""The host side of running as root on a shared machine (issue 13, items 3, 7, 10, 11).

- The machine-wide lock is root's own (/run/xtalk): a symbolic link or a flock another user
  plants at the old predictable /tmp path is neither followed nor waited on; a lock that is
  really held is waited on, saying for whom, then given up with one line.
- Experiment and campaign files are root code: one another user could write is refused.
- An agent killed mid-run is recovered by the host at once, which says what it restored.
- Two `xtalk run` at once take turns: their runs never overlap.

The attacks are made by a throwaway unprivileged user created here (and removed). Paths under
/tmp are attacked inside a private mount namespace whose /tmp is a directory of the test, so
the machine's real /tmp (and other xtalk users of it) are never touched.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, XTALK, is_root, processes_named, wait_for, xtalk
from xtalk.targets.lock import local_lock_path, target_lock
from xtalk.targets.private_dir import ROOT_DIR, UnsafePath, open_private_file, verify_dir
from xtalk import trust

needs_root = pytest.mark.skipif(not is_root(), reason="needs root (the attacks are on root's paths)")

TINY = """
name = "tiny"
repetitions = 1
settle = "10ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = {jobs}
warmup_jobs = 2
cpus = "last"
"""


def tiny_experiment(directory: Path, jobs: int = 20, name: str = "exp.toml") -> Path:
    f = Path(directory) / name
    f.write_text(TINY.replace("{jobs}", str(jobs)))
    return f


def clean_env(**extra) -> dict:
    """The environment of an xtalk started here, using the real lock (no test override)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XTALK_TARGET_LOCK", "XDG_RUNTIME_DIR", "SUDO_UID")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="module")
def user():
    """A throwaway unprivileged user: (name, uid, gid)."""
    if not is_root():
        pytest.skip("needs root to create a user")
    if not (shutil.which("useradd") and shutil.which("userdel") and shutil.which("runuser")):
        pytest.skip("needs useradd, userdel and runuser")
    name = f"xtt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
    try:
        import pwd

        pw = pwd.getpwnam(name)
        yield name, pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def in_private_tmp(fake_tmp: Path, script: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` (sh) as root in a new mount namespace whose /tmp is `fake_tmp`."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare(1) for a private /tmp")
    fake_tmp.mkdir(exist_ok=True)
    os.chmod(fake_tmp, 0o1777)
    # The checkout and its virtual environment may live under /tmp themselves (a CI clone):
    # bind them into the private /tmp at the same place, so xtalk still runs there.
    keep = ""
    roots = sorted({ROOT.resolve(), Path(sys.prefix).resolve()})
    for p in [p for p in roots if not any(p != q and p.is_relative_to(q) for q in roots)]:
        if p.is_relative_to("/tmp") and not fake_tmp.resolve().is_relative_to(p):
            inside = fake_tmp / p.relative_to("/tmp")
            keep += f"mkdir -p {shlex.quote(str(inside))} && mount --bind {shlex.quote(str(p))} {shlex.quote(str(inside))} || exit 97\n"
    # --rbind: the binds just made inside it come along.
    wrapped = f"{keep}mount --rbind {fake_tmp} /tmp || exit 97\n{script}"
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", wrapped],
                         capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if out.returncode == 97:
        pytest.skip(f"cannot bind-mount a private /tmp here: {out.stderr.strip()}")
    return out


PY = " ".join(XTALK)


# -- item 3: the lock ---------------------------------------------------------------------------


@needs_root
def test_roots_lock_is_in_its_private_directory_whatever_the_environment(tmp_path):
    env = clean_env(XDG_RUNTIME_DIR=tmp_path)  # even a runtime dir of someone else's choosing
    out = subprocess.run([sys.executable, "-c", "from xtalk.targets.lock import local_lock_path; print(local_lock_path())"],
                         capture_output=True, text=True, env=env)
    assert out.stdout.strip() == str(ROOT_DIR / "target.lock"), out.stderr
    st = os.lstat(ROOT_DIR)
    assert st.st_uid == 0 and not st.st_mode & 0o022 and not os.path.islink(ROOT_DIR)


@needs_root
def test_a_symlink_planted_at_the_old_lock_path_is_not_followed(user, tmp_path):
    name, uid, gid = user
    fake = tmp_path / "tmp"
    fake.mkdir()
    exp = tiny_experiment(fake)
    # The user points the old predictable path at a file root would have created (old code:
    # O_CREAT through the link). Planted from inside the namespace, as that user.
    script = (f"runuser -u {name} -- ln -s /tmp/created-by-root /tmp/xtalk-target.lock || exit 98\n"
              f"{PY} run /tmp/{exp.name} --results /tmp/res")
    out = in_private_tmp(fake, script, clean_env(XTALK_LOCK_TIMEOUT=30))
    assert out.returncode == 0, out.stderr
    assert (fake / "xtalk-target.lock").is_symlink() and os.lstat(fake / "xtalk-target.lock").st_uid == uid
    assert not (fake / "created-by-root").exists(), "root followed the planted link"
    assert "waiting for" not in out.stderr


@needs_root
def test_another_users_flock_at_the_old_path_does_not_block_roots_runs(user, tmp_path):
    name, _, _ = user
    fake = tmp_path / "tmp"
    fake.mkdir()
    exp = tiny_experiment(fake)
    # The user holds a flock on a file of theirs at the old path until root's run has ended.
    script = f"""
runuser -u {name} -- sh -c 'exec 9>/tmp/xtalk-target.lock; flock 9; touch /tmp/held; \
  while [ ! -e /tmp/done ]; do sleep 0.1; done' &
i=0; while [ ! -e /tmp/held ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -e /tmp/held ] || exit 98
{PY} run /tmp/{exp.name} --results /tmp/res; rc=$?
touch /tmp/done; wait
exit $rc
"""
    started = time.monotonic()
    out = in_private_tmp(fake, script, clean_env(XTALK_LOCK_TIMEOUT=30))
    assert out.returncode == 0, out.stderr
    assert "waiting for" not in out.stderr and time.monotonic() - started < 30
    (res,) = (fake / "res").iterdir()
    assert [json.loads((d / "run.json").read_text())["status"] for d in (res / "runs").iterdir()] == ["completed"]


@needs_root
def test_a_held_lock_is_waited_on_for_a_time_then_given_up_with_one_line(tmp_path):
    env = clean_env()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom xtalk.targets.lock import target_lock\n"
                               "with target_lock():\n    print('held', flush=True)\n    sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        exp = tiny_experiment(tmp_path)
        started = time.monotonic()
        out = xtalk("run", exp, "--results", tmp_path / "res", env=clean_env(XTALK_LOCK_TIMEOUT=1.5), timeout=60)
        took = time.monotonic() - started
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert out.returncode == 3, out.stderr
    lines = out.stderr.strip().splitlines()
    waiting = [ln for ln in lines if ln.startswith("xtalk: waiting for")]
    assert len(waiting) == 1, lines  # said once, not at every poll
    assert waiting[0].startswith(f"xtalk: waiting for {holder.pid} (") and "target_lock" in waiting[0], waiting
    assert waiting[0].endswith(f"holding {ROOT_DIR / 'target.lock'}"), waiting
    assert lines[-1].startswith("xtalk: the machine is busy:") and f"{ROOT_DIR / 'target.lock'}" in lines[-1], lines
    assert "XTALK_LOCK_TIMEOUT" in lines[-1] and "Traceback" not in out.stderr
    assert 1.5 <= took < 30
    (res,) = (tmp_path / "res").iterdir()
    assert not any((res / "runs").iterdir()), "no run may start without the machine"
    # Released: the next run takes it at once.
    again = xtalk("run", exp, "--results", tmp_path / "res2", env=clean_env(XTALK_LOCK_TIMEOUT=5), timeout=60)
    assert again.returncode == 0 and "waiting for" not in again.stderr, again.stderr


def test_the_lock_refuses_what_it_cannot_trust(tmp_path, user):
    name, uid, gid = user
    # A symbolic link: not followed, and the file it names is not created.
    link = tmp_path / "link.lock"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePath, match="symbolic link"):
        with target_lock(link, timeout=1):
            pass
    assert not (tmp_path / "elsewhere").exists()
    # A second name for a file of root's (a hard link): never written.
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    os.link(precious, tmp_path / "hard.lock")
    with pytest.raises(UnsafePath, match="hard links"):
        with target_lock(tmp_path / "hard.lock", timeout=1):
            pass
    assert precious.read_text() == "keep me"
    # Someone else's file.
    theirs = tmp_path / "theirs.lock"
    theirs.write_text("")
    os.chown(theirs, uid, gid)
    with pytest.raises(UnsafePath, match=f"owned by uid {uid}"):
        open_private_file(theirs)
    # Directories: someone else's, group-writable, a link, not a directory.
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    assert verify_dir(d) == d
    os.chown(d, uid, gid)
    with pytest.raises(UnsafePath, match="owned by uid"):
        verify_dir(d)
    os.chown(d, 0, 0)
    os.chmod(d, 0o770)
    with pytest.raises(UnsafePath, match="chmod 700"):
        verify_dir(d)
    (tmp_path / "dl").symlink_to(d)
    with pytest.raises(UnsafePath, match="symbolic link"):
        verify_dir(tmp_path / "dl")
    with pytest.raises(UnsafePath, match="not a directory"):
        verify_dir(precious)
    with pytest.raises(UnsafePath) as e:
        verify_dir(tmp_path / "dl")
    assert "\n" not in str(e.value) and f"rm {tmp_path / 'dl'}" in str(e.value)


def as_user(uid: int, gid: int, fn) -> str:
    """`fn()` in a forked child that has become the user; its result or error, as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            try:
                text = f"ok {fn()}"
            except Exception as e:
                text = f"error {e}"
            os.write(w, text.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return text


@needs_root
def test_an_unprivileged_users_lock_is_private_too(user, monkeypatch):
    """Without XDG_RUNTIME_DIR a user gets /tmp/xtalk-<uid>, made 0700; one planted by
    someone else is refused, not used. (The throwaway user's path is its own: no one else's
    lock is touched.)"""
    name, uid, gid = user
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XTALK_TARGET_LOCK", raising=False)
    mine = Path(f"/tmp/xtalk-{uid}")
    assert not mine.exists()
    try:
        assert as_user(uid, gid, local_lock_path) == f"ok {mine}/target.lock"
        st = os.lstat(mine)
        assert st.st_uid == uid and (st.st_mode & 0o777) == 0o700
        mine.rmdir()
        mine.mkdir(mode=0o777)  # planted by root here, standing for another user
        assert as_user(uid, gid, local_lock_path).startswith(f"error {mine}: owned by uid 0, not by uid {uid}")
    finally:
        shutil.rmtree(mine, ignore_errors=True)


# -- item 7: experiment and campaign files are root code ----------------------------------------


@pytest.mark.slow  # a refusal per command and file, each a command line: make test-slow
@needs_root
def test_files_someone_else_could_write_are_refused_before_anything_runs(user, tmp_path):
    name, uid, gid = user
    cases = []
    theirs = tiny_experiment(tmp_path, name="theirs.toml")
    os.chown(theirs, uid, gid)
    cases.append((theirs, f"owned by uid {uid} ({name})", f"chown root {theirs}"))
    writable = tiny_experiment(tmp_path, name="writable.toml")
    os.chmod(writable, 0o664)
    cases.append((writable, "writable by group or others (mode 0664)", f"chmod go-w {writable}"))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    in_open = tiny_experiment(open_dir)
    cases.append((in_open, f"its directory {open_dir} is writable", f"chmod go-w {open_dir}"))
    link = tmp_path / "link.toml"
    link.symlink_to(theirs)  # a link of root's to the user's file: what is read is theirs
    cases.append((link, f"owned by uid {uid}", "chown root"))
    for f, why, fix in cases:
        out = xtalk("run", f, "--results", tmp_path / "res")
        assert out.returncode == 2, (f, out.stderr)
        assert out.stderr.count("\n") == 1 and str(f) in out.stderr and why in out.stderr and fix in out.stderr, out.stderr
        assert not (tmp_path / "res").exists(), "nothing may start"
    # `plan` runs nothing: it warns and goes on.
    out = xtalk("plan", theirs)
    assert out.returncode == 0 and "warning" in out.stderr and "`run` will refuse it" in out.stderr, out.stderr
    # A campaign file likewise.
    from campaign_util import tiny

    camp = tiny(tmp_path / "open", jobs=10, name="camp.toml")
    os.chmod(open_dir, 0o755)
    os.chown(camp, uid, gid)
    out = xtalk("campaign", "run", camp, "--results", tmp_path / "cres")
    assert out.returncode == 2 and f"{camp}: owned by uid {uid}" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "cres").exists()


@needs_root
def test_files_root_or_the_sudo_user_own_are_accepted(user, tmp_path, monkeypatch):
    name, uid, gid = user
    f = tiny_experiment(tmp_path)
    assert trust.problem(f) is None  # root's, 0644, in root's 0755 directory
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # like /tmp: others cannot rename or remove root's file there
    assert trust.problem(tiny_experiment(sticky)) is None
    theirs = tiny_experiment(tmp_path, name="theirs.toml")
    os.chown(theirs, uid, gid)
    assert trust.problem(theirs) is not None
    monkeypatch.setenv("SUDO_UID", str(uid))  # `sudo xtalk run` by that user: their own file
    assert trust.problem(theirs) is None
    out = xtalk("plan", theirs, env={**os.environ, "SUDO_UID": str(uid)})
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr


# -- item 10: the host recovers a killed agent at once ------------------------------------------

STEERED = """
name = "killed"
repetitions = 1
seed = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "128KiB"
period = "5ms"
jobs = {jobs}
cpus = "last"
[[configuration]]
name = "steered"
enemies = {{ group = "e" }}
groups = [{{ name = "e", pids_max = 32, freezable = true }}]
housekeeping_cpus = [{hk}]
steer_irqs = true
[[scenario]]
name = "read"
enemies = [{{ kind = "read", bytes = "1MiB" }}]
"""


def jobs_in(path: Path) -> int:
    from xtalk.store.jobs import read_job_log

    try:
        return len(read_job_log(path))
    except Exception:
        return 0


def leftovers(agent_pid: int) -> dict:
    """What the agent `agent_pid` could have left: its groups, its journal, our processes.
    (Only its own: other xtalk users of this machine may have runs of their own going.)"""
    groups = [str(d) for d in Path("/sys/fs/cgroup").glob(f"*/xtalk-{agent_pid}")]
    journal = [str(p) for p in ROOT_DIR.glob(f"journal-p{agent_pid}.jsonl")]
    return {"cgroups": groups, "journal": journal, "processes": processes_named()}


@needs_root
def test_an_agent_killed_mid_run_is_recovered_by_the_host_at_once(tmp_path, facts):
    if len(facts.online_cpus) < 2:
        pytest.skip("needs two CPUs (housekeeping apart from the victim)")
    irqs = {p: p.read_text().strip() for p in Path("/proc/irq").glob("*/smp_affinity_list")}
    exp = tmp_path / "killed.toml"
    exp.write_text(STEERED.format(jobs=600, hk=facts.online_cpus[0]))
    p = subprocess.Popen([*XTALK, "run", exp, "--results", tmp_path / "res", "--skip-feasibility"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        # Well inside the first run: groups made, interrupts steered, jobs being recorded.
        assert wait_for(lambda: any(jobs_in(f) > 20 for f in (tmp_path / "res").glob("*/runs/*/jobs.bin")), timeout=60), \
            "no run got going"
        (agent_pid,) = [pid for pid, n in processes_named(("xtalk-agent",))]
        made = leftovers(agent_pid)
        assert made["cgroups"], "the run made no groups: nothing to recover"
        os.kill(agent_pid, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "Traceback" not in err, err
    killed = [json.loads((d / "run.json").read_text()) for d in (tmp_path / "res").glob("*/runs/*")]
    (dead,) = [m for m in killed if m["status"] != "completed"]
    assert dead["status"] == "failed" and "killed by signal 9" in dead["reason"], dead
    restored = [ln for ln in err.splitlines() if ln.startswith(f"xtalk: run {dead['run_id']}: restored: ")]
    assert restored, err  # the host said what it put back, at once
    assert dead["restored"] == [ln.split(": ", 2)[2] for ln in restored]
    assert [m["status"] for m in killed if m is not dead] == ["completed"], "the experiment went on"
    assert not any(leftovers(agent_pid).values()), leftovers(agent_pid)
    after = {q: q.read_text().strip() for q in Path("/proc/irq").glob("*/smp_affinity_list")}
    assert {k: v for k, v in after.items() if k in irqs} == {k: v for k, v in irqs.items() if k in after}


# -- item 11: `xtalk run` holds the machine run by run -------------------------------------------


@needs_root
def test_two_experiments_at_once_take_turns_run_by_run(tmp_path):
    exps = []
    for i in range(2):
        f = tmp_path / f"exp{i}.toml"
        f.write_text(TINY.replace("{jobs}", "250").replace('name = "tiny"', f'name = "e{i}"')
                     .replace("repetitions = 1", "repetitions = 3"))
        exps.append(f)
    env = clean_env(XTALK_LOCK_TIMEOUT=120)
    procs = [subprocess.Popen([*XTALK, "run", f, "--results", tmp_path / f"res{i}", "--skip-feasibility"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i, f in enumerate(exps)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    spans = []
    for i in range(2):
        (res,) = (tmp_path / f"res{i}").iterdir()
        for d in (res / "runs").iterdir():
            m = json.loads((d / "run.json").read_text())
            assert m["status"] == "completed", m
            spans.append((m["started_unix_ns"], m["ended_unix_ns"], i))
    assert len(spans) == 6
    spans.sort()
    for (s0, e0, a), (s1, e1, b) in zip(spans, spans[1:]):
        assert e0 <= s1, f"runs of experiment {a} and {b} overlap: {spans}"
    assert not processes_named()
