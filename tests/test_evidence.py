"""`xtalk evidence`: a bundle indexed by objectives from planted results (testing/synthetic.py),
its manifest and OpenSSH signature, and `xtalk evidence verify` against tampering.

Planted: an experiment whose `read` scenario slows the victim 1.5× (an interference channel),
an experiment of applications whose memhog fault in `logger` makes `aocs` miss (propagated), both with a
recorded environment; a regulator report in one run. Planted nothing: solo runs alone, where the
channel and failure objectives must say "not covered"."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import xtalk
from test_report_sections import ENV, _patch_runs
from xtalk.store.check import LeftOut
from xtalk.outcome import load_outcome, parse_outcome, write_outcome
from xtalk.evidence.bundle import build
from xtalk.evidence.manifest import verify
from xtalk.testing.synthetic import Application, Scenario, write_application_results, write_results
from xtalk.testing.synthetic_campaign import write_campaign

OBJECTIVES = ["MCP_Planning_1", "MCP_Planning_2", "MCP_Resource_Usage_1", "MCP_Resource_Usage_3",
              "MCP_Resource_Usage_4", "MCP_Software_1", "MCP_Error_Handling_1", "MCP_Accomplishment_Summary_1"]
#: An enemy as the plan asks it and as the agent reports it (a real run's run.json).
ENEMIES = {kind: ({"name": kind, "load": {"kind": kind, "bytes": 1 << 24}, "placement": {"cpus": [0]},
                   "sched": {"policy": "other", "nice": 0}, "lock_memory": False, "huge_pages": False, "group": None,
                   "intensity": 100.0, "rate": None},
                  {"name": kind, "kind": kind, "unit": "bytes", "ops": 10**9, "seconds": 0.5, "rate": rate,
                   "intensity": 100.0, "target_intensity": 100.0})
           for kind, rate in (("read", 2.0e9), ("memhog", 6.5e8))}
REGULATOR = {"mode": "budget", "accounting": "cache-misses", "period_us": 1000, "budget_bytes": 1 << 20, "wakeups": 10,
             "periods": 1000, "throttles": 37, "overshoot_bytes_mean": 512.0, "overshoot_bytes_max": 4096, "cpu_ns": 123}

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed (openssh-client)")


def _key(d: Path, name: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(d / name)], check=True)
    return d / name


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("evidence")
    exp = write_results(d / "interference", [Scenario("solo"), Scenario("bw", enemies=[{"kind": "read"}], slowdown=1.5),
                                              Scenario("hog", enemies=[{"kind": "memhog"}])], repetitions=3, jobs=200)
    _patch_runs(exp, environment=ENV)
    for run in (exp / "runs").iterdir():
        meta = load_outcome(run).to_dict()
        kind = {"bw": "read", "hog": "memhog"}.get(meta["plan"]["labels"]["scenario"])
        if kind:
            meta["plan"]["enemies"], meta["enemies"] = [ENEMIES[kind][0]], [ENEMIES[kind][1]]
        if run.name == "1-bw-r0":
            meta["regulator"] = REGULATOR
        write_outcome(run, parse_outcome(meta))
    apps, _ = write_application_results(d / "faults", [Application("logger", "D"), Application("aocs", "A", exec_ns=300_000)],
                                        repetitions=3, jobs=150, faults=[("logger", "memhog")],
                                        fault_effect={("default", "logger", "aocs"): 5.0})  # aocs misses its deadlines
    _patch_runs(apps, environment=ENV)
    solo = write_results(d / "solo-only", [Scenario("solo")], repetitions=3, jobs=200)
    key = _key(d, "signer") if shutil.which("ssh-keygen") else None
    bundle = d / "bundle"
    r = xtalk("evidence", exp, apps, "--out", bundle, "--n-boot", 200, *(["--key", key] if key else []))
    assert r.returncode == 0, r.stderr + r.stdout
    return {"dir": d, "bundle": bundle, "key": key, "solo": solo, "out": r.stdout}


def _sections(bundle: Path) -> dict[str, str]:
    page = (bundle / "index.html").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r'<section id="(MCP_\w+)">(.*?)</section>', page, re.S)}


def test_each_objective_has_its_artifacts_or_says_why_not(planted):
    s = _sections(planted["bundle"])
    assert list(s) == OBJECTIVES
    for oid, body in s.items():
        assert "<table>" in body or "Not covered:" in body, oid
    # What was planted is found where it belongs.
    assert "Not covered" not in s["MCP_Resource_Usage_3"] and "bw" in s["MCP_Resource_Usage_3"]
    assert "Not covered" not in s["MCP_Error_Handling_1"] and "fault:logger:memhog" in s["MCP_Error_Handling_1"]
    assert "Test CPU" in s["MCP_Planning_1"] and "quiet" in s["MCP_Planning_1"]  # model, kernel command line
    assert "37" in s["MCP_Resource_Usage_4"]  # the regulator's throttles
    ffi = pd.read_csv(planted["bundle"] / "objectives" / "ISO_26262_FFI" / "ffi_pairs.csv")
    pair = ffi[(ffi["victim"] == "aocs") & (ffi["interferer"] == "logger")].iloc[0]
    assert (pair["victim criticality"], pair["interferer criticality"], pair["fault of the interferer"]) == ("A", "D", "propagated")
    assert set(ffi["fault of the interferer"]) == {"propagated", "not injected"}  # aocs had no fault
    eh = planted["bundle"] / "objectives" / "MCP_Error_Handling_1"
    held, spread = pd.read_csv(eh / "containment.csv"), pd.read_csv(eh / "propagation.csv")
    assert set(zip(held["input"], held["scenario"], held["verdict"])) == {("interference", "hog", "contained")}  # bw is no fault
    assert set(zip(spread["input"], spread["scenario"], spread["application"], spread["verdict"])) == {
        ("faults", "fault:logger:memhog", "aocs", "propagated")}
    assert "Not covered: no run of the inputs recorded its settings snapshot" in s["MCP_Resource_Usage_1"]
    trace = (planted["bundle"] / "traceability.csv").read_text()
    channel_runs = next(line for line in trace.splitlines() if line.startswith("MCP_Resource_Usage_3,")).split(",")[3].split()
    bw = {f"interference/{r.name}" for r in (planted["dir"] / "interference" / "runs").glob("*-bw-*")}
    assert len(bw) == 3 and bw <= set(channel_runs)
    assert not any("solo" in r for r in channel_runs) and len(channel_runs) == len(set(channel_runs))
    assert "MCP_Resource_Usage_1,–,0,not covered: no run of the inputs recorded its settings" in trace
    # Each run's outcome, plan and job table: data/<input>/ reads as a results directory (what a replay compares with).
    run = next((planted["dir"] / "faults" / "runs").iterdir())
    kept = planted["bundle"] / "data" / "faults" / "runs" / run.name
    assert (kept / "run.json").read_bytes() == (run / "run.json").read_bytes() and (kept / "jobs.parquet").is_file()
    assert (planted["bundle"] / "data" / "interference" / "verdicts.csv").is_file()


def test_the_planted_slowdown_is_the_channels_ci(planted):
    ch = pd.read_csv(planted["bundle"] / "objectives" / "MCP_Resource_Usage_3" / "channels.csv")
    row = ch[ch["scenario"] == "bw"].iloc[0]
    p, lo, hi = map(float, re.findall(r"[\d.]+", row["slowdown of median"]))
    assert lo <= 1.5 <= hi and lo > 1.2 and row["channel"] == "read"
    mine = ch[ch["input"] == "interference"]
    assert set(mine["scenario"]) == {"bw", "hog"}  # solo is the reference, not a channel
    assert mine.set_index("scenario").loc["hog", "channel"] == "memory-capacity"
    load = pd.read_csv(planted["bundle"] / "objectives" / "MCP_Resource_Usage_3" / "enemy_load.csv")
    assert sorted(set(zip(load["kind"], load["achieved rate"]))) == [("memhog", 6.5e8), ("read", 2.0e9)]
    apps = ch[ch["input"] == "faults"]  # applications planted without effect on each other
    assert len(apps) and not apps["status"].str.contains("slowed").any(), apps.to_string()


def test_planted_nothing_claims_nothing(planted, tmp_path):
    lines = []
    build([planted["solo"]], tmp_path / "b", n_boot=200, pdf=False, say=lines.append)
    assert not (tmp_path / "b" / "index.pdf").exists()
    s = _sections(tmp_path / "b")
    for oid in ("MCP_Planning_1", "MCP_Resource_Usage_3", "MCP_Resource_Usage_4", "MCP_Error_Handling_1"):
        assert "Not covered:" in s[oid] and "<table>" not in s[oid], oid
    assert "not signed" in lines[0] and "(3 of 8 objectives covered" in lines[0]
    assert sum("not covered" in x for x in lines) == 6  # 5 objectives and the ISO 26262 view
    assert verify(tmp_path / "b") == []  # unsigned but intact
    if planted["key"]:
        assert verify(tmp_path / "b", Path(str(planted["key"]) + ".pub"))[0].startswith("signature: the bundle is not signed")


def test_a_damaged_run_is_a_deviation_not_a_crash(planted, tmp_path):
    src = tmp_path / "r"
    shutil.copytree(planted["solo"], src)
    damaged = sorted((src / "runs").iterdir())[0]
    (damaged / "run.json").write_text('{"run_id": "x", "status": ')
    with pytest.warns(LeftOut, match=damaged.name):  # said once, as every reader says it
        build([src], tmp_path / "b", n_boot=200, pdf=False, say=lambda s: None)
    dev = pd.read_csv(tmp_path / "b" / "objectives" / "MCP_Accomplishment_Summary_1" / "deviations.csv")
    assert list(dev["run"]) == [damaged.name] and dev["deviation"][0].startswith("left out as damaged: ")
    assert f"r/{damaged.name}" in (tmp_path / "b" / "traceability.csv").read_text()


def test_settings_held_and_a_drifted_run_are_shown_per_run(planted, tmp_path):
    src = tmp_path / "r"
    shutil.copytree(planted["solo"], src)
    runs = sorted((src / "runs").iterdir())
    snap = {"/sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]", "/proc/cmdline": "quiet"}
    drift = "/proc/sys/kernel/sched_rt_runtime_us: '950000' → '951000'"
    for i, run in enumerate(runs):
        meta = load_outcome(run).to_dict()
        meta["settings"] = {"before": snap, "after": snap, "drift": [drift] if i == 0 else []}
        if i == 0:
            meta["invalid"] = f"settings drifted during the run: {drift}"
        write_outcome(run, parse_outcome(meta))
    doc = json.loads((src / "experiment.json").read_text()) if (src / "experiment.json").exists() else {}
    doc["declared_settings"] = [{"path": "/sys/kernel/mm/transparent_hugepage/enabled", "value": "never",
                                 "why": "no khugepaged collapse"}]
    (src / "experiment.json").write_text(json.dumps(doc))
    with pytest.warns(LeftOut, match=f"left out run {runs[0].name}: invalid: settings drifted"):
        build([src], tmp_path / "b", n_boot=200, pdf=False, say=lambda s: None)
    s = _sections(tmp_path / "b")["MCP_Resource_Usage_1"]
    assert "Not covered" not in s and "no khugepaged collapse" in s
    d = tmp_path / "b" / "objectives" / "MCP_Resource_Usage_1"
    held = pd.read_csv(d / "settings_per_run.csv")
    assert dict(zip(held["run"], held["held"])) == {runs[0].name: "no: invalid", **{r.name: "yes" for r in runs[1:]}}
    assert held.set_index("run").loc[runs[0].name, "drift"] == f"settings drifted during the run: {drift}"
    assert set(pd.read_csv(d / "settings_snapshot.csv")["setting"]) == set(snap)
    dev = pd.read_csv(tmp_path / "b" / "objectives" / "MCP_Accomplishment_Summary_1" / "deviations.csv")
    assert list(dev["deviation"]) == [f"left out: invalid: settings drifted during the run: {drift}"]


def test_a_campaign_is_read_as_results(tmp_path):
    camp = write_campaign(tmp_path / "c", families=[], scenarios={"read": 1.4}, repetitions=3)
    build([camp], tmp_path / "b", n_boot=200, pdf=False, say=lambda s: None)
    ch = pd.read_csv(tmp_path / "b" / "objectives" / "MCP_Resource_Usage_3" / "channels.csv")
    assert set(ch["scenario"]) == {"read"}
    assert all(1.3 < float(re.findall(r"[\d.]+", x)[0]) < 1.5 for x in ch["slowdown of median"])
    assert (tmp_path / "b" / "data" / "c" / "campaign.json").is_file()


@needs_ssh_keygen
def test_verify_names_every_changed_missing_and_extra_file(planted, tmp_path):
    ok = xtalk("evidence", "verify", planted["bundle"], "--signer-key", str(planted["key"]) + ".pub")
    assert ok.returncode == 0 and "intact, signed by the key given (SHA256:" in ok.stdout, ok.stdout + ok.stderr
    b = tmp_path / "b"
    shutil.copytree(planted["bundle"], b)
    flipped = b / "objectives" / "MCP_Software_1" / "verdicts.csv"
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    (b / "data" / "interference" / "runs.csv").unlink()
    (b / "objectives" / "notes.txt").write_text("added later\n")
    linked = b / "data" / "interference" / "misses.csv"  # the same bytes, through a link
    shutil.copy(linked, tmp_path / "misses.csv")
    linked.unlink()
    linked.symlink_to(tmp_path / "misses.csv")
    r = xtalk("evidence", "verify", b)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert "changed: objectives/MCP_Software_1/verdicts.csv" in lines
    assert "missing: data/interference/runs.csv" in lines
    assert "extra: objectives/notes.txt" in lines
    assert "changed: data/interference/misses.csv (now a link or not a file)" in lines
    assert len(lines) == 4, r.stdout  # the signature still holds: the manifest was not touched


@needs_ssh_keygen
def test_a_rewritten_manifest_or_another_key_is_reported(planted, tmp_path):
    other = _key(tmp_path, "other")
    r = xtalk("evidence", "verify", planted["bundle"], "--signer-key", str(other) + ".pub")
    assert r.returncode == 1 and "signature: manifest.json.sig was not made by the key SHA256:" in r.stdout, r.stdout
    b = tmp_path / "b"
    shutil.copytree(planted["bundle"], b)
    m = b / "manifest.json"
    m.write_text(m.read_text().replace('"operator": "', '"operator": "someone else, '))
    problems = verify(b)  # against the bundle's own signer.pub
    assert len(problems) == 1 and problems[0].startswith("signature: manifest.json.sig was not made by"), problems


def test_bad_input_is_one_line_and_writes_nothing(planted, tmp_path):
    r = xtalk("evidence", tmp_path / "nowhere", "--out", tmp_path / "b")
    assert r.returncode == 2 and "not an xtalk results directory" in r.stderr and not (tmp_path / "b").exists()
    r = xtalk("evidence", planted["solo"], "--out", tmp_path / "b", "--key", tmp_path / "no-key")
    assert r.returncode == 2 and "--key" in r.stderr and not (tmp_path / "b").exists()
    r = xtalk("evidence", planted["solo"], "--out", planted["bundle"])
    assert r.returncode == 2 and "not empty" in r.stderr
    r = xtalk("evidence", planted["solo"], "--out", planted["bundle"] / "index.html")
    assert r.returncode == 2 and "not a directory" in r.stderr
    r = xtalk("evidence", planted["solo"])
    assert r.returncode == 2 and "--out" in r.stderr
    r = xtalk("evidence", "verify", planted["solo"])
    assert r.returncode == 2 and "manifest.json" in r.stderr


def test_the_pdf_renders_a_page_that_is_not_blank(planted, tmp_path):
    pdf = planted["bundle"] / "index.pdf"
    if not pdf.exists():
        assert "no PDF" in planted["out"]  # said in one line, the HTML written anyway
        pytest.skip("no headless Chromium here: " + planted["out"].splitlines()[0])
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm is not installed (apt-get install poppler-utils)")
    subprocess.run(["pdftoppm", "-png", "-r", "40", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "p")], check=True)
    from PIL import Image

    img = np.asarray(Image.open(next(tmp_path.glob("p*.png"))).convert("L"))
    dark = (img < 128).mean()
    assert 0.002 < dark < 0.5, dark  # text on a white page


def test_the_page_cuts_long_run_lists_the_csv_keeps_them():
    from xtalk.evidence.page import SHOWN_IDS, _shown

    ids = " ".join(f"c/r{k}" for k in range(SHOWN_IDS + 6))
    why = "not covered: " + " ".join(["word"] * (SHOWN_IDS * 2))
    m = pd.DataFrame({"objective": ["A", "B"], "artifact": ["a.csv", "–"], "runs": [SHOWN_IDS + 6, 0], "run_ids": [ids, why]})
    shown = _shown(m)["run_ids"].tolist()
    assert shown[0].endswith("c/r23 … (6 more in traceability.csv)") and shown[1] == why


def test_replay_of_a_damaged_bundle_is_refused_naming_the_file(planted, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(planted["bundle"], b)
    run = next((b / "data" / "interference" / "runs").iterdir())
    jobs = run / "jobs.parquet"
    data = bytearray(jobs.read_bytes())
    data[len(data) // 2] ^= 0x01
    jobs.write_bytes(bytes(data))
    r = xtalk("evidence", "replay", b, "--out", tmp_path / "replay")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"damaged, not replayed: changed: data/interference/runs/{run.name}/jobs.parquet" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "replay").exists()  # nothing run, nothing written
    r = xtalk("evidence", "replay", tmp_path / "nowhere")
    assert r.returncode == 2 and "not a directory" in r.stderr, r.stderr
    r = xtalk("evidence", "replay", planted["bundle"], planted["bundle"])
    assert r.returncode == 2 and "one bundle directory" in r.stderr, r.stderr
    r = xtalk("evidence", "verify", planted["bundle"], "--tolerance", "5%")
    assert r.returncode == 2 and "go with `xtalk evidence replay BUNDLE`" in r.stderr, r.stderr
    r = xtalk("evidence", "replay", planted["bundle"], "--ecss-margin", "QR=10%")
    assert r.returncode == 2 and "--ecss-margin goes with making a bundle" in r.stderr, r.stderr


def test_the_ecss_view_is_each_applications_worst_execution_over_its_period(planted, tmp_path):
    from xtalk.store import open as open_results

    budget = pd.read_csv(planted["bundle"] / "objectives" / "ECSS_CPU_budget" / "cpu_budget.csv")
    jobs = open_results(planted["dir"] / "interference").jobs()
    jobs = jobs[~jobs["warmup"] & (jobs["scenario"] != "hog")]  # hog injects a fault: containment, not budget
    row = budget[budget["input"] == "interference"].iloc[0]
    use = jobs["exec_ns"].max() / jobs["period_ns"].median()
    assert row["worst scenario"] == "bw" and row["CPU use (worst)"] == f"{use:.1%}"  # the planted 1.5× slowdown
    assert row["QR (margin ≥ 25%)"] == ("holds" if 1 - use >= 0.25 else "exceeded")
    apps = budget[budget["input"] == "faults"]
    assert set(zip(apps["application"], apps["criticality"])) == {("logger", "D"), ("aocs", "A")}
    assert "ECSS view: CPU budget per application" in (planted["bundle"] / "index.html").read_text()
    r = xtalk("evidence", planted["solo"], "--out", tmp_path / "b", "--ecss-margin", "CDR")
    assert r.returncode == 2 and "--ecss-margin 'CDR'" in r.stderr and not (tmp_path / "b").exists(), r.stderr
    r = xtalk("evidence", planted["solo"], "--out", tmp_path / "b", "--ecss-margin", "CDR=140%")
    assert r.returncode == 2 and "--ecss-margin CDR" in r.stderr and not (tmp_path / "b").exists(), r.stderr
