"""Verdict words are made in one place, analysis/verdict.py (its vocabulary kept in
analysis/words.py, which it re-exports): each rule fires where it should
on planted inputs, the words the reports print belong to its vocabulary, and no renderer
(report/, intrusiveness.py) spells a verdict word itself. Pure: no agent, no machine."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from xtalk.analysis import verdict as vd
from xtalk.results import tables as tb
from xtalk.report.containment import verdicts as containment_verdicts
from xtalk.testing.synthetic import Scenario, write_results

SRC = Path(__file__).resolve().parents[1] / "src" / "xtalk"
NAN = math.nan


def _vocabulary() -> set[str]:
    """Every string constant verdict.py and words.py define at module level (the vocabulary)."""
    words = set()
    body = [n for f in ("verdict.py", "words.py") for n in ast.parse((SRC / "analysis" / f).read_text()).body]
    for node in body:
        if isinstance(node, ast.Assign):
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            words |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return words


VOCABULARY = _vocabulary()


@pytest.mark.parametrize("lo, hi, floor, word", [
    (NAN, NAN, 0.02, vd.NO_CI),
    (1.2, 1.4, 0.6, vd.TOO_NOISY),
    (1.10, 1.20, 0.05, vd.SLOWED_DOWN),
    (0.80, 0.90, 0.05, vd.SPED_UP),
    (0.98, 1.02, 0.05, vd.WITHIN_NOISE),
    (1.01, 1.10, 0.05, vd.INCONCLUSIVE),
    (1.001, 1.01, NAN, vd.SLOWED_DOWN),  # no floor: any CI above 1
])
def test_interference_rule(lo, hi, floor, word):
    assert vd.interference(lo, hi, floor) == word


@pytest.mark.parametrize("eps, serious, missed, words, status", [
    ([vd.VIOLATED, vd.HOLDS], 0, 0, [], vd.EPS_VIOLATED),
    ([vd.HOLDS], 2, 5, [], vd.SERIOUS_MISSES),
    ([], 0, 1, [vd.SLOWED_DOWN], vd.DEADLINE_MISSES),
    ([vd.INCONCLUSIVE], 0, 0, [vd.SLOWED_DOWN], vd.EPS_INCONCLUSIVE),
    ([vd.HOLDS], 0, 0, [vd.WITHIN_NOISE, vd.SLOWED_DOWN], vd.EPS_HOLDS_SLOWED),
    ([], 0, 0, [vd.SLOWED_DOWN], vd.SLOWED_DOWN),
    ([vd.HOLDS], 0, 0, [vd.WITHIN_NOISE], vd.EPS_HOLDS),
    ([], 0, 0, [vd.WITHIN_NOISE, vd.INCONCLUSIVE], vd.NOTHING_BEYOND_NOISE),
    ([], 0, 0, [vd.INCONCLUSIVE], vd.OK),
])
def test_status_rule_worst_first(eps, serious, missed, words, status):
    assert vd.status(eps, serious, missed, words) == status


def test_kind_statuses_goal_and_containment_rules():
    assert vd.task_status(vd.EPS_VIOLATED, 3, True) == vd.EPS_VIOLATED + vd.ABOVE_RTA_SUFFIX
    assert vd.task_status(vd.OK, 2, False) == vd.DEADLINE_MISSES
    assert vd.task_status(vd.EPS_INCONCLUSIVE, 0, False) == vd.EPS_INCONCLUSIVE
    assert vd.task_status(vd.EPS_HOLDS_SLOWED, 0, False) == vd.EPS_HOLDS
    assert vd.task_status(vd.SLOWED_DOWN, 0, True) == vd.ABOVE_RTA
    assert vd.latency_status(vd.SLOWED_DOWN, vd.SLOWED_DOWN, False) == vd.LATENCY_HIGHER
    assert vd.latency_status(vd.OK, vd.WITHIN_NOISE, False) == vd.LATENCY_WITHIN_NOISE
    assert vd.latency_status(vd.OK, None, True) == vd.OK
    assert vd.latency_status(vd.SERIOUS_MISSES, vd.SLOWED_DOWN, False) == vd.SERIOUS_MISSES
    assert vd.goal(0.99, 1.005, 1.01) == vd.MET
    assert vd.goal(1.02, 1.05, 1.01) == vd.MISSED
    assert vd.goal(0.95, 1.10, 1.01) == vd.INCONCLUSIVE
    assert vd.containment(True, True, 3, 0) == vd.PROPAGATED
    assert vd.containment(False, True, 3, 0) == vd.SLOWED
    assert vd.containment(False, False, 0, 2) == vd.REFUSED
    assert vd.containment(False, False, 2, 1) == vd.CONTAINED
    assert vd.worst_epsilon([vd.HOLDS, vd.INCONCLUSIVE, vd.VIOLATED, vd.VIOLATED]) == 2
    assert vd.severity(vd.EPS_VIOLATED) == "bad" and vd.severity(vd.GUARD) == "warn" and vd.severity(vd.OK) == ""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = write_results(
        tmp_path_factory.mktemp("words") / "res",
        [Scenario("solo"), Scenario("solo-b"), Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.5)],
        repetitions=3, jobs=200, miss_jobs=(10,), serious_jobs=(20,))
    return tb.load(root)


def test_the_report_prints_only_verdict_words(data):
    v = tb.verdicts(data, ["exec:median:1.2x", "exec:median:2x"])
    assert set(v["status"]) <= set(vd.STATUSES), set(v["status"])
    for col in ("exec_interference", "response_interference"):
        assert set(v[col].dropna()) <= set(vd.INTERFERENCE)
    pi = v.set_index("scenario").loc["pi"]
    assert pi["status"] == vd.EPS_VIOLATED and pi["exec_interference"] == vd.SLOWED_DOWN
    assert f"{pi['status']} — " in pi["verdict"]
    e = tb.epsilon_table(data, ["exec:median:1.2x"])
    assert set(e["verdict"]) <= set(vd.VERDICTS)


def test_containment_prints_only_verdict_words():
    runs = pd.DataFrame({"scenario": ["solo", "a", "b"], "status": ["completed", "completed", "failed"],
                         "reason": [None, None, "enemy x: setup failed"], "enemies": [[], [], []]})
    jobs = pd.DataFrame({"run_id": ["s", "a"] * 50, "scenario": ["solo", "a"] * 50, "missed": False,
                         "response_ns": 1_000_000})
    v = containment_verdicts(runs, jobs).set_index("scenario")
    assert v.loc["a", "verdict"] == vd.CONTAINED and v.loc["b", "verdict"] == vd.REFUSED
    assert set(v["verdict"]) <= set(vd.CONTAINMENT)


#: String constants in renderers that equal a verdict word but mean something else.
NOT_WORDS = {"missed": "the job table's missed column", "refused": "the pWCET table's refused column",
             "ok": "verdicts.json's count of runs that completed (runs.ok)",
             "reference": "verdicts.json's field marking the reference's own slowdown (1×)"}


def test_no_renderer_spells_a_verdict_word():
    files = sorted((SRC / "report").glob("*.py")) + [SRC / "intrusiveness.py"]
    found = []
    for f in files:
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in VOCABULARY - set(NOT_WORDS):
                found.append(f"{f.relative_to(SRC)}:{n.lineno}: {n.value!r}")
    assert not found, "verdict words made outside analysis/verdict.py:\n" + "\n".join(found)
    assert {"slowed down", "ε VIOLATED", "propagated", "met"} <= VOCABULARY  # the scan reads the real vocabulary
