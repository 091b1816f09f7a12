"""`xtalk run` exit codes tell automation the truth (issue 13, item 15): 0 every run
completed, 4 some did not, 5 none did; a results disk that fills up ends with the summary,
one line saying so, and 4 or 5, never a traceback."""

import json
import os
import shutil
import subprocess

import pytest

from command_experiment import command_experiment
from conftest import is_root, xtalk



def run(tmp_path, argv: list[str], reps: int = 1, results=None):
    f = command_experiment(tmp_path / "exp.toml", "codes", argv, reps)
    return xtalk("run", f, "--results", results or tmp_path / "res", timeout=120)


def statuses(tmp_path) -> list[str]:
    return sorted(json.loads(p.read_text())["status"] for p in (tmp_path / "res").glob("*/runs/*/run.json"))


def test_every_run_completed_is_0(tmp_path):
    out = run(tmp_path, ["true"])
    assert out.returncode == 0, out.stderr + out.stdout
    assert statuses(tmp_path) == ["completed"]


def test_every_run_timed_out_is_5(tmp_path):
    out = run(tmp_path, ["sleep", "5"], reps=2)
    assert out.returncode == 5, out.stderr + out.stdout
    assert statuses(tmp_path) == ["timeout", "timeout"]
    assert "Traceback" not in out.stderr


def test_some_runs_failed_is_4(tmp_path):
    flag = tmp_path / "second"
    out = run(tmp_path, ["sh", "-c", f"test -e {flag} && sleep 5; touch {flag}"], reps=2)
    assert out.returncode == 4, out.stderr + out.stdout
    assert statuses(tmp_path) == ["completed", "timeout"]
    # The timed-out run keeps what explains it, as a campaign's does (campaign/postmortem.py).
    why = [json.loads(p.read_text()) for p in (tmp_path / "res").glob("*/runs/*/postmortem/why.json")]
    assert [w["status"] for w in why] == ["timeout"], why
    assert "post-mortem in runs/" in " ".join(out.stdout.split())


def test_bad_input_is_still_2(tmp_path):
    out = run(tmp_path, [])
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.skipif(not is_root(), reason="needs root (mounts a small tmpfs as the results disk)")
def test_a_results_disk_that_fills_up(tmp_path):
    # Few inodes: the pre-flight size check passes, then the files of the first runs use
    # them up; the rest of the experiment is not started and the summary is still printed.
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m,nr_inodes=24", "tmpfs", str(mnt)], check=True)
    try:
        out = run(tmp_path, ["true"], reps=6, results=mnt)
        text = out.stdout + out.stderr
        assert out.returncode in (4, 5), text
        assert "Traceback" not in text
        assert "cannot be written" in text and "Free space and run again" in text, text
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert not os.path.ismount(mnt)


@pytest.mark.skipif(not is_root(), reason="needs root (mounts a small tmpfs as the results disk)")
def test_a_results_disk_too_small_is_refused_before_the_first_run(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        out = run(tmp_path, ["true"], reps=4, results=mnt)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, out.stderr + out.stdout
        assert len(lines) == 1 and lines[0].startswith("xtalk: results: the runs need about"), out.stderr
        assert os.listdir(mnt) == [], "nothing may be created"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    shutil.rmtree(mnt, ignore_errors=True)
