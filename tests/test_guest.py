"""The x86 guest's pure parts (board/guest.sh, src/xtalk/sched/qmp.py): the qemu command line,
the accelerator choice and argument handling, and the QMP replies that name the vCPU threads,
against a fake QMP server. Nothing is booted or installed here: `make guest-test` does that
(docs/board.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from xtalk.sched import qmp
from xtalk.sched.inputs import InputError

ROOT = Path(__file__).resolve().parent.parent
GUEST = ROOT / "board" / "guest.sh"

#: What qemu 7.2 answers to query-cpus-fast for `-smp 2` (x86_64, trimmed), vCPU 1 first.
REPLY = {"return": [
    {"thread-id": 22183, "props": {"core-id": 0, "thread-id": 0, "socket-id": 1}, "qom-path": "/machine/unattached/device[2]",
     "cpu-index": 1, "target": "x86_64"},
    {"thread-id": 22182, "props": {"core-id": 0, "thread-id": 0, "socket-id": 0}, "qom-path": "/machine/unattached/device[0]",
     "cpu-index": 0, "target": "x86_64"}]}


def _guest(tmp_path, *args, **env):
    e = dict(os.environ, XTALK_BOARD_DIR=str(tmp_path), **env)
    return subprocess.run(["sh", str(GUEST), *args], capture_output=True, text=True, env=e, timeout=30)


def test_qemu_command_under_kvm_is_the_host_cpu_with_qmp_and_ssh_on_loopback(tmp_path):
    out = _guest(tmp_path, "command", "kvm", "2345")
    assert out.returncode == 0, out.stderr
    cmd = out.stdout
    assert cmd.startswith("qemu-system-x86_64 -M q35 -accel kvm -cpu host,-arch-capabilities -smp 2 ")
    assert "hostfwd=tcp:127.0.0.1:2345-:22" in cmd
    assert f"-qmp unix:{tmp_path}/guest-run/qmp.sock,server=on,wait=off" in cmd
    assert f"{tmp_path}/guest-vmlinuz-rt" in cmd and f"{tmp_path}/guest-initrd-rt" in cmd
    assert f"file={tmp_path}/guest-rootfs.img,format=raw,if=none,id=disk,snapshot=on" in cmd  # never written
    assert "console=ttyS0" in cmd


def test_qemu_command_under_tcg_says_tcg_and_the_cpu_count_is_settable(tmp_path):
    out = _guest(tmp_path, "command", "tcg", "2345", XTALK_GUEST_CPUS="1")
    assert out.returncode == 0, out.stderr
    assert "-accel tcg,thread=multi -cpu max -smp 1 " in out.stdout and "kvm" not in out.stdout


def test_the_accelerator_can_be_forced_and_a_wrong_one_is_refused(tmp_path):
    assert "-accel tcg" in _guest(tmp_path, "command", XTALK_GUEST_ACCEL="tcg").stdout
    out = _guest(tmp_path, "command", XTALK_GUEST_ACCEL="hvf")
    assert out.returncode == 2 and "XTALK_GUEST_ACCEL 'hvf': write kvm or tcg" in out.stderr, out.stderr


def test_a_wrong_subcommand_is_one_line_and_exit_2(tmp_path):
    for args, says in ((("reboot",), "usage: board/guest.sh up"), (("command", "xen"), "accelerator 'xen': write kvm or tcg")):
        out = _guest(tmp_path, *args)
        assert out.returncode == 2, (args, out)
        assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_up_without_an_image_says_to_build_it(tmp_path):
    out = _guest(tmp_path, "up")
    assert out.returncode == 2 and "run 'make guest' first" in out.stderr, out.stderr
    assert not (tmp_path / "guest-run" / "qemu.pid").exists()


def test_nothing_up_is_said_not_guessed(tmp_path):
    for args in (("url",), ("vcpus",), ("ssh", "true")):
        out = _guest(tmp_path, *args)
        assert out.returncode == 2 and "no guest up" in out.stderr, (args, out.stderr)
    assert "down" in _guest(tmp_path, "status").stderr


def test_tools_for_the_guest_are_named():
    out = subprocess.run(["sh", str(ROOT / "board" / "tools.sh"), "--guest", "--dry-run"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    said = out.stdout + out.stderr
    assert "qemu-system-x86" in said or "tools in place (qemu-system-x86_64" in said, said


def test_vcpu_threads_come_in_vcpu_order():
    assert qmp.vcpu_threads(REPLY) == [22182, 22183]


@pytest.mark.parametrize("reply,says", [
    ({"error": {"class": "CommandNotFound", "desc": "The command query-cpus-fast has not been found"}}, "CommandNotFound"),
    ({"return": []}, "no vCPU"),
    ({"return": [{"cpu-index": 0}]}, "without a thread-id")])
def test_a_reply_without_threads_is_refused(reply, says):
    with pytest.raises(InputError, match=says):
        qmp.vcpu_threads(reply)


def test_events_between_replies_are_skipped():
    lines = [b'{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "RESUME"}\n', json.dumps(REPLY).encode()]
    assert qmp._replies(lines) == [REPLY]


def _fake_qmp(path: Path, reply: dict) -> threading.Thread:
    """A QMP server for one client: greeting, capabilities, an event, then ``reply``."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        f.write(b'{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}\r\n')
        f.flush()
        assert json.loads(f.readline()) == {"execute": "qmp_capabilities"}
        f.write(b'{"return": {}}\r\n')
        f.flush()
        assert json.loads(f.readline()) == {"execute": "query-cpus-fast"}
        f.write(b'{"timestamp": {"seconds": 1, "microseconds": 0}, "event": "NIC_RX_FILTER_CHANGED"}\r\n')
        f.write(json.dumps(reply).encode() + b"\r\n")
        f.flush()
        conn.close()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_the_client_reads_the_threads_from_a_qmp_socket(tmp_path):
    sock = tmp_path / "qmp.sock"
    t = _fake_qmp(sock, REPLY)
    assert qmp.query_vcpu_threads(str(sock)) == [22182, 22183]
    t.join(5)


def test_no_socket_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="is the guest up"):
        qmp.query_vcpu_threads(str(tmp_path / "none.sock"))
