"""The check that every program the tests start is accounted for (tests/programs.py): it
records what the test process starts, knows what peers.sh installs, and flags the rest."""

import subprocess

import pytest

import programs


def test_peers_are_read_from_peers_sh():
    assert {"stress-ng", "sshd", "ssh", "ssh-keygen", "cyclictest", "chromium", "pkg-config"} <= programs.peers()


def test_a_started_program_is_recorded_with_its_test(monkeypatch):
    # An earlier test may have started `true` first (in any order: pytest-xdist): forget that one here.
    monkeypatch.delitem(programs._started, "true", raising=False)
    subprocess.run(["true"], check=True)
    assert programs._started["true"].endswith("test_a_started_program_is_recorded_with_its_test")


def test_a_program_nobody_installs_or_looks_up_is_flagged():
    started = {"qemu-system-aarch64": "t1", "stress-ng": "t2", "openssl": "t3", "true": "t4"}
    assert programs.unaccounted(started, looked_up=set()) == {"qemu-system-aarch64": "t1", "openssl": "t3"}
    assert programs.unaccounted(started, looked_up={"openssl", "qemu-system-aarch64"}) == {}


def test_a_missing_program_skips_with_the_reason():
    with pytest.raises(pytest.skip.Exception, match="no-such-program-xtalk is not installed: peers.sh"):
        programs.need_program("no-such-program-xtalk", "peers.sh")
    assert programs.need_program("sh").endswith("/sh")
