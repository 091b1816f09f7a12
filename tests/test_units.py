import pytest

from xtalk import units

CACHES = {"l1d": 32 << 10, "l2": 1 << 20, "llc": 32 << 20}


@pytest.mark.parametrize("text,ns", [("10ms", 10_000_000), ("250us", 250_000), ("1.5s", 1_500_000_000),
                                     ("100ns", 100), (10, 10_000_000), (0.5, 500_000)])
def test_durations(text, ns):
    assert units.duration_ns(text, "f") == ns


@pytest.mark.parametrize("bad", ["ten ms", "-1ms", "0", True, "5 parsecs"])
def test_bad_durations_name_the_field(bad):
    with pytest.raises(ValueError, match=r"^victim\.period: "):
        units.duration_ns(bad, "victim.period")


@pytest.mark.parametrize("text,n", [("64KiB", 65536), ("2MiB", 2 << 20), ("1GB", 10**9), (4096, 4096),
                                    ("llc", 32 << 20), ("llc/4", 8 << 20), ("4*llc", 128 << 20), ("0.5*l2", 1 << 19),
                                    ("L1D", 32 << 10)])
def test_sizes(text, n):
    assert units.size_bytes(text, "f", CACHES) == n


def test_size_of_a_cache_the_target_lacks():
    with pytest.raises(ValueError, match="reports no L2 cache"):
        units.size_bytes("l2", "enemies[0].bytes", {"llc": 1 << 20})


def test_cpu_sets():
    online = [0, 1, 2, 3]
    assert units.cpu_set("last", "f", online) == [3]
    assert units.cpu_set("first", "f", online) == [0]
    assert units.cpu_set("others", "f", online, [3]) == [0, 1, 2]
    assert units.cpu_set("0-1,3", "f", online) == [0, 1, 3]
    assert units.cpu_set([2], "f", online) == [2]
    assert units.cpu_set(None, "f", online) is None


@pytest.mark.parametrize("bad,msg", [([7], "CPU 7 does not exist"), ("0,0", "listed twice"), ("x-y", "cannot read"),
                                     ([], "no CPU given")])
def test_bad_cpu_sets(bad, msg):
    with pytest.raises(ValueError, match=msg):
        units.cpu_set(bad, "victim.cpus", [0, 1, 2, 3])


def test_others_needs_a_free_cpu():
    with pytest.raises(ValueError, match="leaves no CPU"):
        units.cpu_set("others", "f", [0], [0])


def test_rates_print_with_the_prefix_that_fits():
    from xtalk.units import rate_text
    assert rate_text(2400, "wakeups") == "2.4 kwakeups/s"
    assert rate_text(1.25e9, "bytes") == "1.25 GB/s"
    assert rate_text(3.2e6, "accesses") == "3.2 Maccesses/s"
    assert rate_text(0.5, "forks") == "0.5 forks/s"
    assert rate_text(0, "ops") == "0 ops/s"
    assert rate_text(float("nan"), "ops") == "nan ops/s"
