"""Results paths as root (issue 31, item 1): every command that writes under a results
directory (run, campaign run, report, query, summary, compare, latency, overheads, worst,
characterize, sched analyze) refuses a directory someone else owns or could change, in one
line and exit 2, and never writes through a link planted in it.

Two attacks per command, on one tiny real results directory made once (a 20-job `xtalk run`):

- root runs the command on (or into) a directory another user owns, or through that user's
  link, or in a directory others can write: refused before anything is written;
- the user ran `sudo xtalk ...` on their own results directory ($SUDO_UID: trusted by the
  rule) after planting links at the names xtalk writes (summary.md, report/, the temporary
  of a job log's conversion...) towards a root-only directory: root replaces the links or
  refuses, and never writes through them.

In both, the root-only decoy (a 0700 directory holding a 0600 file) is untouched. The user is
a throwaway one made with useradd (as tests/test_security_host.py does); owning a file or a
link is all an attack here needs, so the planting is done with chown/lchown.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import XTALK, xtalk
from campaign_util import tiny as tiny_campaign
from test_security_host import clean_env, needs_root, tiny_experiment, user  # noqa: F401 (the fixture)

pytestmark = needs_root
PRECIOUS = "root's own, 0600"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One tiny real results directory (20 jobs, solo), copied by each test."""
    base = tmp_path_factory.mktemp("made")
    exp = tiny_experiment(base, jobs=20)
    r = xtalk("run", exp, "--results", base / "res", "--skip-feasibility", env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    [d] = (base / "res").iterdir()
    assert list(d.glob("runs/*/jobs.bin")), "a job log to convert"
    return d


@pytest.fixture
def decoy(tmp_path) -> Path:
    """A root-only directory holding a root-only file: what an attack aims at."""
    d = tmp_path / "root-only"
    d.mkdir(mode=0o700)
    f = d / "secret"
    f.write_text(PRECIOUS)
    f.chmod(0o600)
    return d


def untouched(decoy: Path) -> None:
    assert sorted(os.listdir(decoy)) == ["secret"], f"root wrote into {decoy}: {os.listdir(decoy)}"
    assert (decoy / "secret").read_text() == PRECIOUS
    st = os.stat(decoy / "secret")
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 0)


def give(path: Path, uid: int, gid: int) -> Path:
    """Hand `path` and all below it to the user (links themselves, not their targets)."""
    for p in [path, *path.rglob("*")]:
        os.lchown(p, uid, gid)
    return path


def their_dir(path: Path, uid: int, gid: int) -> Path:
    path.mkdir()
    os.chown(path, uid, gid)
    return path


def their_link(link: Path, target: Path, uid: int, gid: int) -> Path:
    """A link of the user's at `link` (in place of what was there)."""
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    os.lchown(link, uid, gid)
    return link


def copy(made: Path, where: Path) -> Path:
    shutil.copytree(made, where, symlinks=True)
    return where


def stale(results: Path, decoy: Path, uid: int, gid: int) -> None:
    """Make every run's job log need converting again, with the old fixed temporary name
    of the conversion planted as a link to the decoy."""
    for run in results.glob("runs/*"):
        (run / "jobs.parquet").unlink(missing_ok=True)
        their_link(run / "jobs.parquet.tmp", decoy / "secret", uid, gid)


def listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


TASKS = '[[task]]\nname = "victim"\nperiod = 10\nmeasured = "solo"\n'
VICTIM = 'body = "sum", bytes = "64KiB", period = "2ms", jobs = 20, cpus = "last"'


def each(commands, **kw) -> list:
    """[(args, result)] of `xtalk ARGS` for each of `commands`, side by side: every command is
    still its own process, checked on its own; they start (the interpreter, the imports) on
    all the CPUs at once instead of one after another."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(zip(commands, pool.map(lambda args: xtalk(*args, **kw), commands)))


def refused(r, *needles: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err


@pytest.mark.slow  # a command line per command attacked: make test-slow
def test_results_directories_of_another_user_are_refused(made, tmp_path, decoy, user):
    """Reading commands convert job logs and write tables in the directory: one the user owns
    is refused, and nothing is written in it."""
    name, uid, gid = user
    theirs = give(copy(made, tmp_path / "theirs"), uid, gid)
    stale(theirs, decoy, uid, gid)
    before = listing(theirs)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(TASKS)
    mine = copy(made, tmp_path / "mine")
    for args, r in each([["summary", theirs], ["report", theirs], ["query", theirs, "SELECT count(*) FROM jobs"],
                         ["compare", mine, theirs, "--out", tmp_path / "cmp"], ["latency", theirs], ["overheads", theirs],
                         ["tasks", theirs], ["sched", "analyze", tasks, "--wcet-from", f"{theirs}:solo"],
                         ["evidence", theirs, "--out", tmp_path / "ev"]], env=clean_env(), cwd=tmp_path):
        refused(r, f"owned by uid {uid} ({name})", "as root", "chown root")
    assert listing(theirs) == before
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "ev").exists()
    untouched(decoy)


def test_output_directories_of_another_user_are_refused_before_anything_runs(made, tmp_path, decoy, user):
    name, uid, gid = user
    theirs = their_dir(tmp_path / "theirs", uid, gid)
    exp = tiny_experiment(tmp_path, jobs=20)
    camp = tiny_campaign(tmp_path)
    mine = copy(made, tmp_path / "mine")
    before = listing(mine)
    for args, r in each([["run", exp, "--results", theirs], ["run", exp, "--results", theirs / "new" / "deeper"],
                         ["campaign", "run", camp, "--results", theirs],
                         ["report", mine, "--out", theirs / "rep"], ["compare", mine, mine, "--out", theirs],
                         ["evidence", mine, "--out", theirs / "ev"], ["evidence", "replay", mine, "--out", theirs / "rp"],
                         ["worst", "--victim", VICTIM, "--budget", "5m", "--out", theirs / "w"],
                         ["characterize", "--quick", "--results", theirs]], env=clean_env(), cwd=tmp_path):
        refused(r, f"owned by uid {uid} ({name})", "as root")
    assert os.listdir(theirs) == []
    assert listing(mine) == before
    untouched(decoy)


def test_links_of_another_user_and_open_directories_are_refused(made, tmp_path, decoy, user):
    """A results path through the user's link, or in a directory anyone may change."""
    name, uid, gid = user
    link = their_link(tmp_path / "link", decoy, uid, gid)
    exp = tiny_experiment(tmp_path, jobs=20)
    mine = copy(made, tmp_path / "mine")
    for args in (["run", exp, "--results", link], ["report", mine, "--out", link / "rep"],
                 ["compare", mine, mine, "--out", link]):
        refused(xtalk(*args, env=clean_env(), cwd=tmp_path), f"{link}: a symbolic link owned by uid {uid}")
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)  # not sticky: anyone may rename what root makes there
    r = xtalk("run", exp, "--results", tmp_path / "open" / "r", env=clean_env(), cwd=tmp_path)
    refused(r, "writable by group or others (mode 0777)", "chmod go-w")
    assert os.listdir(tmp_path / "open") == []
    untouched(decoy)


@pytest.fixture
def planted(made, tmp_path, decoy, user):
    """The user's own results directory (they ran `sudo xtalk`: $SUDO_UID trusts it) with links
    to the decoy at the names xtalk writes; the environment of that sudo."""
    name, uid, gid = user
    theirs = give(copy(made, tmp_path / "theirs"), uid, gid)
    stale(theirs, decoy, uid, gid)
    for f in ("summary.md", "summary.json", "latency.md", "latency-histogram.csv", "overheads.csv", "tasks.json"):
        their_link(theirs / f, decoy / "secret", uid, gid)
    their_link(theirs / "report", decoy, uid, gid)
    return theirs, clean_env(SUDO_UID=uid)


@pytest.mark.slow  # a command line per command attacked: make test-slow
def test_sudo_users_links_in_their_results_are_replaced_or_refused_never_followed(planted, tmp_path, decoy):
    theirs, env = planted
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(TASKS)
    r = xtalk("query", theirs, "SELECT count(*) AS n FROM jobs WHERE NOT warmup", env=env)
    assert r.returncode == 0 and r.stdout.split()[-1] == "20", r.stdout + r.stderr  # converted again, beside the link
    assert all(not p.is_symlink() for p in theirs.glob("runs/*/jobs.parquet"))
    r = xtalk("summary", theirs, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (theirs / "summary.md").is_symlink() and "solo" in (theirs / "summary.md").read_text()
    r = xtalk("report", theirs, "--no-csv", env=env)
    refused(r, f"{theirs / 'report'} is a symbolic link", "never writes results through one")
    for cmd in (["latency", theirs], ["overheads", theirs], ["tasks", theirs],
                ["sched", "analyze", tasks, "--wcet-from", f"{theirs}:solo"]):
        r = xtalk(*cmd, env=env)
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr, r.stdout + r.stderr
    untouched(decoy)
    assert (theirs / "runs").is_dir() and not any(p.is_symlink() for p in theirs.glob("runs/*/jobs.parquet"))


@pytest.mark.slow  # a command line per command attacked: make test-slow
def test_sudo_users_output_directory_with_planted_names(made, tmp_path, decoy, user):
    """compare --out and report --out into the user's own directory, the file names planted."""
    name, uid, gid = user
    out = their_dir(tmp_path / "out", uid, gid)
    for f in ("compare.md", "compare.csv", "compare.html", "p99.png", "index.html"):
        their_link(out / f, decoy / "secret", uid, gid)
    mine = copy(made, tmp_path / "mine")
    again = copy(made, tmp_path / "again")  # the same directory twice is refused (compare)
    env = clean_env(SUDO_UID=uid)
    r = xtalk("compare", mine, again, "--label", "a", "--label", "b", "--out", out, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (out / "compare.md").is_symlink() and "a" in (out / "compare.md").read_text()
    r = xtalk("report", mine, "--no-csv", "--out", out, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (out / "index.html").is_symlink()
    untouched(decoy)


def test_a_run_directory_swapped_for_a_link_mid_run_is_not_written_through(tmp_path, decoy, user):
    """`sudo xtalk run --results R` on the user's own R: once root has made its run directory
    there, the user renames it away and puts a link to a root-only directory in its place.
    Root's later writes (run directories, the agent's files, summary) never go through it."""
    name, uid, gid = user
    rb = their_dir(tmp_path / "rb", uid, gid)
    exp = tiny_experiment(tmp_path, jobs=300)
    p = subprocess.Popen([*XTALK, "run", str(exp), "--results", str(rb), "--skip-feasibility"], env=clean_env(SUDO_UID=uid),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(rb.glob("tiny-*/experiment.json")):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.002)
        [made_dir] = rb.glob("tiny-*")
        os.rename(made_dir, rb / "moved")  # theirs to do: R is their directory
        their_link(made_dir, decoy, uid, gid)
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "Traceback" not in err, err
    untouched(decoy)


def test_single_file_outputs_of_another_user_are_refused_before_anything_runs(made, tmp_path, decoy, user):
    """`--junit FILE`, `--out FILE`, `--csv FILE`...: a file to write in a directory the user
    owns, or at the user's link to a root-only file, is refused in one line (exit 2) before
    the command runs, and nothing is written anywhere."""
    name, uid, gid = user
    theirs = their_dir(tmp_path / "theirs", uid, gid)
    mine = copy(made, tmp_path / "mine")
    [run] = sorted(mine.glob("runs/*"))[:1]
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[[task]]\nname = "a"\nwcet = 1\nperiod = 10\n')
    before = listing(mine)

    def commands(out: Path):
        return (["gate", mine, "--junit", out], ["sysinfo", "--record", out], ["perfetto", run, "-o", out],
                ["sched", "generate", "--seed", "1", "-o", out], ["sched", "simulate", tasks, "--csv", out],
                ["sched", "simulate", tasks, "--gantt", out], ["model", "uppaal", tmp_path / "none.toml", "-o", out],
                ["sched", "reserve", "--budget", "1", "--period", "10", "--record", out, "--", "true"])

    for args, r in each(commands(theirs / "out"), env=clean_env(), cwd=tmp_path):
        refused(r, f"owned by uid {uid} ({name})", "as root")
    assert os.listdir(theirs) == []
    link = their_link(tmp_path / "out", decoy / "secret", uid, gid)
    for args, r in each(commands(link), env=clean_env(), cwd=tmp_path):
        refused(r, f"{link}: a symbolic link owned by uid {uid}")
    assert link.is_symlink()
    assert listing(mine) == before
    untouched(decoy)
