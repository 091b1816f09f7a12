"""Task-set TOML loading, units and error messages."""

from __future__ import annotations

import pytest

from xtalk.sched.inputs import InputError, parse_duration_ms
from xtalk.sched.taskset import hyperperiod, load_taskset, rm_order, taskset_from_dict

T43 = "examples/models/seed001-table43.toml"


def test_units():
    assert parse_duration_ms("250us") == 0.25
    assert parse_duration_ms("2ms") == 2
    assert parse_duration_ms("1.5s") == 1500
    assert parse_duration_ms("800ns") == pytest.approx(0.0008)
    assert parse_duration_ms(3) == 3.0
    for bad in ("2 parsecs", "-1ms", True, [1]):
        with pytest.raises(InputError):
            parse_duration_ms(bad, "x")


def test_load_table43_with_units():
    system = load_taskset(T43)
    assert [p.name for p in system.partitions] == ["VM1", "VM2"]
    assert system.partitions[0].budget == 160 and system.partitions[0].period == 200
    t2 = system.tasks[1]
    assert (t2.wcet, t2.period, t2.d, t2.partition) == (500, 2000, 2000, "VM1")
    assert [t.name for t in system.tasks_of("VM2")] == ["T3", "T4"]


def test_optional_fields():
    s = taskset_from_dict({
        "system": {"scheduler": "dm", "overhead": "385us"},
        "task": [{"name": "a", "wcet": "1ms", "period": 10, "deadline": 5, "priority": 2,
                  "jitter": "100us", "blocking": 0.5, "measured": "pi4"}],
    })
    t = s.tasks[0]
    assert (t.d, t.priority, t.jitter, t.blocking, t.measured) == (5, 2, 0.1, 0.5, "pi4")
    assert s.scheduler == "dm" and s.overhead_ms == pytest.approx(0.385)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"task": [{"name": "a", "wcett": 1, "period": 4}]}, "task[0].wcett"),
        ({"task": [{"name": "a", "wcet": 1}]}, "task[0].period"),
        ({"task": [{"name": "a", "wcet": 1, "period": 4}, {"name": "b", "wcet": "1 parsec", "period": 4}]}, "task[1].wcet"),
        ({"task": [{"name": "a", "wcet": 5, "period": 4}]}, "task[0].wcet"),
        ({"task": [{"name": "a", "wcet": 1, "period": 0}]}, "task[0].period"),
        ({"task": [{"name": "a", "wcet": 1, "period": 4, "priority": "high"}]}, "task[0].priority"),
        ({"task": [{"name": "a", "wcet": 1, "period": 4}, {"name": "a", "wcet": 1, "period": 4}]}, "task[1].name"),
        ({"task": [{"wcet": 1, "period": 4}]}, "task[0].name"),
        ({"task": []}, "task"),
        ({"tasks": []}, "file.tasks"),
        ({"system": {"scheduler": "lottery"}, "task": [{"name": "a", "wcet": 1, "period": 4}]}, "system.scheduler"),
        ({"partition": [{"name": "P", "budget": 5, "period": 4}], "task": [{"name": "a", "wcet": 1, "period": 4}]}, "partition[0].budget"),
        ({"partition": [{"name": "P", "budget": 1, "period": 4}],
          "task": [{"name": "a", "wcet": 1, "period": 4, "partition": "Q"}]}, "task[0].partition"),
    ],
)
def test_errors_name_the_field(data, field):
    with pytest.raises(InputError) as exc:
        taskset_from_dict(data)
    assert exc.value.field == field
    assert exc.value.fix  # every error says how to fix it


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_taskset(tmp_path / "none.toml")
    p = tmp_path / "bad.toml"
    p.write_text("[[task]]\nname = \n")
    with pytest.raises(InputError, match="invalid TOML"):
        load_taskset(p)


def test_hyperperiod_and_order():
    assert hyperperiod([4, 5, 9, 18]) == 180
    assert hyperperiod([0.1, 0.25]) == pytest.approx(0.5)
    assert hyperperiod([1500, 2000]) == 6000
    s = load_taskset(T43)
    assert [t.name for t in rm_order(s.tasks)] == ["T3", "T1", "T2", "T4"]
