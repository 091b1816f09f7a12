"""The lab on the emulated x86 guest: the amd64 image of `make guest` (Debian, stock and
PREEMPT_RT kernels) as a labgrid place powered by labgrid's own QEMUDriver
(qemu-system-x86_64, q35, TCG: the place is described as the Arm board's are, lab_util.py).

A real labgrid-coordinator and labgrid-exporter on loopback, one place `guest-1` (the image
written to a snapshot, SSH forwarded). A small campaign with a kernel axis on it: the place is
acquired, the guest booted into the kernel of its runs, the runs made through the SSH target
with the host's own agent (the guest is x86_64, the host's architecture: no cross build), the
guest rebooted into the other kernel only once, every run measured on the kernel its label
names, the console kept, the place released and qemu gone at the end. With only the RT kernel
in the image (a cache from before the guest had both), the campaign has no kernel axis.

Minutes of TCG on a shared machine: `make lab-test` runs it, `make test` does not. Skips
without qemu-system-x86_64 or the image (`make guest`; XTALK_GUEST_DIR names its cache, else
XTALK_BOARD_DIR, else build/board), the host's agent, labgrid, or root.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from campaign_util import campaign_dirs, tiny
from conftest import xtalk as run_xtalk
from lab_util import (GUEST, acquired, booted, coordinator_and_exporter, environment, free_port, known_hosts, lab_url,
                      missing, qemus)
from xtalk.outcome import load_outcome

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XTALK_GUEST_DIR", os.environ.get("XTALK_BOARD_DIR", REPO / "build" / "board"))).resolve()
AGENT = REPO / "agent" / "target" / "release" / "xtalk-agent"
PLACE = "guest-1"


def _kernels() -> tuple[str, ...]:
    """The kernels the campaign varies: both where the image has both, else its RT one."""
    both = ("stock", "rt")
    return both if not missing(GUEST, CACHE, both) else ("rt",)


@pytest.fixture(scope="module")
def guestlab(tmp_path_factory):
    """(coordinator address, environment file, lab directory, SSH port, kernels)."""
    kernels = _kernels()
    why = missing(GUEST, CACHE, kernels, AGENT)
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("guestlab")
    port = free_port()
    (d / "known_hosts").write_text(known_hosts(GUEST, CACHE, [port]))
    exported = {PLACE: {"NetworkService": {"address": "127.0.0.1", "username": "root", "port": port}}}
    with coordinator_and_exporter(d, exported, dict(os.environ)) as addr:
        (d / "lab.yaml").write_text(environment(GUEST, CACHE, {PLACE: (port, "rootfs")}, {}, addr))
        yield addr, d / "lab.yaml", d, port, kernels


@pytest.mark.slow
@pytest.mark.timeout(3600)  # one TCG guest boots once per kernel on a shared 2-vCPU host
def test_a_campaign_on_the_x86_guest_place_over_its_kernels(guestlab, tmp_path):
    """Every run completed on the guest place, on x86_64, under the kernel its label names;
    the guest booted once per kernel (a batch per boot); the place released, qemu gone."""
    addr, env, d, port, kernels = guestlab
    axis = f"kernels = {json.dumps(list(kernels))}\nrepetitions = 1"
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": axis})
    url = lab_url(PLACE, env, CACHE / "id_ed25519", d / "known_hosts", kernel=kernels[0],
                  boot_timeout=int(os.environ.get("XTALK_LAB_BOOT_S", 1200)))
    t0 = time.monotonic()
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--target", url, "--skip-feasibility",
                    timeout=3000)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (store,) = campaign_dirs(tmp_path / "res")
    runs = [load_outcome(r) for r in sorted((store / "runs").iterdir())]
    assert len(runs) == 2 * len(kernels) and all(r.status == "completed" for r in runs), [r.status for r in runs]
    versions = {k: (CACHE / f"{GUEST.prefix}version-{k}").read_text().strip() for k in kernels}
    for r in runs:
        k = r.labels()["kernel"]
        assert r.labels()["board"] == PLACE
        assert r.environment.kernel.machine == "x86_64"
        assert r.environment.kernel.release == versions[k], (k, r.environment.kernel.release)
        assert r.environment.kernel.preempt_rt == (k == "rt"), (k, r.environment.kernel.release)
    assert {r.labels()["kernel"] for r in runs} == set(kernels)
    # one boot per kernel, in the order the runs asked for them (never a boot per run)
    console = (store / "boards" / f"{PLACE}-console.log").read_text(errors="replace")
    assert booted(console, versions) == list(kernels), console[-2000:]
    events = [json.loads(x) for x in (store / "journal.jsonl").read_text().splitlines()]
    lab = [e["lab"] for e in events if e.get("board") == PLACE and "lab" in e]
    assert lab[0] == "acquired" and lab[-1] == "released" and lab.count("booted") == len(kernels), lab
    assert "failed" not in lab, lab
    assert not acquired(addr, PLACE)
    assert qemus(GUEST, [port]) == []
    print(f"guest lab: {len(runs)} runs on {PLACE} over kernels {list(kernels)} "
          f"({', '.join(versions[k] for k in kernels)}) in {took:.0f} s")
