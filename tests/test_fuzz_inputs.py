"""Mutated example files through `xtalk plan` (issue 13): 100 % valid plans or one-line
refusals with exit code 2, no traceback, no mutant over 10 s, peak memory under 1 GiB.
A seeded sample here (about a minute); bench/fuzz_inputs.py runs hundreds per file."""

import math
import tomllib

import pytest

from conftest import ROOT

from xtalk.testing import fuzz

PER_FILE = 16
SEED = 13


@pytest.mark.slow  # 16 mutants of every example file: make test-slow
def test_mutated_examples_plan_or_refuse_in_one_line(tmp_path):
    sources = fuzz.example_files(ROOT)
    campaigns = [s for s in sources if "[[application]]" in s.read_text()]
    assert len(sources) >= 10 and campaigns, "every example file, campaigns included"
    rep = fuzz.run(sources, PER_FILE, SEED, tmp_path / "work")
    print(rep.summary())
    assert len(rep.outcomes) == PER_FILE * len(sources)
    assert not rep.failures, "\n".join(f"{o.source}: {o.what}: {o.verdict}: {o.detail}" for o in rep.failures)
    assert rep.peak_rss < fuzz.MEMORY_LIMIT_BYTES
    assert max(o.seconds for o in rep.outcomes) < fuzz.TIME_LIMIT_S
    verdicts = {o.verdict for o in rep.outcomes}
    assert verdicts == {"plan", "refused"}, verdicts  # the sample reaches both ends


def test_mutants_are_repeatable_and_varied():
    src = ROOT / "examples" / "quickstart.toml"
    a, b = fuzz.mutants(src, 30, 1), fuzz.mutants(src, 30, 1)
    assert a == b
    assert fuzz.mutants(src, 30, 2) != a
    assert len({raw for _, raw in a}) > 20


def test_the_toml_writer_round_trips():
    data = {"a": 1, "b": [1.5, "x\"y\\\n", True], "c": {"d": -(2**63), "e": {"f": []}}, "g": [math.inf, -math.inf]}
    back = tomllib.loads(fuzz.dumps(data))
    assert back == data
    assert math.isnan(tomllib.loads(fuzz.dumps({"n": math.nan}))["n"])


def test_the_judge_flags_every_failure():
    ok = {"code": 0, "stderr": "", "stdout": "9 runs", "exception": None, "seconds": 0.1}
    assert fuzz.judge("f", "w", ok).verdict == "plan"
    assert fuzz.judge("f", "w", dict(ok, code=2, stderr="xtalk: victim.jobs: too many; lower it\n")).verdict == "refused"
    assert fuzz.judge("f", "w", dict(ok, code=2, stderr="xtalk: a\nb\n")).verdict == "not one line"
    assert fuzz.judge("f", "w", dict(ok, code=2, stderr="Error: x\n")).verdict == "not one line"
    assert fuzz.judge("f", "w", dict(ok, code=3, stderr="xtalk: agent\n")).verdict == "exit 3"
    assert fuzz.judge("f", "w", dict(ok, code=-1, exception="traceback: KeyError")).verdict == "traceback"
    assert fuzz.judge("f", "w", dict(ok, code=-1, exception="hang: over 10 s")).verdict == "hang"


def test_the_worker_reports_a_traceback_and_a_hang(tmp_path, monkeypatch):
    # The harness itself: an exception escaping `plan` and a `plan` that never returns are
    # caught and named, not taken for refusals.
    from xtalk import cli

    f = tmp_path / "x.toml"
    f.write_text((ROOT / "examples" / "quickstart.toml").read_text())

    def boom(*a, **k):
        raise KeyError("boom")

    monkeypatch.setattr("xtalk.runner.prepare", boom)
    cli._mount_optional()
    res = fuzz._plan_in_process(str(f))
    assert fuzz.judge("x", "w", res).verdict == "traceback" and "KeyError" in res["exception"]

    def slow(*a, **k):
        import time
        time.sleep(60)

    monkeypatch.setattr("xtalk.runner.prepare", slow)
    monkeypatch.setattr(fuzz, "TIME_LIMIT_S", 0.5)
    res = fuzz._plan_in_process(str(f))
    assert fuzz.judge("x", "w", res).verdict == "hang"
