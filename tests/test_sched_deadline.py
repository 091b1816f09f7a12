"""SCHED_DEADLINE admission control."""

from __future__ import annotations

import pytest

from xtalk.sched.deadline import Reservation, admit, reservation_from_wcet
from xtalk.sched.inputs import InputError


def test_default_limit_is_95_percent_per_cpu():
    rs = [Reservation("a", 5, 10, 10), Reservation("b", 4.5, 10, 10)]
    assert admit(rs).admitted and admit(rs).limit == 0.95
    rs.append(Reservation("c", 0.1, 10, 10))
    res = admit(rs)
    assert not res.admitted and "total bandwidth" in res.reason
    assert admit(rs, cpus=2).admitted
    assert admit(rs, rt_runtime_us=-1).admitted  # no RT throttling limit


def test_parameter_ordering():
    assert not admit([Reservation("a", 3, 2, 10)]).admitted  # runtime > deadline
    assert not admit([Reservation("a", 1, 12, 10)]).admitted  # deadline > period
    assert admit([Reservation("a", 1, 2, 10)]).admitted


def test_reservation_from_measured_maximum():
    r = reservation_from_wcet("aocs", 2.0, 10.0, margin=0.2)  # seed 000 §7.2.1
    assert (r.runtime, r.deadline, r.period) == (pytest.approx(2.4), 10.0, 10.0)
    with pytest.raises(InputError):
        reservation_from_wcet("x", 1, 10, margin=-0.1)
    with pytest.raises(InputError):
        admit([], cpus=0)
