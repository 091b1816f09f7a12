"""The vCPU threads of a running qemu, read from its QMP socket (``-qmp unix:PATH,server=on``).

qemu runs each vCPU as one host thread; ``query-cpus-fast`` names its thread id. Those are
the threads a VM's reservation (Θ, Π) applies to (src/xtalk/sched/reserve.py).
"""

from __future__ import annotations

import json
import socket

from xtalk.sched.inputs import InputError


def vcpu_threads(reply: dict) -> list[int]:
    """Thread ids, by vCPU index, from a ``query-cpus-fast`` reply (pure)."""
    if "error" in reply:
        err = reply["error"]
        raise InputError("qmp", f"query-cpus-fast failed: {err.get('class')}: {err.get('desc')}")
    cpus = reply.get("return")
    if not isinstance(cpus, list) or not cpus:
        raise InputError("qmp", f"query-cpus-fast gave no vCPU: {reply!r}")
    try:
        return [int(c["thread-id"]) for c in sorted(cpus, key=lambda c: c.get("cpu-index", 0))]
    except (KeyError, TypeError, ValueError):
        raise InputError("qmp", f"a vCPU without a thread-id in {cpus!r}") from None


def _replies(lines: list[bytes]) -> list[dict]:
    """The command replies among QMP lines: asynchronous events are skipped (pure)."""
    docs = [json.loads(line) for line in lines if line.strip()]
    return [d for d in docs if "event" not in d]


def query(path: str, command: str, timeout: float = 10.0) -> dict:
    """One QMP command's reply on the socket at ``path`` (greeting and capabilities first)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            f = s.makefile("rwb")

            def reply() -> dict:
                while True:
                    line = f.readline()
                    if not line:
                        raise InputError("qmp", f"{path}: qemu closed the socket")
                    got = _replies([line])
                    if got:
                        return got[0]

            greeting = reply()
            if "QMP" not in greeting:
                raise InputError("qmp", f"{path}: not a QMP greeting: {greeting!r}")
            for cmd in ("qmp_capabilities", command):
                f.write(json.dumps({"execute": cmd}).encode() + b"\n")
                f.flush()
                answer = reply()
            return answer
    except OSError as exc:
        raise InputError("qmp", f"{path}: {exc.strerror or exc}", "is the guest up (board/guest.sh status)?") from None


def query_vcpu_threads(path: str) -> list[int]:
    """The vCPU thread ids of the qemu behind the QMP socket ``path``."""
    return vcpu_threads(query(path, "query-cpus-fast"))
