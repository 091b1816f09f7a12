"""Every bad option value of `worst`, `sched reserve`, `sched analyze` and `overheads` is one
line and exit 2 (issue 31 item 5): no traceback, no framed multi-line block from the command
line parser, and no malformed spec silently ignored. Nothing here starts an agent: each is
refused before anything runs."""

from __future__ import annotations

import pytest

from conftest import xtalk
from xtalk.testing.synthetic import Scenario, write_results

TASKS = "examples/models/taskset-rm.toml"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write_results(tmp_path_factory.mktemp("r") / "res", [Scenario("solo"), Scenario("read", slowdown=1.5)],
                         repetitions=2, jobs=40)


CASES = [
    # the parser's own errors (wrong type, unknown option, missing value): one line now
    (("worst", "--budget", "1m", "--seed", "x"), "xtalk worst: Invalid value for '--seed'"),
    (("worst", "--budget", "1m", "--seed", "-1"), "'--seed'"),
    (("worst", "--budget", "1m", "--bogus"), "No such option: --bogus"),
    (("worst", "--budget"), "'--budget' requires an argument"),
    (("sched", "reserve", "--budget", "1ms", "--period", "10ms", "--tid", "abc", "--", "true"), "'--tid'"),
    (("sched", "reserve", "--budget", "1ms", "--period", "1e999ms", "--", "true"), "--period: '1e999ms' is not a finite"),
    (("sched", "reserve", "--budget", "1ms", "--period", "10ms", "--tid", "1", "--bogus", "--", "true"),
     "'--bogus' is not an option of `xtalk sched reserve`"),
    (("sched", "analyze", TASKS, "--scheduler", "banana"), "--scheduler: unknown scheduler"),
    (("sched", "analyze", TASKS, "--bogus"), "No such option: --bogus"),
    (("overheads", "{results}", "--bogus"), "No such option: --bogus"),
    (("overheads",), "Missing argument 'results'"),
    # malformed specs that were silently ignored
    (("sched", "analyze", TASKS, "--statistic", "banana"), "--statistic: unknown statistic 'banana'"),
    (("sched", "analyze", TASKS, "--overheads-stat", "banana"), "--overheads-stat: unknown statistic 'banana'"),
    (("sched", "analyze", TASKS, "--wcet-from", "{results}:"), "--wcet-from: '{results}:' names no scenario"),
    (("sched", "analyze", TASKS, "--wcet-from", "{results}"), "gives no scenario and no task names one"),
    (("sched", "analyze", TASKS, "--overheads-from", "{results}:"), "--overheads-from: '{results}:' names no scenario"),
]


@pytest.mark.parametrize("args, needle", CASES, ids=[" ".join(a[:4]) for a, _ in CASES])
def test_a_bad_option_is_one_line_and_exit_2(results, args, needle):
    r = xtalk(*(a.format(results=results) for a in args), timeout=60)
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, err, r.stdout[-400:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "╭" not in err, err
    assert needle.format(results=results) in err, err


def test_a_well_formed_wcet_spec_still_measures(results):
    r = xtalk("sched", "analyze", TASKS, "--wcet-from", f"{results}:read", "--statistic", "p99")
    assert r.returncode == 0, r.stderr
    assert "the measured p99" in r.stdout
