"""A labgrid lab on loopback for the lab tests (tests/test_lab*.py): a real labgrid-coordinator
and labgrid-exporter started here, the places made and matched to the exporter's resources."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
from pathlib import Path

from conftest import wait_for

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def client(addr: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "labgrid-client", "-x", addr, *args], capture_output=True, text=True, timeout=60)


def acquired(addr: str, place: str) -> bool:
    out = client(addr, "-p", place, "show").stdout
    line = next((x for x in out.splitlines() if x.strip().startswith("acquired:")), "acquired: None")
    return line.split(":", 1)[1].strip() not in ("None", "")


@contextlib.contextmanager
def coordinator_and_exporter(d: Path, exported: dict, env: dict):
    """A coordinator on a free loopback port and an exporter (group ``xtalk-lab``) publishing
    ``exported`` ({place: {resource: arguments}}), one place per entry made and matched;
    yields the coordinator's address. Both are stopped on the way out; their logs stay in ``d``."""
    import yaml  # labgrid's dependency: the lab tests skip without labgrid

    (d / "exporter.yaml").write_text(yaml.safe_dump(exported))
    port = free_port()
    addr = f"127.0.0.1:{port}"
    logs = [open(d / "coordinator.log", "w"), open(d / "exporter.log", "w")]
    coordinator = subprocess.Popen([BIN / "labgrid-coordinator", "-l", addr], cwd=d, stdout=logs[0],
                                   stderr=subprocess.STDOUT)
    exporter = None
    try:
        assert wait_for(lambda: listening(port), timeout=30), (d / "coordinator.log").read_text()[-500:]
        exporter = subprocess.Popen([BIN / "labgrid-exporter", "-c", addr, "-n", "xtalk-lab", "--hostname", "127.0.0.1",
                                     d / "exporter.yaml"], cwd=d, stdout=logs[1], stderr=subprocess.STDOUT,
                                    env={**env, "LG_COORDINATOR": addr})
        for place in exported:
            assert client(addr, "-p", place, "create").returncode == 0
            assert client(addr, "-p", place, "add-match", f"xtalk-lab/{place}/*").returncode == 0
        assert wait_for(lambda: all(p in client(addr, "resources").stdout for p in exported), timeout=30, step=0.5), \
            (d / "exporter.log").read_text()[-500:]
        yield addr
    finally:
        for proc in (exporter, coordinator):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for f in logs:
            f.close()
