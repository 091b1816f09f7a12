"""`xtalk gate`: ε bounds and regressions against a baseline as an exit status and JUnit XML.
Planted: a 2× slower "after" (fails a 5 % regression allowance), a scenario 1.3× slower than
solo (fails ε ×1.2, passes ×1.5); planted nothing: the same experiment again fails nothing.
Pure: synthetic results, no agent."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from xtalk.testing.synthetic import Scenario, write_results

PERIOD, EXEC = 10_000_000, 2_000_000


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("gate")
    scen = [Scenario("solo"), Scenario("read", slowdown=1.3)]
    before = write_results(base / "before", scen, repetitions=3, jobs=200, period_ns=PERIOD, exec_ns=EXEC, seed=1)
    again = write_results(base / "again", scen, repetitions=3, jobs=200, period_ns=PERIOD, exec_ns=EXEC, seed=4)
    slower = write_results(base / "slower", scen, repetitions=3, jobs=200, period_ns=PERIOD, exec_ns=2 * EXEC, seed=2)
    return before, again, slower


def _gate(*args, cwd):
    return subprocess.run([sys.executable, "-m", "xtalk.cli", "gate", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_a_planted_regression_fails_with_one_line_each_and_junit(dirs, tmp_path):
    before, _, slower = dirs
    junit = tmp_path / "gate.xml"
    r = _gate(slower, "--baseline", before, "--max-regression", "5%", "--junit", junit, cwd=tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    fails = [x for x in r.stdout.splitlines() if x.startswith("FAIL: ")]
    assert len(fails) == 4, r.stdout  # median and p99 of solo and read
    assert all("of the baseline, allowed +5 %" in x and "× slower, significant" in x for x in fails)
    assert "gate: FAILED: 0 passed, 4 failed" in r.stdout
    _valid_junit(junit)
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "4" and suite.get("failures") == "4"
    assert {c.get("name") for c in suite.iter("testcase")} == {"regression median ≤ +5 %", "regression p99 ≤ +5 %"}


#: The JUnit XML format Jenkins reads (restated from its xunit plugin's junit-10.xsd; the file says so).
JUNIT_XSD = Path(__file__).parent / "fixtures" / "junit.xsd"


def _valid_junit(path: Path) -> None:
    """The file validates against the JUnit schema (xmlschema raises with the element and rule)."""
    import xmlschema

    xmlschema.XMLSchema(JUNIT_XSD).validate(str(path))


def test_junit_xml_of_a_pass_a_failure_and_an_inconclusive_check_validates_against_the_junit_schema(dirs, tmp_path):
    """Every outcome's test case (passed, failed, skipped as inconclusive) is in the shape CI
    servers read: the JUnit schema accepts the file, and rejects it once a case loses its name
    or the suite its failure count (the schema is not a formality)."""
    import xmlschema

    before, again, slower = dirs
    for name, args in {"fail": [slower, "--baseline", before, "--max-regression", "5%"],
                       "pass": [before, "-e", "exec:median:1.5x"],
                       "aa": [again, "--baseline", before, "--max-regression", "1%", "-e", "exec:median:1.3x"]}.items():
        junit = tmp_path / f"{name}.xml"
        r = _gate(*args, "--junit", junit, cwd=tmp_path)
        assert r.returncode in (0, 1), (r.stdout, r.stderr)
        _valid_junit(junit)
        suite = ET.parse(junit).getroot()
        assert int(suite.get("tests")) == len(list(suite.iter("testcase"))) > 0
    assert any(ET.parse(tmp_path / f"{n}.xml").getroot().find("testcase/failure") is not None for n in ("fail", "aa"))
    schema = xmlschema.XMLSchema(JUNIT_XSD)
    for damage in ("name", "failures"):
        tree = ET.parse(tmp_path / "fail.xml")
        root = tree.getroot()
        target = root.find("testcase") if damage == "name" else root
        del target.attrib[damage]
        bad = tmp_path / f"bad-{damage}.xml"
        tree.write(bad, encoding="utf-8", xml_declaration=True)
        assert not schema.is_valid(str(bad)), damage


def test_the_same_experiment_again_fails_nothing(dirs, tmp_path):
    before, again, _ = dirs
    r = _gate(again, "--baseline", before, "--max-regression", "50%", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "FAIL" not in r.stdout and "0 failed" in r.stdout
    strict = _gate(again, "--baseline", before, "--max-regression", "50%", "--strict", "--json", cwd=tmp_path)
    doc = json.loads(strict.stdout)
    inconclusive = [c for c in doc["checks"] if c["outcome"] == "inconclusive"]
    assert not any(c["outcome"] == "fail" for c in doc["checks"])
    assert strict.returncode == (1 if inconclusive else 0) and doc["passed"] is (not inconclusive)


def test_epsilon_bounds_pass_and_fail_by_their_ci(dirs, tmp_path):
    before, _, _ = dirs
    tight = _gate(before, "-e", "exec:median:1.2x", "--json", cwd=tmp_path)
    assert tight.returncode == 1, tight.stderr
    (check,) = json.loads(tight.stdout)["checks"]
    assert check["outcome"] == "fail" and check["scenario"] == "read" and "bound ×1.2" in check["detail"]
    loose = _gate(before, "-e", "exec:median:1.5x", cwd=tmp_path)
    assert loose.returncode == 0 and "gate: passed: 1 passed, 0 failed, 0 inconclusive" in loose.stdout


@pytest.mark.parametrize("case", ["nothing", "not_results", "bad_regression", "regression_alone", "bad_epsilon",
                                  "baseline_not_results"])
def test_bad_input_is_one_line_exit_2(dirs, tmp_path, case):
    before, again, _ = dirs
    (tmp_path / "empty").mkdir()
    args = {"nothing": [before], "not_results": [tmp_path / "empty", "-e", "exec:max:2x"],
            "bad_regression": [before, "--baseline", again, "--max-regression", "lots"],
            "regression_alone": [before, "--max-regression", "5%"],
            "bad_epsilon": [before, "-e", "exec:max"],
            "baseline_not_results": [before, "--baseline", tmp_path / "empty"]}[case]
    r = _gate(*args, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xtalk: "), r.stderr
    assert not (tmp_path / "j.xml").exists()


def test_each_application_s_epsilon_is_a_check(tmp_path):
    """Several applications (cohabitation): each one's stored ε is gated; the application that
    a planted 1.6× perturbation pushes past its ×1.3 bound fails, the one left alone passes."""
    from xtalk.testing.synthetic import Application, write_application_results

    apps = [Application("aocs", "A", {"metric": "execution", "statistic": "median", "relative": 1.3}),
            Application("payload", "D", {"metric": "execution", "statistic": "median", "relative": 1.3})]
    root, _ = write_application_results(tmp_path / "res", apps, repetitions=3, jobs=120,
                                        perturb={("default", "aocs", "payload"): 1.6})
    r = _gate(root, "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    outcome = {c["application"]: c["outcome"] for c in json.loads(r.stdout)["checks"]}
    assert outcome == {"aocs": "fail", "payload": "pass"}, r.stdout
