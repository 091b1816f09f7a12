"""The lab on emulated boards: the Cortex-A53 board of `make board` (its Debian arm64 image,
stock and PREEMPT_RT kernels) as labgrid places whose power is labgrid's own QEMUDriver.

A real labgrid-coordinator and labgrid-exporter on loopback; three places, each published by
the exporter as the NetworkService of its SSH port forward: emu-1 and emu-2 (two QEMU
instances of the one image, written to a snapshot each) and emu-broken (the same kernels
with a root disk of zeros: a board whose image does not boot). One small campaign over the
three with a kernel axis: the runs land on both good boards and both kernels, each run
measured on the kernel its label names (the agent's own uname and PREEMPT_RT flag), every
board's console kept; the broken board is power-cycled once, then out with its console log
(the kernel's own complaint in it), and the campaign completes on the others. The campaign
host is killed (SIGKILL) once a run is done and resumed: the places are taken over, the boards
booted again, and every run done exactly once.

Minutes of TCG on a shared machine: `make lab-test` runs it, `make test` does not. Skips
without qemu-system-aarch64 or the image (`make board`), the aarch64 agent
(`make agent-aarch64`), labgrid, or root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from campaign_util import campaign_dirs, tiny
from conftest import XTALK, wait_for, xtalk as run_xtalk
from lab_util import (BOARD, acquired, booted as booted_kernels, coordinator_and_exporter, environment, free_port,
                      known_hosts, lab_url, missing, qemus)
from xtalk.outcome import load_outcome

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XTALK_BOARD_DIR", REPO / "build" / "board")).resolve()
AGENT = REPO / "agent" / "target" / "aarch64-unknown-linux-musl" / "release" / "xtalk-agent"
GOOD, BROKEN = ("emu-1", "emu-2"), "emu-broken"


@pytest.fixture(scope="module")
def emulab(tmp_path_factory):
    """(coordinator address, environment file, lab directory, {place: port})."""
    why = missing(BOARD, CACHE, ("stock", "rt"), AGENT)
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("emulab")
    ports = {p: free_port() for p in (*GOOD, BROKEN)}
    # A broken image: the kernels boot, the root disk holds no file system.
    with open(d / "broken.img", "wb") as f:
        f.truncate(64 << 20)
    (d / "known_hosts").write_text(known_hosts(BOARD, CACHE, ports.values()))
    exported = {p: {"NetworkService": {"address": "127.0.0.1", "username": "root", "port": port}}
                for p, port in ports.items()}
    with coordinator_and_exporter(d, exported, dict(os.environ)) as addr:
        places = {p: (port, "broken" if p == BROKEN else "rootfs") for p, port in ports.items()}
        (d / "lab.yaml").write_text(environment(BOARD, CACHE, places, {"broken": d / "broken.img"}, addr))
        yield addr, d / "lab.yaml", d, ports


def _url(lab, place: str, **extra) -> str:
    _, env, d, _ = lab
    return lab_url(place, env, CACHE / "id_ed25519", d / "known_hosts", **extra)


def _board_kernel(store: Path) -> set[tuple[str, str]]:
    return {(r.labels()["board"], r.labels()["kernel"]) for r in map(load_outcome, (store / "runs").iterdir())}


def _dedup(kernels: list[str]) -> list[str]:
    return [k for i, k in enumerate(kernels) if i == 0 or kernels[i - 1] != k]


def check_campaign(store: Path, out: str, resumed_at: float, console_at_kill: dict) -> list[str]:
    """The campaign's results against what the emulated lab must show, across the host killed
    at ``resumed_at`` (before it: the first host; after: the resume; ``console_at_kill``: each
    board's console log's size when the first host died); the broken board's console lines on
    its root disk."""
    runs = [load_outcome(r) for r in sorted((store / "runs").iterdir())]
    assert len(runs) == 4 and all(r.status == "completed" for r in runs), [r.status for r in runs]
    seen = _board_kernel(store)
    assert {b for b, _ in seen} == set(GOOD) and {k for _, k in seen} == {"stock", "rt"}, (seen, out[-2000:])
    # each run measured on an emulated aarch64 board, on the kernel its label names
    versions = {k: (CACHE / f"version-{k}").read_text().strip() for k in ("stock", "rt")}
    for r in runs:
        k = r.labels()["kernel"]
        assert r.environment.kernel.machine == "aarch64"
        assert r.environment.kernel.release == versions[k] and r.environment.kernel.preempt_rt == (k == "rt"), \
            (k, r.environment.kernel.release)
    # none lost, none repeated across the kill: each run done exactly once
    events = [json.loads(x) for x in (store / "journal.jsonl").read_text().splitlines()]
    done = [e["run"] for e in events if e.get("state") == "done"]
    assert sorted(done) == sorted({d.name for d in (store / "runs").iterdir()}) and len(done) == 4, done
    # each good board's console kept (labgrid's QEMUDriver serial, read by the target): in each
    # host's life it booted its first kernel (`kernel=`, maybe only for the checks), then again
    # only where the kernel of its next run changed (a batch per boot, never a boot per run);
    # a run in flight when the host died counts for the boot it asked for
    kernel_of = {d.name: load_outcome(d).labels()["kernel"] for d in (store / "runs").iterdir()}
    for p, first in zip(GOOD, ("stock", "rt")):
        console = (store / "boards" / f"{p}-console.log").read_bytes()
        cut = console_at_kill.get(p, 0)
        for life, text in ((0, console[:cut]), (1, console[cut:])):
            ran = [kernel_of[e["run"]] for e in events if e.get("state") == "running" and e.get("target") == p
                   and (e["t"] >= resumed_at) == bool(life)]
            booted = booted_kernels(text.decode(errors="replace"), versions)
            fits = [_dedup(ran), _dedup([first] + ran)]
            if life == 0:  # killed before the last boot asked for printed its first line
                fits += [x[:-1] for x in fits]
            assert booted in fits, (p, life, booted, ran)
    # the broken board: powered on for a run, cycled once, then out, its console kept; the
    # host that gave up on it booted it twice (the first host may have died during its boots,
    # and it boots the kernel of the run it took: `kernel=`'s runs may be gone to the others)
    log = (store / "boards" / f"{BROKEN}-boot.log").read_text(errors="replace")
    assert "2 boot attempts" in log and f"console of {BROKEN}" in log
    console = log.split(f"console of {BROKEN}")[1]
    boots = console.count("Linux version ")
    assert 2 <= boots <= 4, log[-2000:]
    assert "login:" not in console and "Started ssh" not in console, log[-2000:]
    assert f"{BROKEN}: did not boot" in out or boots == 2, out[-3000:]  # said by the host that gave up on it
    # the journal's lines of the places: the broken one failed and never booted; the resume
    # took over what the first host held, and released every place
    lab = [e for e in events if "lab" in e]
    assert [e["lab"] for e in lab if e["board"] == BROKEN and e["lab"] in ("booted", "failed")] == ["failed"], lab
    for p in GOOD:
        assert [e["lab"] for e in lab if e["board"] == p][-1] == "released", lab
    return [x for x in console.splitlines() if "vda" in x or "initramfs" in x.lower()]


@pytest.mark.slow
@pytest.mark.timeout(5400)  # three TCG boards boot on a shared 2-vCPU host, twice: minutes each
def test_a_campaign_over_two_emulated_boards_and_both_kernels_killed_and_resumed_with_a_broken_board_out(emulab, tmp_path):
    """The campaign host is SIGKILLed once a run is done (its qemus die with it: lab-qemu.sh);
    `campaign resume` with the same targets takes the places over, boots the boards again and
    finishes: every run done once, on both boards and both kernels."""
    addr, _, d, ports = emulab
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": 'kernels = ["stock", "rt"]\nrepetitions = 1'})
    boot_s = int(os.environ.get("XTALK_LAB_BOOT_S", 900))
    targets = ["--target", _url(emulab, "emu-1", kernel="stock", boot_timeout=boot_s),
               "--target", _url(emulab, BROKEN, kernel="stock", boot_timeout=int(os.environ.get("XTALK_LAB_BROKEN_S", 120))),
               "--target", _url(emulab, "emu-2", kernel="rt", boot_timeout=boot_s)]
    t0 = time.monotonic()
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen([*XTALK, "campaign", "run", f, "--results", tmp_path / "res", *targets,
                                 "--skip-feasibility"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def one_done():
            dirs = campaign_dirs(tmp_path / "res")
            j = dirs[0] / "journal.jsonl" if dirs else None
            return j is not None and j.exists() and '"state":"done"' in j.read_text()
        assert wait_for(one_done, timeout=3000, step=2), (tmp_path / "first.log").read_text()[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_after = time.monotonic() - t0
    (store,) = campaign_dirs(tmp_path / "res")
    # nothing released the places; the qemus died with the host (their parent-death signal)
    held = [p for p in ports if acquired(addr, p)]
    assert set(GOOD) & set(held), held
    assert wait_for(lambda: qemus(BOARD, ports.values()) == [], timeout=30, step=0.5), qemus(BOARD, ports.values())
    console_at_kill = {p: (store / "boards" / f"{p}-console.log").stat().st_size
                       for p in GOOD if (store / "boards" / f"{p}-console.log").exists()}
    resumed_at = time.time()
    out = run_xtalk("campaign", "resume", store, *targets, "--skip-feasibility", timeout=3600)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "taken over" in out.stdout, out.stdout[-3000:]
    said = check_campaign(store, (tmp_path / "first.log").read_text() + out.stdout, resumed_at, console_at_kill)
    assert qemus(BOARD, ports.values()) == []  # every QEMU powered off
    print(f"emulated lab: {BROKEN}'s console on its root disk: {said[-3:]}")
    print(f"emulated lab: campaign of 4 runs over {GOOD} + {BROKEN}: host killed at {killed_after:.0f} s "
          f"(places held: {held}), resumed and done at {took:.0f} s; boards and kernels {sorted(_board_kernel(store))}")
    taken = {e["board"] for e in map(json.loads, (store / "journal.jsonl").read_text().splitlines())
             if e.get("lab") == "taken over" and e["t"] >= resumed_at}
    print(f"emulated lab: places held when the host was killed {held}, taken over by the resume {sorted(taken)}")
    assert taken == set(held), (taken, held)
    assert not any(acquired(addr, p) for p in ports)
