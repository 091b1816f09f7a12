"""A labgrid lab on loopback for the lab tests (tests/test_lab*.py): a real labgrid-coordinator
and labgrid-exporter started here, the places made and matched to the exporter's resources."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conftest import wait_for

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Emulated:
    """One of the project's emulated machines as labgrid's QEMUDriver boots it (docs/lab.md,
    section 6): the image `make NAME` builds in the board cache, its files named PREFIX...,
    its qemu started through board/TOOL (niced, dying with the campaign host)."""

    name: str     # "board" or "guest": what `make NAME` builds
    prefix: str   # of its files in the cache: "" or "guest-"
    qemu: str     # the qemu binary, for the skip's reason and to find its processes
    tool: str     # the `tools: qemu:` of the environment file, in board/
    machine: str  # QEMUDriver's machine: one it gives a virtio root disk (virt, q35)
    cpu: str
    console: str  # the kernel's serial console
    bus: str      # the virtio devices' transport: "device" (virtio-mmio) or "pci"


#: The Cortex-A53 board of `make board`: virtio-mmio (QEMUDriver's `nic` takes PCI models,
#: whose boot ROM Debian's qemu-system-arm does not install without ipxe-qemu).
BOARD = Emulated("board", "", "qemu-system-aarch64", "lab-qemu.sh", "virt", "cortex-a53,pmu=on", "ttyAMA0", "device")
#: The x86 guest of `make guest`, under TCG (qemu's own CPU model, with its hypervisor leaf).
GUEST = Emulated("guest", "guest-", "qemu-system-x86_64", "lab-qemu-x86_64.sh", "q35", "max", "ttyS0", "pci")
#: The smallest machine the tiny campaign runs on (a victim CPU and an enemy CPU): `make
#: board`'s 4 cores and 1 GiB are more than TCG instances on this 2-vCPU host need.
SMP, MEMORY = 2, "512M"

# One target per place: QEMUDriver boots the image's kernel of $LG_KERNEL (the run's `kernel`
# label) with its initrd (QEMUDriver takes none of its own: in extra_args), the root disk as a
# snapshot (QEMUDriver adds root=/dev/vda), SSH forwarded to PORT, an entropy source.
ENV_TARGET = """\
  {place}:
    resources:
      RemotePlace: {{name: {place}}}
    drivers:
      QEMUDriver:
        qemu_bin: qemu
        machine: {m.machine}
        cpu: {m.cpu}
        memory: {memory}
        kernel: !template "{m.prefix}vmlinuz-$LG_KERNEL"
        disk: {disk}
        disk_opts: snapshot=on
        boot_args: "rootfstype=ext4 rw console={m.console} net.ifnames=0 systemd.unified_cgroup_hierarchy=1"
        extra_args: !template "-smp {smp} -accel tcg,thread=multi -initrd {cache}/{m.prefix}initrd-$LG_KERNEL -device virtio-rng-{m.bus}
          -netdev user,id=net,hostfwd=tcp:127.0.0.1:{port}-:22 -device virtio-net-{m.bus},netdev=net"
"""


def image_files(m: Emulated, kernels: tuple[str, ...]) -> list[str]:
    """The cache's files a place of ``m`` boots from with these kernels."""
    return [f"{m.prefix}{f}" for f in ("rootfs.img", "host_key.pub",
                                       *(f"{x}-{k}" for k in kernels for x in ("vmlinuz", "initrd", "version")))]


def missing(m: Emulated, cache: Path, kernels: tuple[str, ...], agent: Path | None = None) -> str | None:
    """Why places of ``m`` cannot run here (labgrid, qemu, the image, the agent, root), or None."""
    try:
        import labgrid  # noqa: F401
    except ImportError:
        return "labgrid is not installed: pip install 'xtalk[lab]'"
    if not shutil.which(m.qemu):
        return f"{m.qemu} is missing: run 'make {m.name}' (as root: the tools, then the {m.name}'s image)"
    if not all((cache / f).is_file() for f in (*image_files(m, kernels), "id_ed25519")):
        return (f"no {m.name} image in {cache} (kernels {', '.join(kernels)}): run 'make {m.name}' "
                f"(XTALK_BOARD_DIR names another cache)")
    if agent is not None and not os.access(agent, os.X_OK):
        return f"no agent at {agent}: 'make setup' builds this host's, 'make agent-aarch64' the board's (docs/board.md)"
    if os.geteuid() != 0:
        return f"the {m.name}'s image and key are root's (make {m.name})"
    return None


def environment(m: Emulated, cache: Path, places: dict, images: dict, coordinator: str) -> str:
    """A labgrid environment file for places of ``m``: ``places`` {place: (SSH port, disk
    image key)}, ``images`` {key: path} beside the cache's kernels (vmlinuz-K) and root
    (rootfs); qemu through board/TOOL; the coordinator at ``coordinator``."""
    kernels = sorted(f.name[len(m.prefix) + 8:] for f in cache.glob(f"{m.prefix}vmlinuz-*"))
    images = {**{f"{m.prefix}vmlinuz-{k}": cache / f"{m.prefix}vmlinuz-{k}" for k in kernels},
              "rootfs": cache / f"{m.prefix}rootfs.img", **images}
    return ("targets:\n" + "".join(ENV_TARGET.format(place=p, port=port, disk=disk, m=m, memory=MEMORY, smp=SMP,
                                                     cache=cache) for p, (port, disk) in places.items())
            + "images:\n" + "".join(f"  {k}: {v}\n" for k, v in images.items())
            + f"tools:\n  qemu: {REPO}/board/{m.tool}\noptions:\n  coordinator_address: {coordinator}\n")


def known_hosts(m: Emulated, cache: Path, ports) -> str:
    """known_hosts lines for the image's host key on each forwarded port."""
    key = " ".join((cache / f"{m.prefix}host_key.pub").read_text().split()[:2])
    return "".join(f"[127.0.0.1]:{port} {key}\n" for port in ports)


def qemus(m: Emulated, ports) -> list[int]:
    """The processes of ``m``'s qemu still forwarding one of ``ports``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if m.qemu in cmd and any(f"127.0.0.1:{p}-:22" in cmd for p in ports):
            found.append(int(pid))
    return found


def booted(console: str, versions: dict) -> list[str]:
    """The kernels a console shows booting, in order (one `Linux version` line each);
    ``versions`` {kernel: its release}."""
    return [k for line in console.splitlines() if "Linux version " in line for k in versions
            if line.split("Linux version ")[1].startswith(versions[k] + " ")]


def lab_url(place: str, env: Path, identity: Path, known: Path, **extra) -> str:
    """The labgrid:// target of ``place``."""
    q = {"env": env, "identity": identity, "known_hosts": known, **extra}
    return f"labgrid://{place}?" + "&".join(f"{k}={v}" for k, v in q.items())


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
