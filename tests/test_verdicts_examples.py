"""Every example in examples/*.toml, run scaled down (one repetition, at most 20 jobs a run,
10 ms settles, 300 ms windows), writes a verdicts.json that validates against the shipped
schema (report/verdicts.py) and whose ε verdicts and warnings are the ones `xtalk summary`
states. An example that cannot run on this machine is skipped by name with its reason (a
program it needs is missing, a policy or the kernel trace is refused); the campaign
examples that tests/test_campaign_examples.py runs scaled down are validated there, said
here by name. own-app-attach.toml watches a process the reader starts: the test starts
build/periodic-plain as its comment says and gives its PID."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib

import jsonschema
import pytest

import capabilities
from campaign_util import campaign_dirs
from conftest import ROOT, processes_named, xtalk
from xtalk.campaign.schema import is_campaign_file
from xtalk.report.verdicts import schema

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.toml"))
#: Validated by tests/test_campaign_examples.py (each run scaled down, its verdicts.json validated).
ELSEWHERE = {"beck-two-way.toml", "bessad-contention.toml", "metrics-footprint.toml"}
JOBS = 20


def scaled(text: str) -> str:
    """The example made small: one repetition, at most JOBS jobs a run, short settles and windows."""
    text = re.sub(r"(?m)^repetitions = \d+", "repetitions = 1", text)
    text = re.sub(r"(?m)^(\s*)jobs = (\d+)", lambda m: f"{m[1]}jobs = {min(int(m[2]), JOBS)}", text)
    text = re.sub(r'(?m)^settle = "[^"]*"', 'settle = "10ms"', text)
    return re.sub(r'(?m)^duration = "[^"]*"', 'duration = "300ms"', text)


def _why_not(name: str, doc: dict) -> str | None:
    """Why this machine cannot run the example (None: it can)."""
    text = (ROOT / "examples" / name).read_text()
    programs = [e["argv"][0] for s in doc.get("scenario", []) for e in s.get("enemies", []) if e.get("kind") == "external"]
    victims = [doc.get("victim") or {}] + list(doc.get("application", []))
    programs += [v["argv"][0] for v in victims if v.get("body") == "command" and v.get("argv")]
    for p in programs:
        if shutil.which(p) is None and not (ROOT / p).exists():
            return f"{p} is not installed or built here (tests/peers.sh, make setup)"
    for policy in ("fifo", "rr", "deadline"):
        if f'"{policy}"' in text and (why := capabilities.policy(policy)):
            return f"uses SCHED_{policy.upper()}: {why}"
    if ("[trace]" in text or "jobs_from" in text or 'body = "attach"' in text) and (why := capabilities.tracefs()):
        return f"needs the kernel trace: {why}"
    return None


@pytest.mark.slow  # every example, each a few real runs: make test-slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_writes_a_verdict_document_that_validates(name, tmp_path):
    if name in ELSEWHERE:
        pytest.skip(f"examples/{name}: validated by tests/test_campaign_examples.py (campaign run scaled down)")
    src = ROOT / "examples" / name
    doc = tomllib.loads(src.read_text())
    if why := _why_not(name, doc):
        pytest.skip(f"examples/{name} cannot run here: {why}")
    text = scaled(src.read_text())
    program = None
    if doc.get("victim", {}).get("body") == "attach":  # the process it watches: started as its comment says
        program = subprocess.Popen([str(ROOT / "build" / "periodic-plain"), "-n", "100000", "-p", "5000"])
        text = re.sub(r"(?m)^pid = \d+", f"pid = {program.pid}", text)
    f = tmp_path / name
    f.write_text(text)
    campaign = is_campaign_file(src)
    try:
        args = ("campaign", "run", f) if campaign else ("run", f, "--skip-unavailable", "--skip-feasibility")
        out = xtalk(*args, "--results", tmp_path / "res", cwd=ROOT, timeout=600)
    finally:
        if program is not None:
            program.kill()
            program.wait()
    # 0: every run completed; 4: some failed (an example of faults may lose a run when scaled down).
    assert out.returncode in (0, 4), f"{name}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}"
    (results,) = campaign_dirs(tmp_path / "res") if campaign else (tmp_path / "res").iterdir()
    document = json.loads((results / "verdicts.json").read_text())
    jsonschema.validate(document, schema())
    assert document["kind"] == ("campaign" if campaign else "experiment") and document["cells"], name
    # The document is the summary's: `xtalk summary --json` gives the same ε verdicts and warnings.
    again = xtalk("summary", results, "--json", cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["epsilon"] == document["epsilon"], name
    assert [w["line"] for w in summary["warnings"]] == [w["line"] for w in document["warnings"]], name
    assert not processes_named()
