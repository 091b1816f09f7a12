"""The verdict document (report/verdicts.py, RESULTS/verdicts.json): it validates against the
shipped schema, carries the ε verdicts the terminal states and every warning the terminal
printed, and `xtalk summary R --json` prints the same document. Planted: a scenario 1.3×
slower than solo against an ε of ×1.2 (violated) and ×1.5 (holds). Pure: synthetic results,
no agent (tests/test_verdicts_run.py runs `xtalk run`)."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from xtalk.testing.synthetic import Scenario, write_results
from xtalk.report.verdicts import printed_lines, schema, warning

PERIOD, EXEC = 10_000_000, 2_000_000


def _xtalk(*args, cwd):
    return subprocess.run([sys.executable, "-m", "xtalk.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Synthetic results whose experiment declares two ε bounds (one violated, one holding)."""
    root = write_results(tmp_path_factory.mktemp("verdicts") / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)],
                         repetitions=3, jobs=200, period_ns=PERIOD, exec_ns=EXEC, seed=1)
    doc = json.loads((root / "experiment.json").read_text())
    doc["experiment"]["victim"]["epsilon"] = [{"metric": "exec", "statistic": "median", "bound": "1.2x"},
                                              {"metric": "exec", "statistic": "median", "bound": "1.5x"}]
    (root / "experiment.json").write_text(json.dumps(doc))
    return root


def test_summary_writes_a_valid_document_with_the_verdicts_and_every_printed_warning(results, tmp_path):
    r = _xtalk("summary", results, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((results / "verdicts.json").read_text())
    jsonschema.validate(doc, schema())
    assert doc["schema_version"] == 1 and doc["kind"] == "experiment"
    read = next(c for c in doc["cells"] if c["scenario"] == "read")
    verdicts = {e["ratio"] is not None and e["relative"]: e["verdict"] for e in read["epsilon"]}
    assert verdicts == {1.2: "violated", 1.5: "holds"}, read["epsilon"]
    assert all(e["ratio"]["ci_low"] > 1.2 for e in read["epsilon"])
    assert doc["epsilon"] == {"holds": 1, "violated": 1, "inconclusive": 0}
    median = next(s for s in read["slowdowns"] if s["statistic"] == "median")
    assert 1.2 < median["ci_low"] <= median["ratio"] <= median["ci_high"] < 1.4 and median["level"] == 0.95
    assert {(s["metric"], s["statistic"], s["unit"]) for s in read["statistics"]} >= {("response", "p99", "ms"),
                                                                                       ("exec", "median", "ms")}
    # Every warning the terminal printed is in the document, in order, and nothing else (one
    # line for a warning scenarios share word for word: printed_lines).
    printed = [line.removeprefix("warning: ") for line in _joined(r.stdout) if line.startswith("warning: ")]
    assert printed and printed == printed_lines(doc["warnings"])
    assert any(w["kind"] == "too_few_runs_for_max" for w in doc["warnings"])
    # summary.md lists the same warnings; summary.json keeps its list of rows (other readers depend on it).
    md = (results / "summary.md").read_text()
    assert all(f"- {line}" in md for line in printed_lines(doc["warnings"]))
    rows = json.loads((results / "summary.json").read_text())
    assert isinstance(rows, list) and {row["scenario"] for row in rows} == {"solo", "read"}


def _joined(out: str) -> list[str]:
    """Terminal lines with rich's wrapping undone (a warning continues on lines without a prefix)."""
    lines: list[str] = []
    for raw in out.splitlines():
        if lines and lines[-1].startswith("warning: ") and raw and not raw.startswith(("warning: ", "results: ")):
            lines[-1] += " " + raw.strip() if not lines[-1].endswith(" ") else raw.strip()
        else:
            lines.append(raw.rstrip())
    return lines


def test_summary_json_prints_the_document_and_the_schema_command_prints_the_schema(results, tmp_path):
    r = _xtalk("summary", results, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    jsonschema.validate(printed, schema())
    on_disk = json.loads((results / "verdicts.json").read_text())
    for doc in (printed, on_disk):
        doc["provenance"].pop("written_at")
    assert printed == on_disk
    assert printed["provenance"]["command"][1:] == ["summary", str(results), "--json"]
    s = _xtalk("summary", "--schema", cwd=tmp_path)
    assert s.returncode == 0 and json.loads(s.stdout) == schema()
    jsonschema.Draft202012Validator.check_schema(schema())


def test_a_document_that_breaks_the_schema_is_refused(results):
    """The schema is not a formality: a verdict outside the three words, a unit in a key name fail it."""
    doc = json.loads((results / "verdicts.json").read_text())
    bad = json.loads(json.dumps(doc))
    next(c for c in bad["cells"] if c["epsilon"])["epsilon"][0]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema())
    bad = json.loads(json.dumps(doc))
    bad["cells"][0]["statistics"][0]["value_ms"] = bad["cells"][0]["statistics"][0].pop("value")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema())


def test_the_report_rewrites_the_document(results, tmp_path):
    (results / "verdicts.json").unlink()
    r = _xtalk("report", results, "--no-csv", "-o", tmp_path / "rep", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((results / "verdicts.json").read_text())
    jsonschema.validate(doc, schema())
    assert doc["epsilon"]["violated"] == 1 and doc["provenance"]["command"][1] == "report"


def test_the_report_prints_the_stored_run_time_notices_as_the_terminal_grouped_them(tmp_path):
    """`xtalk run` keeps its run-time notices in experiment.json (a failed run, a noise warning
    shared word for word by two scenarios): `xtalk report` prints them, grouped as the
    terminal did (report/verdicts.printed_lines), before its own guards, and its summary.md
    lists them."""
    from xtalk.report.verdicts import warning

    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3), Scenario("chase")],
                         repetitions=2, jobs=100, period_ns=PERIOD, exec_ns=EXEC, seed=3)
    kept = [warning("run_failed", "run 0007 failed: timeout after 1.5 s", "default", "read",
                    line="run 0007 (default · read) failed: timeout after 1.5 s"),
            warning("noise", "the machine was busy (load 3.1)", "default", "read",
                    line="read: the machine was busy (load 3.1)"),
            warning("noise", "the machine was busy (load 3.1)", "default", "chase",
                    line="chase: the machine was busy (load 3.1)")]
    doc = json.loads((root / "experiment.json").read_text())
    doc["warnings"] = kept
    (root / "experiment.json").write_text(json.dumps(doc))
    r = _xtalk("report", root, "--no-csv", "-o", tmp_path / "rep", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    printed = [line.removeprefix("warning: ") for line in _joined(r.stdout) if line.startswith("warning: ")]
    expected = printed_lines(kept)
    assert expected == ["run 0007 (default · read) failed: timeout after 1.5 s",
                        "read, chase: the machine was busy (load 3.1)"]
    assert printed[:2] == expected, r.stdout
    assert any(line.startswith("too few runs") or "runs" in line for line in printed[2:]), printed  # the guards follow
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert all(f"- {line}" in md for line in expected), md
    stored = json.loads((root / "verdicts.json").read_text())["warnings"]
    assert [w["line"] for w in stored[:3]] == [w["line"] for w in kept]


def test_several_applications_and_a_campaign_validate(tmp_path):
    from xtalk.testing.synthetic import Application, write_application_results
    from xtalk.testing.synthetic_campaign import write_campaign

    apps = [Application("aocs", "A", {"metric": "execution", "statistic": "median", "relative": 1.3}),
            Application("payload", "D", {"metric": "execution", "statistic": "median", "relative": 1.3})]
    root, _ = write_application_results(tmp_path / "apps", apps, repetitions=3, jobs=120,
                                        perturb={("default", "aocs", "payload"): 1.6})
    r = _xtalk("summary", root, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema())
    verdicts = {c["application"]: e["verdict"] for c in doc["cells"] for e in c["epsilon"]}
    assert verdicts == {"aocs": "violated", "payload": "holds"}, verdicts
    camp = write_campaign(tmp_path / "camp", families=[], configurations=("fifo",), scenarios={"read": 1.5})
    r = _xtalk("summary", camp, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema())
    assert doc["kind"] == "campaign" and doc["cells"] and (camp / "verdicts.json").is_file()


def test_a_campaign_s_epsilon_entries_carry_metric_statistic_and_the_observed_ci(tmp_path):
    """A campaign cell's ε (its default: response p99 within ×1.5 of solo), planted 1.3× and
    2× slower: each entry names its metric and statistic and gives the observed p99 with its
    CI around it and the ratio to solo with its CI, as an experiment's entries do."""
    from xtalk.testing.synthetic_campaign import write_campaign

    camp = write_campaign(tmp_path / "camp", families=[], configurations=("fifo",), scenarios={"read": 1.3, "chase": 2.0})
    r = _xtalk("summary", camp, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema())
    eps = {c["scenario"]: e for c in doc["cells"] for e in c["epsilon"]}
    assert set(eps) == {"read", "chase"}, eps
    for scenario, e in eps.items():
        assert (e["metric"], e["statistic"], e["bound_kind"], e["relative"]) == ("response", "p99", "relative", 1.5), e
        o = e["observed"]
        assert 0 < o["ci_low"] <= o["value"] <= o["ci_high"] and o["unit"] == "ms", e
        assert e["ratio"]["ci_low"] <= e["ratio"]["value"] <= e["ratio"]["ci_high"], e
    assert eps["chase"]["verdict"] == "violated" and eps["chase"]["ratio"]["ci_low"] > 1.5
    assert eps["chase"]["observed"]["value"] > eps["read"]["observed"]["value"]


def test_latency_json_gives_the_table_with_units_as_fields(tmp_path):
    """`xtalk summary R --view latency --json`: the rows the terminal shows, p99 in µs as {value, unit}; a
    planted 3× longer wake-up under the enemy reads as p99 about 3× solo's."""
    import pandas as pd

    root = write_results(tmp_path / "lat", [Scenario("solo"), Scenario("read")], repetitions=2, jobs=300,
                         victim={"body": {"kind": "latency"}}, seed=1)
    for p in (root / "runs").glob("*read*/jobs.parquet"):
        j = pd.read_parquet(p)
        j["wakeup_latency_ns"] *= 3
        j.to_parquet(p, index=False)
    r = _xtalk("summary", root, "--view", "latency", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "latency" and doc["provenance"]["xtalk_version"]
    rows = {row["scenario"]: row for row in doc["rows"]}
    assert rows["solo"]["p99"]["unit"] == "us" and not any(k.endswith("_us") for k in rows["solo"])
    assert 2.5 < rows["read"]["p99"]["value"] / rows["solo"]["p99"]["value"] < 3.5
    bad = _xtalk("summary", tmp_path / "nothing", "--view", "latency", "--json", cwd=tmp_path)
    assert bad.returncode == 2 and not bad.stdout


def test_a_warning_scenarios_share_word_for_word_is_printed_once_naming_them_all():
    few = "the max slowdown comes from 5 run(s) per side"
    ws = [warning("too_few_runs_for_max", few, "default", "read", line=f"read: {few}"),
          warning("ci_too_wide", "the CI [0.9, 1.2] holds 1", "default", "read", line="read: the CI [0.9, 1.2] holds 1"),
          warning("too_few_runs_for_max", few, "default", "chase", line=f"chase: {few}"),
          warning("ci_too_wide", "the CI [0.8, 1.3] holds 1", "default", "chase", line="chase: the CI [0.8, 1.3] holds 1"),
          warning("too_few_runs_for_max", few, "pinned", "read", line=f"read: {few}"),
          warning("noise", "solo spread: 6 %", line="solo spread: 6 %")]
    assert printed_lines(ws) == [f"read, chase: {few}", "read: the CI [0.9, 1.2] holds 1",
                                 "chase: the CI [0.8, 1.3] holds 1", f"read: {few}", "solo spread: 6 %"]
    assert printed_lines(ws[1:2]) == ["read: the CI [0.9, 1.2] holds 1"] and printed_lines([]) == []


@pytest.mark.parametrize("jobs,measured", [(2, 0), (3, 1)])
def test_one_job_or_none_a_cell_is_summarised_and_judged_inconclusive_never_a_crash(tmp_path, jobs, measured):
    """Synthetic runs keep their first job as warm-up: 2 jobs leave none measured, 3 leave one
    per cell, too few for any interval (the summary crashed on both)."""
    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=1, jobs=jobs,
                         period_ns=PERIOD, exec_ns=EXEC, seed=1)
    doc = json.loads((root / "experiment.json").read_text())
    doc["experiment"]["victim"]["epsilon"] = [{"metric": "exec", "statistic": "median", "bound": "1.2x"}]
    (root / "experiment.json").write_text(json.dumps(doc))
    r = _xtalk("summary", root, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    vdoc = json.loads((root / "verdicts.json").read_text())
    jsonschema.validate(vdoc, schema())
    assert {c["scenario"]: c["jobs"] for c in vdoc["cells"]} == {"solo": measured, "read": measured}
    if measured:
        assert vdoc["epsilon"] == {"holds": 0, "violated": 0, "inconclusive": 1}
        assert "ε INCONCLUSIVE" in r.stdout
