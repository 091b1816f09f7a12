"""How long a run's processes take to set up their buffers (campaign/estimate.py): all at
once, so bounded by the busiest CPU (its processes one after another) and by all of them at
the machine's aggregate rate; the same rule for `xtalk run`, `characterize` and campaigns."""

from __future__ import annotations

import pytest

from conftest import small_plan
from xtalk.campaign.estimate import (AGGREGATE_TOUCH_BYTES_PER_S, TOUCH_BYTES_PER_S, buffer_bytes, run_seconds,
                                     solo_touch_seconds, touch_seconds)
from xtalk.plan import Plan

GB = 1_200_000_000


def _plan(n_read: int, each: int = GB, victim_bytes: int = 4096, same_cpu: bool = False) -> Plan:
    """A victim on CPU 99 and `n_read` read enemies, one per CPU (or all on CPU 0)."""
    doc = small_plan(cpus=[99])
    doc["victim"]["body"] = {"kind": "sum", "bytes": victim_bytes}
    doc["enemies"] = [{"name": f"read{i}", "load": {"kind": "read", "bytes": each},
                       "placement": {"cpus": [0 if same_cpu else i]}} for i in range(n_read)]
    return Plan.model_validate(doc)


def test_one_big_buffer_costs_one_process_rate():
    assert touch_seconds(_plan(1)) == pytest.approx(GB / TOUCH_BYTES_PER_S)


def test_many_copies_cost_the_aggregate_rate_not_the_sum_at_one_process_rate():
    fifteen = touch_seconds(_plan(15))
    assert fifteen == pytest.approx(buffer_bytes(_plan(15)) / AGGREGATE_TOUCH_BYTES_PER_S)
    assert touch_seconds(_plan(1)) < fifteen < 15 * GB / TOUCH_BYTES_PER_S


def test_copies_pinned_on_one_cpu_set_up_one_after_another():
    assert touch_seconds(_plan(4, same_cpu=True)) == pytest.approx(4 * GB / TOUCH_BYTES_PER_S)
    assert touch_seconds(_plan(4)) < touch_seconds(_plan(4, same_cpu=True))


def test_a_random_chase_links_slower_than_a_linear_one_and_a_read():
    def chase(order):
        doc = small_plan(cpus=[1])
        doc["enemies"] = [{"name": "c", "load": {"kind": "chase", "elements": GB // 64, "element_bytes": 64, "order": order},
                           "placement": {"cpus": [0]}}]
        return touch_seconds(Plan.model_validate(doc))
    assert chase("random") > chase("linear") > touch_seconds(_plan(1))


def test_a_chase_enemy_counts_its_catalog_footprint():
    doc = small_plan()
    doc["enemies"] = [{"name": "c", "load": {"kind": "chase", "elements": 1 << 20, "element_bytes": 64},
                       "placement": {"cpus": [0]}}]
    assert buffer_bytes(Plan.model_validate(doc)) >= 64 << 20


def test_a_solo_pass_touches_only_the_measured_processes():
    p = _plan(15, victim_bytes=GB)
    assert solo_touch_seconds(p) == pytest.approx(GB / TOUCH_BYTES_PER_S)
    assert run_seconds(p) > run_seconds(_plan(0, victim_bytes=GB))


def test_a_traced_run_pays_the_hosts_trace_analysis_in_proportion_to_its_length():
    from xtalk.campaign.estimate import TRACE_S_PER_S, measured_seconds

    plain = _plan(0)
    traced = Plan.model_validate({**plain.model_dump(mode="json"), "trace": {"events": ["sched:sched_switch"]}})
    assert run_seconds(traced) - run_seconds(plain) == pytest.approx(TRACE_S_PER_S * measured_seconds(plain))
