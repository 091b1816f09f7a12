"""Platform TOML loading and its error messages; storage semantics."""

from __future__ import annotations

import pytest

from xtalk.model import storage as st
from xtalk.model.platform import CacheStorage, DramBank, load_platform, platform_from_dict
from xtalk.sched.inputs import InputError


def _base() -> dict:
    return {
        "platform": {"cores": 2},
        "transport": [{"name": "bus"}],
        "storage": [{"kind": "cache", "name": "L2", "sets": 4, "ways": 2, "line_bytes": 32}],
        "schedule": {"period": 10},
        "task": [
            {"name": "A", "core": 0, "path": ["bus", "L2"], "segment": [{"duration": 10, "max_requests": 1}]},
            {"name": "B", "core": 1, "path": ["bus", "L2"], "segment": [{"duration": 10, "max_requests": 1}]},
        ],
    }


def test_valid_platform_loads():
    p = platform_from_dict(_base())
    assert p.components == ("bus", "L2")


def test_unknown_field_is_named():
    d = _base()
    d["task"][0]["segment"][0]["max_request"] = 3
    with pytest.raises(InputError, match=r"task\[0\]\.segment\[0\]\.max_request: unknown field"):
        platform_from_dict(d)


def test_negative_requests_are_named():
    d = _base()
    d["task"][1]["segment"][0]["max_requests"] = -1
    with pytest.raises(InputError, match=r"task\[1\]\.segment\[0\]\.max_requests"):
        platform_from_dict(d)


@pytest.mark.parametrize(
    "mutate, text",
    [
        (lambda d: d["task"][0].update(path=["bus", "L3"]), "unknown component 'L3'"),
        (lambda d: d["task"][1].update(core=0), "already hosts a task"),
        (lambda d: d["task"][0].update(core=5), "platform has 2 cores"),
        (lambda d: d["task"][0]["segment"].append({"duration": 5, "max_requests": 0}), "sum to 15"),
        (lambda d: d["task"][0]["segment"][0].update(addresses=[1, 2]), "addresses has 2 entries"),
        (lambda d: d["task"][0].update(path=["L2", "bus"]), "must come before storage"),
    ],
)
def test_semantic_errors(mutate, text):
    d = _base()
    mutate(d)
    with pytest.raises(InputError, match=text):
        platform_from_dict(d)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_platform(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[platform\ncores=2")
    with pytest.raises(InputError, match="invalid TOML"):
        load_platform(bad)


def test_lru_and_fifo_sets():
    lru = CacheStorage(name="c", sets=1, ways=2, line_bytes=1, policy="lru")
    fifo = CacheStorage(name="c", sets=1, ways=2, line_bytes=1, policy="fifo")
    s = None
    for tag in (1, 2, 1, 3):  # LRU keeps 1 (recently used), evicts 2
        s = st.update(lru, s, tag)
    assert s == (3, 1)
    s = None
    for tag in (1, 2, 1, 3):  # FIFO evicts the oldest insertion, 1
        s = st.update(fifo, s, tag)
    assert s == (3, 2)


def test_interference_rules():
    c = CacheStorage(name="c", sets=1, ways=1, line_bytes=1)
    assert st.is_interference(c, (2,), (1,), 1)  # alone: hit; actually: evicted
    assert not st.is_interference(c, (2,), (3,), 1)  # alone it would miss as well
    cs = CacheStorage(name="c", sets=1, ways=1, line_bytes=1, interference="state")
    assert st.is_interference(cs, (2,), (3,), 1)  # the seed's literal rule: states differ
    d = DramBank(name="b", row_bytes=1024)
    assert st.locate(d, 5000) == (0, 4)
    assert st.locate(DramBank(name="b", row_bytes=1024, banks=4), 5000) == (0, 4)
    assert st.locate(DramBank(name="b", row_bytes=1024, banks=4), 6000) == (1, 5)
    assert st.is_interference(d, 3, 4, 4) and not st.is_interference(d, 4, 4, 4)
