"""The SSH target against an sshd of our own on 127.0.0.1 (generated keys, free port, temp
dir; started and stopped here, the system's sshd untouched): the agent is copied, plans run
there and come back; a target that does not answer sends the campaign to wait, then resume
finishes it on a live target."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import xtalk
from campaign_util import campaign_dirs, tiny
from conftest import processes_named, small_plan, wait_for, xtalk as run_xtalk
from xtalk.campaign import layout
from xtalk.campaign.prepare import prepare
from xtalk.plan import Plan
from xtalk.targets.agent import local_facts
from xtalk.targets.base import TargetUnreachable
from xtalk.targets.ssh import SshTarget

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("no sshd/ssh/ssh-keygen here (apt-get install openssh-server openssh-client)")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / key], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = _free_port()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {(d / 'host.pub').read_text()}")
    (d / "sshd_config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin yes
StrictModes no
UsePAM no
""")
    # sshd insists on its privilege separation directory; create it only if missing, and
    # remove it afterwards, so the machine is left as found.
    made_run = not os.path.isdir("/run/sshd")
    if made_run:
        os.makedirs("/run/sshd", mode=0o755)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", d / "sshd_config"], stdout=subprocess.DEVNULL, stderr=open(d / "sshd.log", "w"))

    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return proc.poll() is not None

    if not wait_for(listening, timeout=10) or proc.poll() is not None:
        proc.kill()
        pytest.skip(f"sshd did not start: {(d / 'sshd.log').read_text()[-300:]}")
    user = os.environ.get("USER") or "root"
    url = f"ssh://{user}@127.0.0.1:{port}?identity={d / 'client'}&known_hosts={d / 'known_hosts'}&cache={d / 'cache'}&name=board"
    try:
        yield url, d
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        if made_run:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def test_ssh_target_installs_the_agent_runs_a_plan_and_fetches_results(sshd, tmp_path):
    url, d = sshd
    t = SshTarget.from_url(url)
    assert t.facts().online_cpus == local_facts().online_cpus
    assert Path(t.agent).parent == d / "cache" and os.access(t.agent, os.X_OK)  # copied: same architecture
    started = time.time()
    plan = Plan.model_validate(small_plan("ssh-run", jobs=20, cpus=[t.facts().online_cpus[-1]]))
    t.check(plan.to_json())
    meta = t.run(plan, tmp_path / "run")
    assert meta["status"] == "completed", meta
    assert (tmp_path / "run" / "agent.log").exists() and (tmp_path / "run" / "jobs.parquet").exists()
    assert not [p for p in Path("/tmp").glob("xtalk-run.*") if p.stat().st_mtime > started], "work directory left there"
    assert isinstance(t.kernel_log_since(0.0), list)


def test_campaign_on_ssh_target_and_failover_when_a_target_does_not_answer(sshd, tmp_path):
    url, _ = sshd
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": "repetitions = 2"})
    dead = f"ssh://root@127.0.0.1:{_free_port()}?name=dead"  # nothing listens there
    base2 = tmp_path / "res2"
    out = run_xtalk("campaign", "run", f, "--results", base2, "--target", url, "--target", dead, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "target dead does not answer" in out.stdout, out.stdout
    (store2,) = campaign_dirs(base2)
    runs = xtalk.open(store2).runs()
    assert len(runs) == 4 and set(runs.status) == {"completed"}
    st = run_xtalk("campaign", "status", store2)
    assert "target dead: not answering" in st.stdout and "target board: answering" in st.stdout, st.stdout
    assert not processes_named()


def test_a_campaign_whose_only_target_is_down_stops_then_resumes_on_another(sshd, tmp_path):
    url, _ = sshd
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": "repetitions = 1"})
    dead = f"ssh://root@127.0.0.1:{_free_port()}?name=dead"
    with pytest.raises(TargetUnreachable):
        SshTarget.from_url(dead).facts()
    # Nothing to plan with: one line, exit 3, nothing created.
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "none", "--target", dead)
    assert out.returncode == 3 and out.stderr.startswith("xtalk: no target answers: dead:"), out.stderr
    assert not campaign_dirs(tmp_path / "none")
    # A campaign planned on the live board, then driven on the dead one: it waits, stops, says so.
    p = prepare(f, [SshTarget.from_url(url)])
    store = layout.create(tmp_path / "res", p.campaign.name, p.text, p.expansion, {"name": p.campaign.name, "kind": "ssh"})
    out = run_xtalk("campaign", "resume", store, "--target", dead, "--target-wait", "2", timeout=120)
    assert out.returncode == 3 and "no target answered" in out.stderr and "2 run(s) remain" in out.stderr, out.stderr
    st = run_xtalk("campaign", "status", store)
    assert "0 done, 0 failed, 2 remaining of 2" in st.stdout and "target dead: not answering" in st.stdout, st.stdout
    out = run_xtalk("campaign", "resume", store, "--target", url, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "2 done, 0 failed, 0 remaining of 2" in out.stdout
    assert len(xtalk.open(store).jobs()) == 2 * 20
