"""The build commit a result records is xtalk's, never the caller's (provenance.py): a package
installed inside a user's git repository reports the commit its wheel recorded, or "unknown",
never the repository's; a source tree is asked only when it is xtalk's own checkout. Pure:
git in temporary repositories (the wheel itself: tests/test_installed.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from programs import need_program


@pytest.fixture(autouse=True)
def _git():
    global git
    git = need_program("git", "apt-get install git")


def _repo(path: Path, files: dict[str, str]) -> str:
    """A git repository at ``path`` with ``files`` committed; its short commit."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = ["-c", "user.name=u", "-c", "user.email=u@example.invalid", "-c", "commit.gpgsign=false"]
    for argv in (["init", "-q"], ["add", "-A"], [*env, "commit", "-q", "-m", "user's work"]):
        subprocess.run([git, "-C", str(path), *argv], check=True, capture_output=True)
    return subprocess.run([git, "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _installed(site: Path, build_info: str | None) -> str:
    """build_commit() of a copy of the package laid out as pip installs it under ``site``."""
    pkg = site / "xtalk"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "src" / "xtalk" / "provenance.py", pkg / "provenance.py")
    if build_info is not None:
        (pkg / "_build_info.py").write_text(f"COMMIT = {build_info!r}\n")
    out = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "from xtalk.provenance import build_commit; print(build_commit())", str(site)],
                         cwd=site, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_an_install_inside_a_user_repository_never_reports_its_commit(tmp_path):
    users = _repo(tmp_path / "user", {"README": "mine\n", "pyproject.toml": '[project]\nname = "theirs"\n'})
    site = tmp_path / "user" / ".venv" / "lib" / "site-packages"
    assert _installed(site / "a", "1234abc") == "1234abc"  # the wheel's record wins
    got = _installed(site / "b", None)  # no record: nothing to ask but the user's repository, so unknown
    assert got == "unknown" and got != users


def test_a_source_tree_is_asked_only_when_it_is_xtalk_s_own_checkout(tmp_path):
    from xtalk.provenance import source_commit

    here = subprocess.run([git, "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert source_commit(ROOT) == here
    theirs = tmp_path / "theirs"
    _repo(theirs, {"pyproject.toml": '[project]\nname = "theirs"\n'})
    assert source_commit(theirs) is None  # a git checkout, but not xtalk's
    # xtalk's unpacked sdist inside the user's repository: git would answer with the user's commit.
    (theirs / "xtalk-0.1.0").mkdir()
    (theirs / "xtalk-0.1.0" / "pyproject.toml").write_text('[project]\nname = "xtalk"\n')
    assert source_commit(theirs / "xtalk-0.1.0") is None
