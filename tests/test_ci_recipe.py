"""docs/ci.md's recipe, run: examples/ci/xtalk-ci.sh on the smoke experiment twice, first
without a baseline (the ε check alone; a passing run promoted to baseline), then against it
(regression checks per cell and statistic). Bounds loose enough that a working machine passes:
the test checks the recipe's plumbing (runs, gate, JUnit, promotion), not this machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import needs_root

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "ci" / "xtalk-ci.sh"


def _job(tmp_path: Path, out: str, baseline: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, XTALK=str(Path(sys.executable).parent / "xtalk"), XTALK_EPSILON="response:p99:1000x",
               XTALK_MAX_REGRESSION="1000%", XTALK_PROMOTE="1")
    return subprocess.run([str(SCRIPT), str(ROOT / "examples" / "ci" / "smoke.toml"), str(tmp_path / out), str(baseline)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)


@pytest.mark.slow  # two experiments, their summaries, gates and reports: make test-slow
@needs_root
def test_the_recipe_gates_then_promotes_then_gates_against_the_baseline(tmp_path, needs_fifo):
    baseline = tmp_path / "baseline" / "smoke"
    baseline.parent.mkdir()
    first = _job(tmp_path, "first", baseline)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    suite = ET.parse(tmp_path / "first" / "gate.xml").getroot()
    assert {c.get("name") for c in suite.iter("testcase")} == {"epsilon response p99 ≤ 1000× solo"}
    assert (baseline / "runs").is_dir() and "baseline: " in first.stdout
    second = _job(tmp_path, "second", baseline)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    names = [c.get("name") for c in ET.parse(tmp_path / "second" / "gate.xml").getroot().iter("testcase")]
    assert names.count("regression median ≤ +1000 %") == 2 and names.count("regression p99 ≤ +1000 %") == 2, names
    assert (tmp_path / "second" / "compare.json").stat().st_size > 0
    assert re.search(r"gate: passed: \d+ passed, 0 failed", second.stdout), second.stdout[-2000:]


def test_the_workflows_in_the_doc_call_the_script_that_exists():
    doc = (ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    assert len(blocks) == 2
    for block in blocks:
        assert "examples/ci/xtalk-ci.sh examples/ci/smoke.toml out" in block
    assert SCRIPT.is_file() and os.access(SCRIPT, os.X_OK)
