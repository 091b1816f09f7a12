"""A labgrid lab on loopback: a real labgrid-coordinator and labgrid-exporter started here,
three places (each a board's NetworkService, an sshd of its own on 127.0.0.1 that the board's
labgrid ExternalPowerDriver starts at power-on: tests/lab_board.sh), and campaigns over them
with a kernel axis: places acquired, boards powered and booted once per kernel, runs batched
per board, places released at the end; a board that never answers is power-cycled once,
then marked failed with its boot log and the campaign completes on the other board.

What a "board" is here: this machine behind its own sshd (the emulated boards of docs/board.md
need `make board` and minutes of TCG boot: `make lab-test` with an image is the long path).
The kernel a board "boots" is recorded, not booted. Everything labgrid does is labgrid's own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from campaign_util import campaign_dirs, tiny
from conftest import wait_for, xtalk as run_xtalk
from lab_util import acquired, coordinator_and_exporter, free_port
from xtalk.outcome import load_outcome

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
BOARD = Path(__file__).parent / "lab_board.sh"
PLACES = ("board-a", "board-b", "board-dead")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(coordinator address, environment file, lab directory) with the three places made."""
    pytest.importorskip("labgrid", reason="labgrid is not installed: pip install 'xtalk[lab]'")
    if not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("no sshd/ssh/ssh-keygen here (apt-get install openssh-server openssh-client)")
    if os.geteuid() != 0:
        pytest.skip("the boards' sshd log in as root (the agent runs there as root)")
    d = tmp_path_factory.mktemp("lab")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "client"], check=True)
    known, exported = [], {}
    for place in PLACES:
        b = d / place
        b.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", b / "host"], check=True)
        port = free_port()
        known.append(f"[127.0.0.1]:{port} {(b / 'host.pub').read_text()}")
        (b / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {b / 'host'}\nAuthorizedKeysFile {d / 'client.pub'}\n"
            f"PidFile {b / 'sshd.pid'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin yes\nStrictModes no\nUsePAM no\n")
        exported[place] = {"NetworkService": {"address": "127.0.0.1", "username": "root", "port": port}}
    (d / "board-dead" / "dead").touch()
    (d / "known_hosts").write_text("".join(known))
    import yaml

    made_run = not os.path.isdir("/run/sshd")
    if made_run:
        os.makedirs("/run/sshd", mode=0o755)
    try:
        with coordinator_and_exporter(d, exported, dict(os.environ)) as addr:
            targets = {"targets": {p: {
                "resources": {"RemotePlace": {"name": p}},
                "drivers": {"ExternalPowerDriver": {"cmd_on": f"sh {BOARD} on {d / p} KERNEL",
                                                    "cmd_off": f"sh {BOARD} off {d / p}", "delay": 0.2}}} for p in PLACES},
                "options": {"coordinator_address": addr}}
            text = yaml.safe_dump(targets).replace(f"cmd_on: sh {BOARD}", f"cmd_on: !template sh {BOARD}").replace(
                "KERNEL", "$LG_KERNEL")
            (d / "lab.yaml").write_text(text)
            yield addr, d / "lab.yaml", d
    finally:
        for p in PLACES:
            subprocess.run(["sh", BOARD, "off", d / p], capture_output=True)
        if made_run:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def _url(lab, place: str, **extra) -> str:
    addr, env, d = lab
    q = {"env": env, "identity": d / "client", "known_hosts": d / "known_hosts", "cache": d / "cache", **extra}
    return f"labgrid://{place}?" + "&".join(f"{k}={v}" for k, v in q.items())


def _acquired(lab, place: str) -> bool:
    return acquired(lab[0], place)


KERNELS = 'kernels = ["stock", "rt"]\nrepetitions = 3'


@pytest.mark.slow
def test_a_campaign_over_two_boards_with_a_kernel_axis(lab, tmp_path):
    _, _, d = lab
    for p in ("board-a", "board-b"):
        (d / p / "boots").unlink(missing_ok=True)
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": KERNELS})
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--target", _url(lab, "board-a"),
                    "--target", _url(lab, "board-b"), "--skip-feasibility", timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (store,) = campaign_dirs(tmp_path / "res")
    runs = [load_outcome(r) for r in sorted((store / "runs").iterdir())]
    assert len(runs) == 12 and all(r.status == "completed" for r in runs)
    seen = {(r.labels()["board"], r.labels()["kernel"]) for r in runs}
    assert {b for b, _ in seen} == {"board-a", "board-b"} and {k for _, k in seen} == {"stock", "rt"}, out.stdout
    boots = {p: (d / p / "boots").read_text().split() for p in ("board-a", "board-b")}
    # batched: a board boots each kernel once at most (the first, for the checks before the
    # runs, maybe without running it: the other board may have taken all of its runs)
    for p, b in boots.items():
        ran = {k for bb, k in seen if bb == p}
        assert b[0] == "stock" and ran <= set(b) and len(b) == len(set(b)), (p, b)
    assert not _acquired(lab, "board-a") and not _acquired(lab, "board-b")
    assert (d / "board-a" / "power").read_text().split()[-1] == "off"
    # the journal's lines of each place: acquired, each boot's kernel as the board saw it, released
    lab_lines = [e for e in map(json.loads, (store / "journal.jsonl").read_text().splitlines()) if "lab" in e]
    for p in ("board-a", "board-b"):
        mine = [e for e in lab_lines if e["board"] == p]
        assert [e["lab"] for e in mine][0] == "acquired" and mine[-1]["lab"] == "released", mine
        assert [e["kernel"] for e in mine if e["lab"] == "booted"] == boots[p], (mine, boots[p])
    summary = (store / "summary.md").read_text()
    assert "## Boards and kernels" in summary


@pytest.mark.slow
def test_a_board_that_never_answers_is_cycled_once_then_out_and_the_campaign_completes(lab, tmp_path):
    _, _, d = lab
    (d / "board-dead" / "boots").unlink(missing_ok=True)
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": 'kernels = ["stock"]\nrepetitions = 2'})
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--target", _url(lab, "board-dead", boot_timeout=3),
                    "--target", _url(lab, "board-a"), "--skip-feasibility", timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (store,) = campaign_dirs(tmp_path / "res")
    runs = [load_outcome(r) for r in sorted((store / "runs").iterdir())]
    assert len(runs) == 4 and {r.labels()["board"] for r in runs} == {"board-a"}
    # powered on for the checks before the runs, cycled once, then out: no third boot
    assert (d / "board-dead" / "boots").read_text().split() == ["stock", "stock"]
    log = (store / "boards" / "board-dead-boot.log").read_text()
    assert "2 boot attempts" in log and log.count("Connection refused") == 2
    assert "board-dead: did not boot" in out.stdout
    assert not _acquired(lab, "board-dead") and not _acquired(lab, "board-a")


def test_a_bad_labgrid_url_is_one_line_and_exit_2(lab, tmp_path):
    f = tiny(tmp_path)
    for url, said in (("labgrid://", "write labgrid://PLACE"), ("labgrid://board-a", "give env=FILE"),
                      ("labgrid://board-a?env=/nonexistent", "is not a file"),
                      (_url(lab, "board-a", colour="red"), "unknown option 'colour'"),
                      (_url(lab, "-board-a"), "write labgrid://PLACE"),
                      (_url(lab, "board-a", boot_timeout=0), "boot_timeout must be")):
        out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--target", url)
        assert out.returncode == 2 and said in out.stderr + out.stdout, (url, out.stderr)
    # a Dask worker would never release a place: refused before anything starts
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--target", _url(lab, "board-a"),
                    "--cluster", "local:1")
    assert out.returncode == 2 and "--target labgrid://board-a: a lab board is driven by the campaign's own executor" \
        in out.stderr + out.stdout, out.stderr
    assert not _acquired(lab, "board-a")
    assert campaign_dirs(tmp_path / "res") == []


@pytest.mark.slow
def test_killing_the_campaign_host_then_resuming_takes_the_places_over_and_loses_no_run(lab, tmp_path):
    """SIGKILL to the whole campaign process group mid-way: the places stay acquired by this
    host (nothing could release them); `campaign resume` takes them over, finishes, and every
    run is done exactly once.

    The campaign declares a setting that board-b does not hold (its sshd, so every session on
    it, planted with another oom_score_adj: a per-board setting of this one machine): exactly
    board-b's runs are marked invalid with the difference, in both hosts' lives (the resume
    declares them again from campaign.json), and the campaign goes on."""
    own = Path("/proc/self/oom_score_adj").read_text().strip()
    (tmp_path / "held.toml").write_text(f'[settings."/proc/self/oom_score_adj"]\nvalue = "{own}"\n'
                                        'why = "the pool\'s boards are set alike"\n')
    plant = lab[2] / "board-b" / "oom_score_adj"
    planted = str(int(own) + 300 if int(own) <= 700 else int(own) - 300)
    plant.write_text(planted)
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": 'settings = "held.toml"\n' + KERNELS})
    targets = ["--target", _url(lab, "board-a"), "--target", _url(lab, "board-b")]
    from conftest import XTALK

    try:
        proc = subprocess.Popen([*XTALK, "campaign", "run", f, "--results", tmp_path / "res", *targets,
                                 "--skip-feasibility"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            def some_done():
                dirs = campaign_dirs(tmp_path / "res")
                j = dirs[0] / "journal.jsonl" if dirs else None
                return j is not None and j.exists() and j.read_text().count('"state":"done"') >= 3
            assert wait_for(some_done, timeout=300, step=0.2)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        held = [p for p in ("board-a", "board-b") if _acquired(lab, p)]
        assert held
        (store,) = campaign_dirs(tmp_path / "res")
        killed = len((store / "journal.jsonl").read_text().splitlines())
        out = run_xtalk("campaign", "resume", store, *targets, "--skip-feasibility", timeout=600)
    finally:
        plant.unlink()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "taken over" in out.stdout
    done = [json.loads(x)["run"] for x in (store / "journal.jsonl").read_text().splitlines()
            if json.loads(x).get("state") == "done"]
    assert len(done) == 12 and len(set(done)) == 12  # none lost, none repeated
    assert len([r for r in (store / "runs").iterdir()]) == 12
    assert not _acquired(lab, "board-a") and not _acquired(lab, "board-b")
    # the journal shows the places the first host acquired, and what the resume took over
    events = [json.loads(x) for x in (store / "journal.jsonl").read_text().splitlines()]
    before = [(e["board"], e["lab"]) for e in events[:killed] if "lab" in e]
    after = [(e["board"], e["lab"]) for e in events[killed:] if "lab" in e]
    assert {b for b, what in before if what == "acquired"} == set(held), before
    assert {b for b, what in after if what == "taken over"} == set(held), after
    assert {b for b, what in after if what == "released"} == {"board-a", "board-b"}, after
    # exactly board-b's runs marked, each with the difference; board-a's not
    runs = {r.name: load_outcome(r) for r in (store / "runs").iterdir()}
    on = {b: {n for n, r in runs.items() if r.labels()["board"] == b} for b in ("board-a", "board-b")}
    assert on["board-a"] and on["board-b"], on
    for n in on["board-b"]:
        assert runs[n].invalid.startswith("board board-b's settings differ from the campaign's declared ones: "
                                          f"settings: /proc/self/oom_score_adj is '{planted}', the settings file "
                                          f"requires '{own}'"), runs[n].invalid
        assert any(x.startswith("board board-b: settings: /proc/self/oom_score_adj") for x in runs[n].notes)
    assert all(runs[n].invalid is None for n in on["board-a"]), [runs[n].invalid for n in on["board-a"]]
    # each boot's settings kept beside the board's console; the summary names the runs left out
    boots = {b: [json.loads(x) for x in (store / "boards" / f"{b}-settings.jsonl").read_text().splitlines()]
             for b in ("board-a", "board-b")}
    assert boots["board-b"] and all(x["differ"] and x["settings"]["/proc/self/oom_score_adj"] == planted
                                    for x in boots["board-b"]), boots["board-b"]
    assert boots["board-a"] and all(x["differ"] == [] for x in boots["board-a"]), boots["board-a"]
    assert "lab: board-b: settings differ from the declared ones" in out.stdout
    assert "lab: board-a: settings differ" not in out.stdout
    left = (store / "summary.md").read_text().split("## Runs left out")[1]
    assert all(f"`{n}`" in left for n in on["board-b"]) and not any(f"`{n}`" in left for n in on["board-a"])
    warned = [w for w in json.loads((store / "verdicts.json").read_text())["warnings"] if w["kind"] == "runs_left_out"]
    assert sorted(w["line"].split()[1] for w in warned) == sorted(on["board-b"]), warned


@pytest.mark.slow
def test_sigterm_mid_campaign_releases_the_places(lab, tmp_path):
    f = tiny(tmp_path, jobs=20, **{"repetitions = 3": KERNELS})
    from conftest import XTALK

    proc = subprocess.Popen([*XTALK, "campaign", "run", f, "--results", tmp_path / "res", "--target", _url(lab, "board-a"),
                             "--skip-feasibility"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def one_done():
            dirs = campaign_dirs(tmp_path / "res")
            j = dirs[0] / "journal.jsonl" if dirs else None
            return j is not None and j.exists() and '"state":"done"' in j.read_text()
        assert wait_for(one_done, timeout=300, step=0.2)
        assert _acquired(lab, "board-a")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-2000:]
    assert not _acquired(lab, "board-a")
    assert (lab[2] / "board-a" / "power").read_text().split()[-1] == "off"
