"""The per-application execution-time table of the summary (several applications and
configurations side by side: seed 000 §5.3.1's shared against duplicated files)."""

import pandas as pd

from xtalk.report.summary import application_times


def _table(rows):
    return pd.DataFrame(rows, columns=["configuration", "application", "scenario", "median_exec_ms"])


def test_one_column_per_configuration_alone_first_then_by_company():
    t = _table([("shared", "i1", "i1 · all", 0.0020), ("shared", "i1", "i1 · alone:i1", 0.0071),
                ("shared", "i1", "i1 · first:2", 0.0032), ("dup", "i1", "i1 · first:2", 0.0028),
                ("dup", "i1", "i1 · all", 0.0015), ("dup", "i1", "i1 · alone:i1", 0.0047),
                ("shared", "i2", "i2 · all", 0.0016), ("dup", "i2", "i2 · all", 0.0036)])
    out = application_times(t)
    assert list(out.columns) == ["application", "scenario", "shared median exec µs", "dup median exec µs"]
    assert list(zip(out.application, out.scenario)) == [("i1", "alone:i1"), ("i1", "first:2"), ("i1", "all"),
                                                        ("i2", "all")]
    assert out.loc[0, "shared median exec µs"] == 7.1 and out.loc[0, "dup median exec µs"] == 4.7
    assert out.loc[3, "dup median exec µs"] == 3.6


def test_milliseconds_kept_when_a_step_reaches_one():
    t = _table([("a", "x", "x · alone:x", 1.5), ("b", "x", "x · alone:x", 2.25)])
    out = application_times(t)
    assert list(out.columns) == ["application", "scenario", "a median exec ms", "b median exec ms"]
    assert out.iloc[0, 3] == 2.25


def test_none_for_one_configuration_or_one_victim():
    assert application_times(_table([("a", "x", "x · all", 1.0), ("a", "y", "y · all", 1.0)])) is None
    one_victim = pd.DataFrame({"configuration": ["a", "b"], "scenario": ["solo", "solo"], "median_exec_ms": [1, 2]})
    assert application_times(one_victim) is None
