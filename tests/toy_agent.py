"""An agent built from a copy of the sources with one file and one registry line added: the
toy enemy's and the toy body's tests (adding either is one file and one line)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT


def build_with(tmp: Path, folder: str, name: str, source: str, registry_line: str, entry: str) -> tuple[Path, Path]:
    """(agent binary, catalog file) of the agent whose `src/<folder>/<name>.rs` is `source`,
    registered by `entry` after `registry_line` of `src/<folder>/mod.rs`. The dependencies'
    release builds are copied, so only the agent crate compiles (at opt-level 0: a fixture,
    not a measurement; about half the time opt-level 1 takes)."""
    if not shutil.which("cargo"):
        pytest.skip("cargo is not installed")
    src = tmp / "agent"
    shutil.copytree(ROOT / "agent", src, ignore=shutil.ignore_patterns("target"))
    (src / "src" / folder / f"{name}.rs").write_text(source)
    mod = src / "src" / folder / "mod.rs"
    text = mod.read_text()
    assert text.count(registry_line) == 1, f"{mod}: the registry line moved: {registry_line!r}"
    mod.write_text(text.replace(registry_line, registry_line + f"    {entry}\n"))
    target = tmp / "target"
    if (ROOT / "agent" / "target" / "release").is_dir():
        shutil.copytree(ROOT / "agent" / "target" / "release", target / "release", symlinks=True,
                        ignore=shutil.ignore_patterns("xtalk-agent", "xtalk_agent-*", "incremental"))
    t0 = time.monotonic()
    out = subprocess.run(["cargo", "build", "--release", "--offline", "--manifest-path", src / "Cargo.toml",
                          "--config", 'profile.release.package.xtalk-agent.opt-level=0'],
                         capture_output=True, text=True, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    assert out.returncode == 0, out.stderr[-3000:]
    print(f"toy agent built in {time.monotonic() - t0:.0f} s")
    binary = target / "release" / "xtalk-agent"
    cat = tmp / "catalog.json"
    cat.write_text(subprocess.run([binary, "catalog", "--json"], capture_output=True, text=True, check=True).stdout)
    return binary, cat


def env_of(toy_agent) -> dict:
    """The environment that points the host at the toy agent and its catalog."""
    binary, cat = toy_agent
    return {**os.environ, "XTALK_AGENT": str(binary), "XTALK_CATALOG": str(cat)}
