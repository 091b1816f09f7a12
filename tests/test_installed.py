"""Installed with the tool: `pip install .` into a fresh virtual environment gives a user what
docs/observe.md promises without the checkout: the probe header, the preload library, the
pkg-config file and the examples, found through `xtalk probe` / `xtalk examples`; the probe
example compiled with those flags runs under the installed agent with the installed preload
library, and its probes and system calls are read back. One test (the slow part: the wheel is
built once, offline, with the test environment's build backends; the agent's compilation is
the checkout's, already done)."""

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd

from conftest import ROOT
from programs import need_program
from test_probes import command_plan
from xtalk.store.jobs import convert_run


def _sh(*argv, **kw):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)
    assert p.returncode == 0, f"{argv}: {p.stderr[-2000:]}"
    return p.stdout.strip()


def test_pip_install_gives_the_probe_files_and_an_example_builds_and_runs_with_them(tmp_path):
    pkg_config = need_program("pkg-config", "tests/peers.sh installs it (root, apt-get)")
    _sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "wheel", ROOT)
    [wheel] = (tmp_path / "wheel").glob("xtalk-*.whl")
    venv = tmp_path / "venv"
    _sh(sys.executable, "-m", "venv", "--without-pip", venv)  # this environment's pip installs (faster)
    _sh(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "-q", "--no-deps", "--no-index", wheel)
    # Its dependencies (typer, pandas...) from this environment's site-packages, read as a plain
    # path: the checkout's own editable xtalk there is reached only through .pth files, not read.
    site = Path(_sh(venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    xtalk = venv / "bin/xtalk"
    assert _sh(venv / "bin/python", "-c", "import xtalk; print(xtalk.__file__)").startswith(str(site))
    # The build commit is xtalk's (recorded in the wheel), not that of the user's repository the venv sits in.
    git = need_program("git", "apt-get install git")
    ident = ["-c", "user.name=u", "-c", "user.email=u@example.invalid", "-c", "commit.gpgsign=false"]
    _sh(git, "-C", tmp_path, "init", "-q")
    _sh(git, "-C", tmp_path, *ident, "commit", "-q", "--allow-empty", "-m", "the user's work")
    users = _sh(git, "-C", tmp_path, "rev-parse", "--short", "HEAD")
    ours = _sh(git, "-C", ROOT, "rev-parse", "--short", "HEAD")
    recorded = _sh(venv / "bin/python", "-c", "from xtalk.provenance import build_commit; print(build_commit())", cwd=tmp_path)
    assert recorded == ours != users

    cflags, libs = _sh(xtalk, "probe", "--cflags"), _sh(xtalk, "probe", "--libs")
    preload, examples = Path(_sh(xtalk, "probe", "--preload")), Path(_sh(xtalk, "examples"))
    for p in (preload, examples):
        assert p.is_relative_to(site), f"{p}: not the installed copy"
    assert (examples / "quickstart.toml").is_file(), "`calibrate --intrusiveness`'s default victim"
    assert f"-I{site}" in cflags
    pc = _sh(pkg_config, "--cflags", "xtalk-probe", env={**os.environ, "PKG_CONFIG_PATH": _sh(xtalk, "probe", "--pkg-config-path")})
    assert Path(pc.split()[0][2:]).resolve() == Path(cflags.split()[0][2:]).resolve()

    demo = tmp_path / "probe_demo"
    _sh("cc", "-O2", *shlex.split(cflags), examples / "probes" / "probe_demo.c", "-o", demo, *shlex.split(libs))
    (tmp_path / "plan.json").write_text(__import__("json").dumps(command_plan([demo, 20, 1], preload=str(preload))))
    out = tmp_path / "runs" / "r"
    _sh(venv / "bin/xtalk-agent", "run", tmp_path / "plan.json", "--out", out)
    convert_run(out)
    s = pd.read_parquet(out / "probes.parquet")
    counts = s.groupby("probe").size()
    assert counts[1] == 20 and counts[2] == 20, "the example's own probes"
    assert (s.name == "clock_nanosleep").sum() == 20, "the installed preload library's"


def test_the_editable_install_points_at_the_checkout_and_asks_what_to_print():
    xtalk = [sys.executable, "-m", "xtalk.cli"]
    include = Path(_sh(*xtalk, "probe", "--cflags").split()[0][2:])
    assert (include / "xtalk" / "probe.h").resolve() == ROOT / "include" / "xtalk" / "probe.h"
    preload = Path(_sh(*xtalk, "probe", "--preload"))
    assert preload.read_bytes()[:4] == b"\x7fELF" and preload.name == "libxtalk_preload.so"
    assert (Path(_sh(*xtalk, "examples")) / "quickstart.toml").exists()
    p = subprocess.run([*xtalk, "probe"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "--cflags" in p.stderr
