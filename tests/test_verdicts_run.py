"""`xtalk run` writes verdicts.json (report/verdicts.py) that validates against the shipped
schema and holds every warning the terminal printed, the run-time ones included (a run that
timed out); `run --gate` gates in the same command with `xtalk gate`'s rules and exit codes,
its checks recorded in the document. Planted: a second run that sleeps past the timeout; an ε
bound of 1 µs that a process cannot meet (violated), one of 100 s that it meets (holds)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema

from command_experiment import command_experiment
from conftest import xtalk
from xtalk.report.verdicts import printed_lines, schema



def _run(tmp_path, argv, reps, *args, bound="100s"):
    f = command_experiment(tmp_path / "exp.toml", "verdicts", argv, reps, epsilon_bound=bound)
    out = xtalk("run", f, "--results", tmp_path / "res", *args, timeout=120)
    (results,) = (tmp_path / "res").iterdir()
    return out, results


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_run_that_timed_out_is_a_warning_of_the_document(tmp_path):
    flag = tmp_path / "second"
    out, results = _run(tmp_path, ["sh", "-c", f"test -e {flag} && sleep 5; touch {flag}"], 2)
    assert out.returncode == 4, out.stdout + out.stderr
    doc = json.loads((results / "verdicts.json").read_text())
    jsonschema.validate(doc, schema())
    kinds = [w["kind"] for w in doc["warnings"]]
    assert "run_failed" in kinds and "runs_incomplete" in kinds, doc["warnings"]
    shown = _flat(out.stdout)
    assert all(_flat(line) in shown for line in printed_lines(doc["warnings"])), (doc["warnings"], out.stdout[-3000:])
    printed = [line for line in out.stdout.splitlines() if line.startswith("warning: ")]
    assert len(printed) <= len(doc["warnings"])
    # `xtalk summary` later rewrites the document with the same warnings (kept in experiment.json).
    again = xtalk("summary", results, "--json", timeout=120)
    assert again.returncode == 0, again.stderr
    assert [w["line"] for w in json.loads(again.stdout)["warnings"]] == [w["line"] for w in doc["warnings"]]
    assert doc["provenance"]["command"][:2] == ["xtalk", "run"] and doc["provenance"]["build_commit"]


def test_run_gate_fails_on_the_violated_bound_and_records_the_checks(tmp_path):
    junit = tmp_path / "gate.xml"
    out, results = _run(tmp_path, ["true"], 2, "--gate", "--junit", junit, bound="1us")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL: " in out.stdout and "gate: FAILED: 0 passed, 1 failed" in _flat(out.stdout), out.stdout[-2000:]
    doc = json.loads((results / "verdicts.json").read_text())
    jsonschema.validate(doc, schema())
    assert doc["gate"]["passed"] is False and doc["gate"]["exit_status"] == 1
    assert [c["outcome"] for c in doc["gate"]["checks"]] == ["fail"]
    assert [e["verdict"] for c in doc["cells"] for e in c["epsilon"]] == ["violated"]
    assert ET.parse(junit).getroot().get("failures") == "1"
    (tmp_path / "res2").mkdir()
    ok = xtalk("run", _file(tmp_path, "100s"), "--results", tmp_path / "res2", "--gate",
               timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "gate: passed: 1 passed, 0 failed" in _flat(ok.stdout)
    # One machine, two experiments: one fingerprint, one sysinfo digest (what varies by run is left out).
    (other,) = (tmp_path / "res2").iterdir()
    machines = [json.loads((d / "verdicts.json").read_text())["provenance"]["machine"] for d in (results, other)]
    assert machines[0] == machines[1] and machines[0]["fingerprint"] and len(machines[0]["sysinfo_digest"]) == 16


def _file(tmp_path, bound):
    return command_experiment(tmp_path / f"exp-{bound}.toml", "verdicts", ["true"], 2, epsilon_bound=bound)


def test_gate_options_without_gate_are_refused_before_anything_runs(tmp_path):
    out = xtalk("run", _file(tmp_path, "1s"), "--results", tmp_path / "res", "--strict", timeout=60)
    assert out.returncode == 2 and out.stderr.strip().startswith("xtalk: --strict: "), out.stderr
    assert not (tmp_path / "res").exists()
    plain = tmp_path / "plain.toml"  # nothing to gate: no ε, no baseline
    plain.write_text("\n".join(line for line in _file(tmp_path, "1s").read_text().splitlines() if "epsilon" not in line))
    out = xtalk("run", plain, "--results", tmp_path / "res", "--gate", timeout=60)
    assert out.returncode == 2 and out.stderr.strip().startswith("xtalk: --gate: the experiment declares no ε"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "res").exists()


def test_campaign_run_gate_writes_the_document_and_fails_the_violated_bound(tmp_path):
    """`campaign run --gate`: the verdict document of the campaign validates, and an ε of 1 µs
    that no job of 64 KiB can meet fails the gate (exit 1) with its checks recorded."""
    from campaign_util import campaign_dirs, tiny

    f = tiny(tmp_path, jobs=20, **{'bound = "1.5x"': 'bound = "1us"', "repetitions = 3": "repetitions = 2"})
    out = xtalk("campaign", "run", f, "--results", tmp_path / "res", "--gate", "--junit", tmp_path / "gate.xml", timeout=200)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr
    (store,) = campaign_dirs(tmp_path / "res")
    doc = json.loads((store / "verdicts.json").read_text())
    jsonschema.validate(doc, schema())
    assert doc["kind"] == "campaign" and doc["gate"]["exit_status"] == 1
    assert any(c["outcome"] == "fail" for c in doc["gate"]["checks"])
    assert "verdicts: " in out.stdout and "gate: FAILED" in _flat(out.stdout)
