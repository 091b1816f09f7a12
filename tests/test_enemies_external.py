"""External enemies: a command in its own process group, stopped with the run (nothing
survives), its declared count read from its output, an early exit recorded in run.json."""

import json
import subprocess
from pathlib import Path

from conftest import TOKEN, processes_named, small_plan, write_plan


def run(agent, tmp_path, enemies, jobs=50):
    out = tmp_path / "run"
    p = subprocess.run([agent, "run", write_plan(tmp_path, small_plan(jobs=jobs, enemies=enemies)), "--out", out],
                       capture_output=True, text=True, timeout=60)
    return p, json.loads((out / "run.json").read_text())


def ours_running(word: str) -> list[int]:
    """Live processes started by this test session whose command line holds `word`."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if TOKEN.encode() in (d / "environ").read_bytes() and word.encode() in (d / "cmdline").read_bytes():
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(d.name))
        except OSError:
            continue
    return pids


def test_an_early_exit_is_noted(agent, tmp_path):
    ext = {"name": "quick", "load": {"kind": "external", "argv": ["sh", "-c", "echo bye; exit 3"]}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0 and meta["status"] == "completed", meta
    (note,) = meta["notes"]
    assert note.startswith("enemy quick ended before it was stopped")
    assert "external command 'sh' exited with status 3" in note and "last output: bye" in note
    assert "exited with status 3" in meta["enemies"][0]["ended_early"]
    assert meta["enemies"][0]["setup_error"] is None


def test_the_whole_group_is_stopped(agent, tmp_path):
    """The command's own children die with it: SIGTERM, then SIGKILL, to the process group.
    SIGTERM is ignored here (an ignored disposition is inherited by the children), so only
    the group-wide SIGKILL after the grace period ends the background sleep."""
    ext = {"name": "stubborn", "load": {"kind": "external", "argv": ["sh", "-c", "trap '' TERM; sleep 987 & sleep 988; wait"]}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0 and not meta["notes"], meta
    assert meta["enemies"][0]["ended_early"] is None
    assert not ours_running("sleep 98"), "a process of the external command survived the run"
    assert not processes_named()


def test_declared_count_is_read_from_the_output(agent, tmp_path):
    ext = {"name": "w", "load": {"kind": "external", "argv": ["sh", "-c", "echo 'done 1,234 widgets'; trap 'echo \"done 12,345 widgets\"; exit 0' TERM; while :; do sleep 0.01; done"],
                                 "rate_regex": r"done ([0-9,]+) widgets", "unit": "widgets"}}
    p, meta = run(agent, tmp_path, [ext])
    assert p.returncode == 0, meta
    (e,) = meta["enemies"]
    assert e["unit"] == "widgets"
    assert e["ops"] == 12345, "the last match counts: the total printed when the command stopped"
    assert abs(e["rate"] - 12345 / e["seconds"]) < 1e-6 * e["rate"]


def test_xtalk_run_says_so(tmp_path):
    from conftest import xtalk

    f = tmp_path / "exp.toml"
    f.write_text("""
name = "early"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 30
[[scenario]]
name = "ext"
enemies = [{ kind = "external", argv = ["true"] }]
""")
    out = xtalk("run", f, "--results", tmp_path / "res")
    assert out.returncode == 0, out.stderr
    assert "enemy external ended before it was stopped" in out.stdout
    assert "external command 'true' exited with status 0" in out.stdout
