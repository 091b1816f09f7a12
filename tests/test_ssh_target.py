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
from xtalk.errors import AgentError, UsageError
from xtalk.outcome import load_outcome
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
    assert meta.status == "completed", meta
    # The board's settings, read over SSH by the local target's reader (the board is this machine).
    assert meta.settings.before["/proc/cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert meta.settings.drift == [] and meta.invalid is None and load_outcome(tmp_path / "run").settings == meta.settings
    assert (tmp_path / "run" / "agent.log").exists() and (tmp_path / "run" / "jobs.parquet").exists()
    assert not [p for p in Path("/tmp").glob("xtalk-run.*") if p.stat().st_mtime > started], "work directory left there"
    assert isinstance(t.kernel_log_since(0.0), list)


def test_aocs_data_is_made_on_the_board_by_its_agent(sshd, tmp_path):
    from xtalk.aocs import EXPECTED_FILE, INPUT_FILE, read_header

    url, d = sshd
    t = SshTarget.from_url(url)
    where = tmp_path / "board-data"  # the board is this machine: its files are visible here
    inp, expected = t.aocs_data(str(where), 3, "victim.data")
    assert (inp, expected) == (str(where / INPUT_FILE), str(where / EXPECTED_FILE))
    assert read_header(Path(inp))["seed"] == 3
    before = Path(inp).stat().st_mtime_ns
    assert t.aocs_data(str(where), 3, "victim.data") == (inp, expected)  # present: kept as it is
    assert Path(inp).stat().st_mtime_ns == before
    copy = t.aocs_data(str(where), 3, "scenario[0].enemies[0].data", "dup-aocs#1")
    assert copy[0] == str(where / "dup" / "dup-aocs-1" / INPUT_FILE) and Path(copy[0]).read_bytes() == Path(inp).read_bytes()
    with pytest.raises(UsageError, match=r"victim.data: .* holds AOCS files of seed 3, not data_seed = 4"):
        t.aocs_data(str(where), 4, "victim.data")


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


@pytest.mark.slow  # a campaign stopped, then resumed over SSH: make test-slow
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


# -- the URL is input and the board runs as root: quoting, validation, host keys -----------------

FAKE_SSH = """#!/bin/sh
# Stands for ssh and the board's sshd: logs its arguments, then runs the remote command the
# way sshd does, `$SHELL -c "<the words after the destination, joined by spaces>"`.
for a in "$@"; do printf '%s\\n' "$a" >> "$FAKE_SSH_LOG"; done
echo "--end--" >> "$FAKE_SSH_LOG"
if [ -n "$FAKE_SSH_FAIL" ]; then echo "$FAKE_SSH_FAIL" >&2; exit 255; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break;;
    -p|-o|-i) shift 2;;
    -*) shift;;
    *) break;;
  esac
done
shift
cd "$FAKE_HOME" && HOME="$FAKE_HOME" exec sh -c "$*"
"""

NASTY = ['x"; touch {m}; "', "x'; touch {m}; '", "x$(touch {m})", "x`touch {m}`", "x; touch {m}", "x\\\\\" $(touch {m})",
         "x*{{a,b}} $HOME ~ ~root"]


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """`ssh` on PATH that runs the remote command here with sh -c, as root like a board."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    (bin_dir / "ssh").write_text(FAKE_SSH)
    os.chmod(bin_dir / "ssh", 0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_HOME", str(home))
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh.log"))
    marker = tmp_path / "pwned"
    return home, marker, tmp_path / "ssh.log"


@pytest.mark.parametrize("nasty", NASTY)
@pytest.mark.parametrize("prefix", ["/ABS/", "~/", "~/sub dir/"])
def test_remote_words_are_taken_literally_by_the_remote_shell(tmp_path, nasty, prefix):
    from xtalk.targets.ssh import remote_word

    marker = tmp_path / "pwned"
    path = prefix.replace("/ABS/", f"{tmp_path}/") + nasty.format(m=marker)
    word = remote_word(path)
    out = subprocess.run(["sh", "-c", f"printf '%s' {word}"], capture_output=True, text=True, env={"HOME": "/the/home"})
    expected = path.replace("~/", "/the/home/", 1) if path.startswith("~/") else path
    assert out.stdout == expected and not marker.exists(), (word, out.stdout)


@pytest.mark.parametrize("nasty", NASTY[:5])
def test_an_injection_in_the_cache_path_is_not_executed_and_the_run_works(fake_ssh, tmp_path, nasty):
    import urllib.parse

    home, marker, log = fake_ssh
    cache = "~/" + nasty.format(m=marker)
    t = SshTarget.from_url(f"ssh://root@127.0.0.1:2222?cache={urllib.parse.quote(cache, safe='')}&name=fake")
    assert t.facts().online_cpus == local_facts().online_cpus
    assert not marker.exists(), "the URL's text ran as a command on the board"
    literal = home / nasty.format(m=marker)
    assert Path(t.agent).parent == literal and os.access(t.agent, os.X_OK), t.agent  # the path, verbatim
    plan = Plan.model_validate(small_plan("ssh-quoted", jobs=10, cpus=[t.facts().online_cpus[-1]]))
    meta = t.run(plan, tmp_path / "run")
    assert meta.status == "completed", meta
    assert (literal / "target.lock").is_file()  # the board's lock, inside the cache as named
    assert not marker.exists(), "the URL's text ran as a command on the board"
    # Every connection checks the host key, and nothing after `--` is an ssh option.
    calls = log.read_text().split("--end--\n")[:-1]
    assert calls and all("StrictHostKeyChecking=yes" in c.splitlines() and "--" in c.splitlines() for c in calls)


def test_an_injection_in_the_agent_path_is_not_executed(fake_ssh):
    import urllib.parse

    home, marker, _ = fake_ssh
    agent = f"/nonexistent/x$(touch {marker})"
    t = SshTarget.from_url(f"ssh://root@127.0.0.1:2222?agent={urllib.parse.quote(agent, safe='')}&name=fake")
    with pytest.raises(AgentError, match="is not an executable file there"):
        t.facts()
    assert not marker.exists()


def test_host_keys_are_always_checked_and_new_ones_accepted_only_when_asked(fake_ssh, monkeypatch):
    plain = SshTarget.from_url("ssh://root@board.lab:22")._ssh("true")
    assert "StrictHostKeyChecking=yes" in plain and plain[-3:] == ["--", "root@board.lab", "true"]
    assert "StrictHostKeyChecking=accept-new" in SshTarget.from_url("ssh://root@board.lab?host_key=accept-new")._ssh("true")
    # An unknown or changed key is the user's to settle: one line saying how, not a board "down".
    monkeypatch.setenv("FAKE_SSH_FAIL", "Host key verification failed.")
    with pytest.raises(AgentError) as e:
        SshTarget.from_url("ssh://root@board.lab?name=b").facts()
    assert not isinstance(e.value, TargetUnreachable)
    assert "host key is unknown or changed" in str(e.value) and "host_key=accept-new" in str(e.value)


@pytest.mark.parametrize("url,needle", [
    ("ssh://-oProxyCommand=touch%20x", "is not a host name"),
    ("ssh://-oProxyCommand=x@host", "user"),
    ("ssh://root@host:99999", "port"),
    ("ssh://root@host?cache=relative/dir", "absolute path"),
    ("ssh://root@host?cache=~other/dir", "not ~user"),
    ("ssh://root@host?agent=%0Arm", "printable"),
    ("ssh://root@host?host_key=no", "host_key"),
    ("ssh://root@host?known_hosts=/nonexistent/file", "known_hosts"),
    ("ssh://root@host?identity=/nonexistent/key", "identity"),
    ("ssh://root@host?name=a%20b", "name="),
    ("ssh://root@host?proxy=x", "unknown option"),
])
def test_bad_target_urls_are_refused_in_one_line(url, needle):
    with pytest.raises(UsageError) as e:
        SshTarget.from_url(url)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_board_of_another_architecture_gets_the_agent_built_here_for_it(fake_ssh, tmp_path, monkeypatch):
    """The board's `uname -m` differs from this host's (an aarch64 board of an x86_64 lab host):
    the agent built here for the board ($XTALK_AGENT_<ARCH>, else `make agent-aarch64`'s build)
    is copied into its cache, not this host's; none built: one line saying how."""
    import hashlib
    import platform

    home, _, _ = fake_ssh
    board = platform.machine()  # the fake board is this machine: its uname -m
    monkeypatch.setattr(platform, "machine", lambda: "not-" + board)  # the host is "another" architecture
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")  # no xtalk-agent on the board's PATH
    monkeypatch.delenv(f"XTALK_AGENT_{board.upper()}", raising=False)
    with pytest.raises(AgentError, match=f"architecture \\({board}\\) differs .*XTALK_AGENT_{board.upper()}=FILE"):
        SshTarget.from_url("ssh://root@127.0.0.1:2222?name=fake").agent
    built = tmp_path / "agent-for-the-board"
    built.write_text("#!/bin/sh\necho the board's own agent\n")
    built.chmod(0o755)
    monkeypatch.setenv(f"XTALK_AGENT_{board.upper()}", str(built))
    agent = Path(SshTarget.from_url("ssh://root@127.0.0.1:2222?name=fake").agent)
    digest = hashlib.sha256(built.read_bytes()).hexdigest()[:16]
    assert agent == home / ".cache" / "xtalk" / f"xtalk-agent-{digest}" and agent.read_bytes() == built.read_bytes()
    assert os.access(agent, os.X_OK)
    # cached: the next target finds it there
    assert Path(SshTarget.from_url("ssh://root@127.0.0.1:2222?name=fake").agent) == agent
    monkeypatch.setenv(f"XTALK_AGENT_{board.upper()}", str(tmp_path / "missing"))
    with pytest.raises(AgentError, match=f"XTALK_AGENT_{board.upper()}=.* is not an executable file"):
        SshTarget.from_url("ssh://root@127.0.0.1:2222?name=other&cache=~/c2").agent
