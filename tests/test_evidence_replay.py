"""The evidence example (examples/evidence/: a characterisation, a final configuration of two
applications of different criticality, a fault) bundled, checked and replayed on this machine;
and `xtalk evidence replay` on a planted change and on bad input.

Planted: a bundle whose recorded plans ask four times the victim's work its recorded jobs did
(the results no longer come from the plans claimed): every cell says "not reproduced". Planted
nothing: the example's own bundle, whose every cell is judged with its CI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import XTALK, needs_root, needs_two_cpus, xtalk
from xtalk.outcome import load_outcome, parse_outcome, write_outcome

pytestmark = [needs_root, needs_two_cpus, pytest.mark.slow]
OBJECTIVES = ["MCP_Planning_1", "MCP_Planning_2", "MCP_Resource_Usage_1", "MCP_Resource_Usage_3",
              "MCP_Resource_Usage_4", "MCP_Software_1", "MCP_Error_Handling_1", "MCP_Accomplishment_Summary_1"]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "evidence"
VERDICTS = {"reproduced", "not reproduced", "inconclusive"}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """`examples/evidence/run.sh` as `make evidence` runs it, into a temporary directory."""
    d = tmp_path_factory.mktemp("evidence-example")
    bundle = d / "bundle"
    env = {**os.environ, "XTALK": " ".join(XTALK), "XTALK_EVIDENCE_N_BOOT": "200"}
    r = subprocess.run([str(EXAMPLE / "run.sh"), str(bundle)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {"dir": d, "bundle": bundle, "runs": d / "bundle-runs", "out": r.stdout}


def test_the_example_bundle_covers_every_objective_and_verifies(example, tmp_path):
    bundle = example["bundle"]
    page = (bundle / "index.html").read_text()
    sections = {m.group(1): m.group(2) for m in re.finditer(r'<section id="(MCP_\w+)">(.*?)</section>', page, re.S)}
    assert set(sections) == set(OBJECTIVES)
    for oid, body in sections.items():
        assert "<table" in body or "Not covered:" in body, oid
    # What the example is made to cover, covered: the channel, the applications, the fault.
    for oid in ("MCP_Resource_Usage_3", "MCP_Software_1", "MCP_Error_Handling_1"):
        assert "Not covered:" not in sections[oid], (oid, sections[oid][:400])
    r = xtalk("evidence", "verify", bundle)
    assert r.returncode == 0 and "intact" in r.stdout, r.stdout + r.stderr
    pdf = bundle / "index.pdf"
    if not pdf.exists():
        pytest.skip("no headless Chromium here: the PDF is not printed")
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm is not installed (apt-get install poppler-utils)")
    subprocess.run(["pdftoppm", "-png", "-r", "40", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "p")], check=True)
    from PIL import Image

    img = np.asarray(Image.open(next(tmp_path.glob("p*.png"))).convert("L"))
    assert 0.002 < (img < 128).mean() < 0.5  # text on a white page


def test_replay_of_the_example_judges_every_cell_with_its_ci(example, tmp_path):
    out = tmp_path / "replay"
    r = xtalk("evidence", "replay", example["bundle"], "--out", out, "--json", "--n-boot", 200, timeout=600)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert (r.returncode == 0) == (doc["counts"]["reproduced"] == len(doc["cells"]))
    names = {(c["input"], c["application"], c["scenario"]) for c in doc["cells"]}
    assert any(i.startswith("characterize") and s == "read" for i, _, s in names)
    assert any(a == "control" for _, a, _ in names) and any(a == "housekeeping" for _, a, _ in names)
    for c in doc["cells"]:
        assert c["verdict"] in VERDICTS
        if c["verdict"] != "inconclusive":
            assert c["median"]["low"] <= c["median"]["ratio"] <= c["median"]["high"], c
    # Its results beside the bundle, never in it: the bundle still verifies, the replay reads as results.
    assert xtalk("evidence", "verify", example["bundle"]).returncode == 0
    assert (out / "replay.json").is_file() and (out / "replay.md").is_file()
    replayed = sorted((out / "replayed").iterdir())
    assert len(replayed) == 2 and all(len(list((p / "runs").iterdir())) > 0 for p in replayed)


def _planted(example, d: Path) -> Path:
    """A bundle of the characterisation whose recorded plans ask 4 × the victim's work."""
    src = next((example["runs"] / "characterize").iterdir())
    planted = d / "characterize-planted"
    shutil.copytree(src, planted)
    for run in (planted / "runs").iterdir():
        meta = load_outcome(run).to_dict()
        meta["plan"]["victim"]["body"]["accesses"] *= 4
        write_outcome(run, parse_outcome(meta))
        (run / "plan.json").write_text(json.dumps(meta["plan"]))
    bundle = d / "bundle"
    r = xtalk("evidence", planted, "--out", bundle, "--no-pdf", "--n-boot", 200)
    assert r.returncode == 0, r.stdout + r.stderr
    return bundle


def test_a_planted_change_of_the_victims_work_is_not_reproduced(example, tmp_path):
    bundle = _planted(example, tmp_path)
    r = xtalk("evidence", "replay", bundle, "--out", tmp_path / "replay", "--n-boot", 200, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "replay" / "replay.json").read_text())
    assert doc["cells"] and all(c["verdict"] == "not reproduced" for c in doc["cells"]), doc["cells"]
    assert all(c["median"]["ratio"] > 1.5 for c in doc["cells"])  # 4 × the loads: slower, by far
    assert "not reproduced" in r.stdout


def _reseal(bundle: Path) -> None:
    """The manifest made again over the bundle as it now is, unsigned: a bundle that says what a
    test planted in it (as one made from such results would)."""
    from xtalk.evidence import manifest as mf

    (bundle / mf.SIGNATURE).unlink(missing_ok=True)
    (bundle / mf.SIGNER).unlink(missing_ok=True)
    doc = json.loads((bundle / mf.MANIFEST).read_text())
    doc["files"] = {rel: mf.sha256(p) for rel, p in mf.bundle_files(bundle).items()}
    (bundle / mf.MANIFEST).write_text(json.dumps(doc))


def test_replay_refuses_another_machine_a_declared_setting_it_lacks_and_a_bad_out(example, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(example["bundle"], bundle)
    # A bundle is its manifest: make one whose runs say another CPU, as a bundle from elsewhere would.
    data = next(p for p in (bundle / "data").iterdir() if p.name.startswith("characterize"))
    for run in (data / "runs").iterdir():
        meta = load_outcome(run).to_dict()
        meta["environment"]["cpu"]["model"] = "Another CPU 9000"
        write_outcome(run, parse_outcome(meta))
    _reseal(bundle)
    r = xtalk("evidence", "replay", bundle, "--out", tmp_path / "replay")
    assert r.returncode == 2 and "CPU model" in r.stderr and "Another CPU 9000" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "replay").exists()
    # The same machine, but a setting the experiment declared no longer holds: refused before any run.
    shutil.rmtree(bundle)
    shutil.copytree(example["bundle"], bundle)
    exp = next((bundle / "data").glob("characterize*/experiment.json"))
    doc = json.loads(exp.read_text())
    doc["declared_settings"] = [{"path": "/proc/sys/kernel/sched_rt_period_us", "value": "12345",
                                 "why": "the RT period the budgets were made for"}]
    exp.write_text(json.dumps(doc))
    _reseal(bundle)
    r = xtalk("evidence", "replay", bundle, "--out", tmp_path / "replay")
    assert r.returncode == 2 and "/proc/sys/kernel/sched_rt_period_us" in r.stderr and "'12345'" in r.stderr, r.stderr
    assert not (tmp_path / "replay").exists()
    r = xtalk("evidence", "replay", example["bundle"], "--out", example["bundle"] / "replay")
    assert r.returncode == 2 and "inside the bundle" in r.stderr, r.stderr
    r = xtalk("evidence", "replay", example["bundle"], "--tolerance", "-3%")
    assert r.returncode == 2 and "--tolerance" in r.stderr, r.stderr
