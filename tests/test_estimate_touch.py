"""How long a run's processes take to touch their buffers (campaign/estimate.py): all at once,
so bounded by the largest buffer at one process's rate and by all of them at the machine's
aggregate rate; the same rule for `xtalk run`, `characterize` and campaigns."""

from __future__ import annotations

import pytest

from conftest import small_plan
from xtalk.campaign.estimate import (AGGREGATE_TOUCH_BYTES_PER_S, TOUCH_BYTES_PER_S, buffer_bytes, run_seconds,
                                     solo_touch_seconds, touch_seconds)
from xtalk.plan import Plan

GB = 1_200_000_000


def _plan(n_read: int, each: int = GB, victim_bytes: int = 4096) -> Plan:
    doc = small_plan()
    doc["victim"]["body"] = {"kind": "chase", "bytes": victim_bytes}
    doc["enemies"] = [{"name": f"read{i}", "load": {"kind": "read", "bytes": each}, "placement": {"cpus": [0]}}
                      for i in range(n_read)]
    return Plan.model_validate(doc)


def test_one_big_buffer_costs_one_process_rate():
    assert touch_seconds(_plan(1)) == pytest.approx(GB / TOUCH_BYTES_PER_S)


def test_many_copies_cost_the_aggregate_rate_not_the_sum_at_one_process_rate():
    fifteen = touch_seconds(_plan(15))
    assert fifteen == pytest.approx(buffer_bytes(_plan(15)) / AGGREGATE_TOUCH_BYTES_PER_S)
    assert touch_seconds(_plan(1)) < fifteen < 15 * GB / TOUCH_BYTES_PER_S


def test_a_chase_enemy_counts_its_catalog_footprint():
    doc = small_plan()
    doc["enemies"] = [{"name": "c", "load": {"kind": "chase", "elements": 1 << 20, "element_bytes": 64},
                       "placement": {"cpus": [0]}}]
    assert buffer_bytes(Plan.model_validate(doc)) >= 64 << 20


def test_a_solo_pass_touches_only_the_measured_processes():
    p = _plan(15, victim_bytes=GB)
    assert solo_touch_seconds(p) == pytest.approx(GB / TOUCH_BYTES_PER_S)
    assert run_seconds(p) > run_seconds(_plan(0, victim_bytes=GB))
