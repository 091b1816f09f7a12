"""Tests for xtalk.analysis.spikes: detection, periods (big every 10), attribution."""

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import spikes as S

T0 = 10**12


def _job_table(n, period, exec_ns, run_id="r0", cpu=2):
    job = np.arange(n)
    release = T0 + job * period
    start = release + 20_000
    exec_ns = np.asarray(exec_ns, dtype=np.int64)
    return pd.DataFrame({
        "run_id": run_id, "job": job, "warmup": job < 2,
        "release_ns": release, "wakeup_ns": release + 15_000, "start_ns": start,
        "end_ns": start + exec_ns, "exec_ns": exec_ns, "period_ns": period,
        "cpu_start": cpu, "cpu_end": cpu,
    })


def _planted(n, period, disturb_ns, rng, big_every=10, phase_ns=7_300_000_000):
    """Seed 002 Fig. 6-7: an OS disturbance every ``disturb_ns``, a bigger one every 10th."""
    exec_ns = 1_000_000 + rng.normal(0, 10_000, n)
    times = np.arange(phase_ns, n * period, disturb_ns)
    jobs_hit = (times // period).astype(np.int64)
    big = np.arange(times.size) % big_every == big_every - 1
    exec_ns[jobs_hit] += np.where(big, 800_000, 200_000) + rng.normal(0, 5_000, times.size)
    return exec_ns, jobs_hit, big


def test_robust_threshold_and_mad_zero_fallback():
    med, scale, thr = S.robust_threshold([10, 12, 8, 10, 11, 9, 100], k=5)
    assert med == 10 and scale == pytest.approx(1.4826) and thr == pytest.approx(10 + 5 * 1.4826)
    med, scale, thr = S.robust_threshold([5, 5, 5, 5, 5, 5, 50], k=3)
    assert scale > 0 and thr < 50  # MAD = 0: mean-absolute-deviation fallback still sees the 50
    assert S.robust_threshold([7, 7, 7])[1] == 0.0


def _numpy_threshold(values, k=5.0):
    """robust_threshold as np.median gives it on the values' floats (the former code)."""
    v = np.asarray(values, dtype=float)
    med = float(np.median(v))
    dev = np.abs(v - med)
    scale = 1.4826 * float(np.median(dev))
    if scale == 0.0:
        scale = 1.2533 * float(dev.mean())
    return med, scale, med + k * scale


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 11, 999, 1000, 100_000, 100_001])
def test_counted_median_and_mad_are_numpys_bit_for_bit(n):
    rng = np.random.default_rng(n)
    cases = [
        260_000 + rng.integers(-5_000, 5_000, n),  # a run's execution times
        rng.integers(0, 4, n),  # ties everywhere: every middle value repeated
        np.full(n, 123_457),  # all equal: MAD 0, the mean-deviation fallback
        -(10**9) + rng.integers(0, 3 * n + 7, n),  # negative, the widest span counted
        np.where(rng.random(n) < 0.6, 5, rng.integers(0, 9, n)),  # a majority of one value
        (1 << 49) - rng.integers(0, 50, n),  # large values, halves and quarters still exact
        np.sort(rng.integers(0, 1000, n))[::-1],  # sorted, descending
    ]
    for x in cases:
        for arr in (x.astype(np.int64), x.astype(np.int32) if abs(x).max() < 2**31 else x, x.astype(float)):
            assert S.robust_threshold(arr, k=5) == _numpy_threshold(arr, k=5)
        got = S.median_mad_of_ints(x.astype(np.int64))
        assert (got is None) == (x.max() - x.min() > 4 * n + 1024)  # counted where the span allows
        v = x.astype(float)
        med = np.median(v)
        assert got is None or got == (med, np.median(np.abs(v - med)))


def test_counted_median_leaves_wide_spans_and_huge_values_to_numpy():
    x = np.array([0, 5, 10**7, 3], dtype=np.int64)  # span ≫ 4n + 1024
    assert S.median_mad_of_ints(x) is None
    assert S.median_mad_of_ints(np.array([1 << 51, (1 << 51) + 1])) is None
    assert S.median_mad_of_ints(np.array([], dtype=np.int64)) is None
    for arr in (x, np.array([1 << 51, (1 << 51) + 1, (1 << 51) + 7])):
        assert S.robust_threshold(arr) == _numpy_threshold(arr)
    with pytest.raises(ValueError, match="no finite value"):
        S.robust_threshold(np.array([], dtype=np.int64))
    # Floats (NaN dropped) keep np.median's path.
    assert S.robust_threshold([1.0, np.nan, 3.0, 2.0]) == _numpy_threshold([1.0, 3.0, 2.0])
    # uint8 values near the type's ends (x − min done in 64 bits).
    u = np.array([0, 255, 255, 1, 254], dtype=np.uint8)
    assert S.robust_threshold(u) == _numpy_threshold(u)


def test_detect_spikes_finds_planted_spikes_only():
    rng = np.random.default_rng(0)
    exec_ns, hit, _ = _planted(20_000, 50_000_000, 31_250_000_000, rng)
    sp = S.detect_spikes(_job_table(20_000, 50_000_000, exec_ns))
    assert len(sp) == 20_000 - 2  # warm-up dropped
    found = set(sp.loc[sp["is_spike"], "job"])
    assert found == set(hit)
    with pytest.raises(ValueError, match="k"):
        S.detect_spikes(_job_table(10, 1, np.ones(10)), k=0)


@pytest.mark.parametrize("period", [50_000_000, 125_000_000])
def test_periods_with_big_spike_every_ten(period):
    # "20 peaks in 625 seconds" whatever the task period: one every 31.25 s.
    disturb = 31_250_000_000
    rng = np.random.default_rng(1)
    n = int(40 * disturb / period)
    exec_ns, hit, big = _planted(n, period, disturb, rng)
    per = S.spike_periods(S.detect_spikes(_job_table(n, period, exec_ns))).set_index("cls")
    assert set(per.index) == {"all", "big", "small"}
    assert per.loc["all", "n_spikes"] == hit.size and per.loc["big", "n_spikes"] == big.sum()
    assert per.loc["all", "periodic"] and per.loc["small", "periodic"]
    assert per.loc["all", "period_ns"] == pytest.approx(disturb, rel=0.002)
    assert per.loc["all", "period_jobs"] == pytest.approx(disturb / period, rel=0.002)
    assert per.loc["all", "regularity"] > 0.99 and per.loc["all", "coverage"] == 1.0
    assert per.loc["all", "confidence"] >= 0.99
    assert per.loc["small", "period_ns"] == pytest.approx(disturb, rel=0.002)
    # Only 4 big spikes: their spacing is exact (every 10th), its significance borderline
    # (test_analysis_periodicity has the case with enough of them).
    assert per.loc["big", "best_period_ns"] == pytest.approx(10 * disturb, rel=0.002)
    assert per.loc["big", "every_n"] == 10 and per.loc["big", "small_between"] == 9
    assert per.loc["big", "on_lattice"] == 1.0 and per.loc["big", "p_value"] <= 0.02


def test_period_survives_missed_spikes_and_non_integer_jobs():
    rng = np.random.default_rng(2)
    period = 125_000_000
    disturb = 10_300_000_000  # 82.4 jobs: spikes land on job multiples of 82 or 83
    n = 8_000
    exec_ns, hit, _ = _planted(n, period, disturb, rng, big_every=10**9)
    exec_ns[hit[[3, 7, 8]]] = 1_000_000  # three disturbances missed by the detector
    per = S.spike_periods(S.detect_spikes(_job_table(n, period, exec_ns))).set_index("cls")
    assert list(per.index) == ["all"]  # one amplitude class
    assert per.loc["all", "periodic"]
    assert per.loc["all", "period_jobs"] == pytest.approx(82.4, abs=0.05)
    assert per.loc["all", "period_ns"] == pytest.approx(disturb, rel=0.001)
    assert per.loc["all", "coverage"] == pytest.approx((hit.size - 3) / hit.size, abs=0.02)


def _culprits(jobs, spike_jobs, rng):
    """Background activity everywhere plus a planted culprit in every spike job."""
    rows = []
    start = jobs["start_ns"].to_numpy()
    end = jobs["end_ns"].to_numpy()
    for j in range(len(jobs)):
        if rng.random() < 0.3:  # routine kernel worker on the victim's CPU
            rows.append((2, start[j] + 100_000, start[j] + 150_000, "process", "kworker/2:1", 40))
        if rng.random() < 0.1:
            rows.append((2, start[j] + 300_000, start[j] + 310_000, "irq", "eth0", -1))
        if rng.random() < 0.5:  # busy neighbour on another core
            rows.append((3, start[j], end[j], "process", "stress-ng", 900))
    for j in spike_jobs:
        rows.append((2, start[j] + 200_000, start[j] + 700_000, "process", "systemd-timesyncd", 321))
        rows.append((2, start[j] + 700_000, start[j] + 720_000, "softirq", "NET_RX", -1))
    # One unlucky coincidence: a single cron run during one spike only.
    j = spike_jobs[0]
    rows.append((2, start[j] + 750_000, start[j] + 760_000, "process", "cron", 77))
    # The idle task covers everything and must be ignored by default.
    rows.append((2, start[0] - 1, end[-1] + 1, "process", "swapper/2", 0))
    return pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns", "kind", "name", "pid"])


def test_attribution_ranks_planted_culprit_first():
    rng = np.random.default_rng(3)
    period = 50_000_000
    n = 6_000
    exec_ns, hit, _ = _planted(n, period, 1_000_000_000, rng)  # one every 20 jobs
    jobs = _job_table(n, period, exec_ns)
    cul = _culprits(jobs, hit, rng)
    att = S.attribute_spikes(jobs, cul)
    assert att.cpu_scope == "victim" and att.n_spikes == hit.size
    top = att.ranking.iloc[0]
    assert top["name"] == "systemd-timesyncd" and top["rank"] == 1
    assert top["frac_spikes"] == 1.0 and top["normal_with"] == 0
    names = list(att.ranking["name"])
    assert "swapper/2" not in names and "stress-ng" not in names  # idle dropped, other CPU
    assert names.index("cron") > names.index("NET_RX")  # one coincidence ranks below
    kw = att.ranking.set_index("name").loc["kworker/2:1"]
    assert kw["lift"] == pytest.approx(1.0, abs=0.35) and kw["fisher_p"] > 0.01
    # Per spike: the planted culprit has the most overlap (500 µs) and rank 1.
    first = att.per_spike[att.per_spike["rank"] == 1]
    assert (first["name"] == "systemd-timesyncd").all()
    assert (first["overlap_ns"] == 500_000).all()
    assert len(first) == hit.size


def test_attribution_all_cpus_and_lookback():
    rng = np.random.default_rng(4)
    period = 50_000_000
    n = 2_000
    exec_ns, hit, _ = _planted(n, period, 1_000_000_000, rng)
    jobs = _job_table(n, period, exec_ns)
    start = jobs["start_ns"].to_numpy()
    # The culprit runs just *before* each spike job (seed 000 §5.3.2) on another core.
    cul = pd.DataFrame({
        "cpu": 0, "start_ns": start[hit] - 5_000_000, "end_ns": start[hit] - 1_000_000,
        "kind": "process", "name": "ntpd", "pid": 55,
    })
    none = S.attribute_spikes(jobs, cul, cpus="all")
    assert none.ranking.empty
    att = S.attribute_spikes(jobs, cul, cpus="all", lookback_ns=period)
    assert att.cpu_scope == "all"
    assert att.ranking.iloc[0]["name"] == "ntpd" and att.ranking.iloc[0]["spikes_with"] == hit.size
    assert S.attribute_spikes(jobs, cul, lookback_ns=period).ranking.empty  # victim CPU only


def test_attribution_migrated_job_and_errors():
    jobs = _job_table(4, 1_000_000, [100_000, 100_000, 900_000, 100_000])
    jobs.loc[2, "cpu_end"] = 5  # migrated from CPU 2 to CPU 5
    jobs["warmup"] = False
    spikes = jobs.assign(is_spike=jobs["job"] == 2)
    cul = pd.DataFrame({"cpu": [5], "start_ns": [jobs.loc[2, "start_ns"] + 10],
                        "end_ns": [jobs.loc[2, "start_ns"] + 110], "kind": ["irq"], "name": ["nvme"], "pid": [-1]})
    att = S.attribute_spikes(jobs, cul, spikes=spikes)
    assert att.per_spike["name"].tolist() == ["nvme"] and att.per_spike["overlap_ns"].tolist() == [100]
    with pytest.raises(ValueError, match="culprits"):
        S.attribute_spikes(jobs, cul.drop(columns="cpu"), spikes=spikes)
    with pytest.raises(ValueError, match="cpus"):
        S.attribute_spikes(jobs, cul, spikes=spikes, cpus="mine")


@pytest.mark.parametrize("layout", ["store", "shuffled"])
@pytest.mark.parametrize("categorical", [False, True])
def test_spikes_of_every_run_at_once_are_the_groupby_over_runs(monkeypatch, layout, categorical):
    """The columns in (run, job) order with each run's threshold from its stretch give the
    groupby's table row for row: runs out of order, lost jobs, a run whose values are all
    equal (no spike possible), warm-up left out; and a repeated job index goes the groupby's way."""
    rng = np.random.default_rng(11)
    parts = []
    for r, flat in (("r10", False), ("r2", True), ("r1", False)):
        exec_ns = np.full(500, 900_000) if flat else 1_000_000 + rng.normal(0, 10_000, 500)
        exec_ns[rng.choice(500, 4, replace=False)] += 0 if flat else 400_000
        t = _job_table(500, 2_000_000, exec_ns, run_id=r).drop(index=[100, 101, 300])
        parts.append(t)
    jobs = pd.concat([p[~p["warmup"]] for p in parts] + [p[p["warmup"]] for p in parts], ignore_index=True)
    if layout == "shuffled":
        jobs = jobs.sample(frac=1.0, random_state=2).reset_index(drop=True)
    if categorical:
        jobs["run_id"] = pd.Categorical(jobs["run_id"], categories=["r2", "r10", "unused", "r1"])
    at_once = S.detect_spikes(jobs)
    assert S._spikes_at_once(jobs[~jobs["warmup"]], "exec_ns", 5.0) is not None
    monkeypatch.setattr(S, "_spikes_at_once", lambda *a: None)
    pd.testing.assert_frame_equal(at_once, S.detect_spikes(jobs), check_exact=True)
    assert at_once["is_spike"].sum() == 8 and not at_once.loc[at_once["run_id"] == "r2", "is_spike"].any()
    monkeypatch.undo()
    dup = pd.concat([jobs, jobs.iloc[:2]], ignore_index=True)
    assert S._spikes_at_once(dup, "exec_ns", 5.0) is None


@pytest.mark.parametrize("categorical", [False, True])
def test_spike_periods_from_the_runs_stretches_are_the_groupby_over_runs(categorical):
    """detect_spikes' table (runs in order, jobs in order) read run by run from its stretches
    gives the groupby's rows, value for value: periodic runs with big and small spikes, a
    run without a spike, runs out of name order; the same table shuffled goes the groupby's way."""
    rng = np.random.default_rng(5)
    parts = []
    for r, planted in (("r10", True), ("r2", False), ("r1", True)):
        exec_ns, _, _ = _planted(3000, 1_000_000, 37_000_000, rng, phase_ns=5_300_000) if planted else (np.full(3000, 900_000), None, None)
        parts.append(_job_table(3000, 1_000_000, exec_ns, run_id=r))
    jobs = pd.concat(parts, ignore_index=True)
    if categorical:
        jobs["run_id"] = pd.Categorical(jobs["run_id"], categories=["r2", "r10", "unused", "r1"])
    d = S.detect_spikes(jobs)
    codes, uniques = pd.factorize(d["run_id"], sort=True)
    assert isinstance(S.run_job_order(codes, d["job"].to_numpy(), len(uniques)), slice)  # the stretch path
    got = S.spike_periods(d)
    shuffled = d.sample(frac=1.0, random_state=3)
    want = S.spike_periods(shuffled)  # not in order: the groupby, each run sorted by job
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert set(got.loc[got["periodic"] == True, "run_id"].astype(str)) == {"r10", "r1"}  # noqa: E712
    assert (got.loc[got["run_id"].astype(str) == "r2", "n_spikes"] == 0).all()


# --------------------------------------------------------------------------- issue 32: cost first, a culprit's period

MS = 1_000_000


def _issue_run(rng, n=2_000, period=10 * MS):
    """Issue 32's run, made: 343 spike jobs of 2000; a planted process in 9 of them only (3 ms
    each); a kernel worker in 300 spike jobs and a third of the others (tiny: 40 µs); the tick
    in every job (3 µs, twice in a long job)."""
    exec_ns = np.full(n, 6 * MS) + rng.normal(0, 20_000, n).astype(np.int64)
    spikes = np.sort(rng.choice(np.arange(2, n), 343, replace=False))
    exec_ns[spikes] += 2 * MS
    planted = spikes[::38][:9]
    exec_ns[planted] += 1 * MS
    jobs = _job_table(n, period, exec_ns)
    start, end = jobs["start_ns"].to_numpy(), jobs["end_ns"].to_numpy()
    rows = []
    for j in range(n):
        rows.append((2, start[j] + 1 * MS, start[j] + 1 * MS + 3_000, "irq", "tick_nohz_handler", -1))
        if exec_ns[j] > 7 * MS:
            rows.append((2, start[j] + 7 * MS, start[j] + 7 * MS + 3_000, "irq", "tick_nohz_handler", -1))
        if (j in set(spikes[:300])) or (j not in set(spikes) and rng.random() < 0.33):
            rows.append((2, start[j] + 2 * MS, start[j] + 2 * MS + 40_000, "process", "kworker/2:1", 40))
    for j in planted:
        rows.append((2, end[j] - 3 * MS, end[j] - 1 * MS, "process", "disturber", 4242))
    return jobs, pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns", "kind", "name", "pid"]), planted


def test_culprits_are_ranked_by_what_they_cost_the_victim_p_only_filters():
    jobs, cul, planted = _issue_run(np.random.default_rng(32))
    att = S.attribute_spikes(jobs, cul)
    r = att.ranking.set_index("name")
    # The worker is far more significant (300 of 343 spikes) than the planted process (9),
    # but the planted process took 2 ms from each job it hit: it is first.
    assert r.loc["kworker/2:1", "fisher_p"] < r.loc["disturber", "fisher_p"] < 1e-6
    assert att.ranking.iloc[0]["name"] == "disturber"
    assert r.loc["disturber", "spikes_with"] == 9 and r.loc["disturber", "normal_with"] == 0
    assert r.loc["disturber", "lift"] == np.inf and r.loc["disturber", "associated"]
    assert r.loc["disturber", "excess_ns"] == pytest.approx(9 * 2 * MS)
    assert r.loc["disturber", "explained"] == 9
    # The tick is in every job: no association, whatever the time it takes in long jobs.
    assert not r.loc["tick_nohz_handler", "associated"] and r.loc["tick_nohz_handler", "lift"] == pytest.approx(1.0)
    assert list(att.ranking.columns) == S.RANKING_COLUMNS


def test_lift_is_not_made_up_from_zero_counts():
    """Issue 32: with +½ smoothing, a timer in 0 of 2 spike jobs and 1 of 198 others showed
    the largest lift (22.1)."""
    exec_ns = np.full(202, 1 * MS)
    exec_ns[[50, 120]] = 5 * MS
    jobs = _job_table(202, 10 * MS, exec_ns)
    start = jobs["start_ns"].to_numpy()
    rows = [(2, start[30] + 10, start[30] + 1_000, "softirq", "sched_rt_period_timer", -1),
            (2, start[120] + 10, start[120] + 1_000, "irq", "virtio0", -1)]
    rows += [(2, start[j] + 10, start[j] + 1_000, "irq", "tick", -1) for j in range(202)]
    rows += [(2, start[j] + 2 * MS, start[j] + 3 * MS, "process", "hog", 7) for j in (50, 120)]
    att = S.attribute_spikes(jobs, pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns", "kind", "name", "pid"]))
    r = att.ranking.set_index("name")
    assert att.n_spikes == 2
    assert r.loc["sched_rt_period_timer", "spikes_with"] == 0
    # Fewer than MIN_LIFT_SPIKES spike jobs: no ratio is given, not a large one.
    assert r[["lift"]].isna().loc[["sched_rt_period_timer", "virtio0", "hog"], "lift"].all()
    assert not (r["lift"] > 1.5).any()
    assert att.ranking.iloc[0]["name"] == "hog"


def _periodic_disturber(rng, *, plant=True, n=1_500, victim=10 * MS, every=1_300 * MS, burn=2 * MS):
    """A victim at 10 ms running ~6 ms per job, a disturber waking every 1.3 s (±0.2 ms) for
    2 ms on its CPU (it lengthens the job it falls in), a worker waking at random (it
    lengthens the jobs it falls in too: the pooled spikes hold both)."""
    exec_ns = (6 * MS + rng.normal(0, 20_000, n)).astype(np.int64)
    t0 = T0 + 20_000
    rows = []
    wake = np.arange(0.37 * every, n * victim, every)
    wake = wake + rng.normal(0, 0.2 * MS, wake.size)
    noise = np.sort(rng.uniform(0, n * victim, 150))
    for t, name, dur in [(w, "disturber", burn) for w in (wake if plant else [])] + [(w, "kworker/u4:2", burn) for w in noise]:
        j = int(t // victim)
        if j < n and t - j * victim < exec_ns[j]:
            exec_ns[j] += dur
        rows.append((2, int(t0 + t), int(t0 + t + dur), "process", name, 99 if name == "disturber" else 41))
    jobs = _job_table(n, victim, exec_ns)
    return jobs, pd.DataFrame(rows, columns=["cpu", "start_ns", "end_ns", "kind", "name", "pid"])


def test_each_culprit_gets_its_own_period_not_the_pooled_one():
    jobs, cul = _periodic_disturber(np.random.default_rng(7))
    att = S.attribute_spikes(jobs, cul)
    per = S.culprit_periods(att, cul)
    assert list(per.columns) == S.CULPRIT_PERIOD_COLUMNS
    d = per[per["culprit"] == "disturber"].set_index("source")
    assert d.loc["wake-ups", "periodic"] and d.loc["wake-ups", "period_s"] == pytest.approx(1.3, rel=0.002)
    assert d.loc["spike jobs", "periodic"] and d.loc["spike jobs", "period_s"] == pytest.approx(1.3, rel=0.02)
    assert d.loc["spike jobs", "jobs"] >= 5 and d.loc["wake-ups", "regularity"] > 0.95 and d.loc["wake-ups", "p"] < 0.01
    # The random worker is a culprit too, with no period; pooled with its spikes, the disturber's are lost.
    w = per[per["culprit"] == "kworker/u4:2"]
    assert len(w) == 2 and not w["periodic"].any() and w["period_s"].isna().all()
    pooled = S.spike_periods(S.detect_spikes(jobs)).set_index("cls").loc["all"]
    assert not (pooled["periodic"] and pooled["period_ns"] == pytest.approx(1.3e9, rel=0.02))


def test_nothing_planted_no_periodic_culprit():
    jobs, cul = _periodic_disturber(np.random.default_rng(8), plant=False)
    per = S.culprit_periods(S.attribute_spikes(jobs, cul), cul)
    assert not per["periodic"].any() and "disturber" not in set(per["culprit"])
    empty = S.culprit_periods(S.attribute_spikes(jobs, cul.iloc[:0]), cul.iloc[:0])
    assert empty.empty and list(empty.columns) == S.CULPRIT_PERIOD_COLUMNS
