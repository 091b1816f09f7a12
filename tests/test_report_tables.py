"""The report's tables (xtalk.results.tables) on synthetic results with planted effects: each
test checks the report finds what was planted (xtalk.testing.synthetic)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xtalk.errors import UsageError
from xtalk.results import epsilon as eps
from xtalk.results import tables as tb
from xtalk.testing.synthetic import Scenario, write_results

JOBS = 300
SPIKE_EVERY = 40


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = write_results(
        tmp_path_factory.mktemp("synthetic") / "res",
        [Scenario("solo"), Scenario("solo-b"),
         Scenario("pi", enemies=[{"kind": "pi"}], slowdown=1.5, spike_every=SPIKE_EVERY, spike_ns=100_000, big_every=5)],
        repetitions=3, jobs=JOBS, trace=True, counters=True, drift_ns=5.0, miss_jobs=(10,), serious_jobs=(20,))
    return tb.load(root)


def test_slowdown_finds_the_planted_factor_and_the_aa_pair_stays_at_one(data):
    s = tb.slowdown(data).set_index(["scenario", "metric"])
    pi = s.loc[("pi", "exec")]
    assert pi.slowdown_median_lo <= 1.5 <= pi.slowdown_median_hi * 1.01
    assert pi.slowdown_median_lo > 1.4
    aa = s.loc[("solo-b", "exec")]
    assert aa.slowdown_median_lo < 1.0 < aa.slowdown_median_hi
    assert s.loc[("solo", "exec")].slowdown_median == 1.0


def test_noise_floor_uses_the_aa_pair_when_there_is_one(data):
    f = tb.noise_floor(data)
    assert set(f.source) == {"A/A solo vs solo-b"}
    assert (f.floor < 0.05).all() and (f.floor > 0).all()


def test_noise_floor_falls_back_to_solo_runs_and_says_so(tmp_path):
    root = write_results(tmp_path / "r", [Scenario("solo"), Scenario("x", enemies=[{"kind": "pi"}], slowdown=1.2)],
                         repetitions=2, jobs=100)
    f = tb.noise_floor(tb.load(root))
    assert f.source.str.startswith("solo runs (no A/A pair").all()
    assert f.samples.eq(2).all() and f.floor.notna().all()


def test_misses_count_deadline_and_serious_misses(data):
    m = tb.misses(data).set_index("scenario")
    assert m.loc["pi", "n_missed"] == 2 and m.loc["pi", "n_serious"] == 1
    assert m.loc["solo", "n_missed"] == 0 and m.loc["solo", "n_serious"] == 0
    assert list(m.index) == ["solo", "solo-b", "pi"]


def test_verdicts_apply_epsilon_bounds(data):
    v = tb.verdicts(data, ["exec:median:1.2x", "exec:median:2x", "response:max:100ms"]).set_index("scenario")
    pi = v.loc["pi"]
    assert pi.status == "ε VIOLATED"
    assert "exec median ≤ 1.2× solo: violated" in pi.epsilon_verdicts
    assert "exec median ≤ 2× solo: holds" in pi.epsilon_verdicts
    assert "response max ≤ 100 ms: holds" in pi.epsilon_verdicts
    assert pi.exec_interference == "slowed down"
    assert "2 deadline misses, 1 serious" in pi.verdict
    assert "noise floor" in pi.verdict
    assert v.loc["solo"].status == "ε holds"  # only the absolute bound applies to solo


def test_verdict_without_epsilon_says_so(data):
    v = tb.verdicts(data).set_index("scenario")
    assert "no ε given" in v.loc["pi"].verdict
    assert v.loc["pi"].status == "SERIOUS MISSES"


@pytest.mark.parametrize("text, field", [("exec:max", "--epsilon"), ("cpu:max:1.2x", "metric 'cpu'"),
                                         ("exec:p999x:1.2x", "statistic"), ("exec:max:fast", "--epsilon"),
                                         ("exec:max:-1x", "positive")])
def test_bad_epsilon_is_one_line_naming_the_field(text, field):
    with pytest.raises(UsageError) as e:
        eps.parse(text)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_epsilon_from_the_experiment_file():
    specs = eps.from_experiment({"experiment": {"victim": {"epsilon": {"metric": "response", "statistic": "p99",
                                                                       "bound": "12ms"}}}})
    assert specs[0].metric == "response" and specs[0].bound_ns == 12e6
    with pytest.raises(UsageError, match="victim.epsilon.limit: unknown key"):
        eps.from_experiment({"experiment": {"victim": {"epsilon": {"limit": "1x", "bound": "1x"}}}})


def test_distribution_markers(data):
    d = tb.distribution(data).set_index("scenario")
    solo = d.loc["solo"]
    assert solo["best"] <= solo["median"] <= solo["p99"] <= solo["worst"]
    assert solo.n == 3 * (JOBS - 2)
    first = data.jobs[(data.jobs.scenario == "solo") & (data.jobs.job == 0)].exec_ns
    assert solo["first"] in set(first)


def test_per_job_reference_is_the_minimum_over_runs(data):
    ref = tb.per_job_reference(data, "pi")
    j = data.measured[data.measured.scenario == "pi"]
    expect = j.groupby("job").exec_ns.min()
    assert (ref.set_index("job").min_ns == expect).all()
    assert ref.n_runs.max() == 3


def test_per_job_reference_from_the_runs_stretches_is_the_matrix_one(data):
    """Min, median and max per job read run by run from the stretches are analysis.stats'
    (its runs × jobs matrix), for every group; a run that lost a job, or runs out of their
    stretches, go the matrix's (or the groupby's) way and give its numbers."""
    from xtalk.analysis import stats as st

    for sc, cf in tb.groups(data):
        g = tb.subset(data, sc, cf, ["run_id", "job", "exec_ns"])
        want = st.per_step_reference(g.assign(run_id=g["run_id"].cat.codes), column="exec_ns", by=("run_id",))
        assert tb._reference_of_stretches(g, "exec_ns") is not None
        pd.testing.assert_frame_equal(tb.per_job_reference(data, sc, "exec_ns", cf, rows=g), want, check_exact=True)
        for other in (g.drop(index=g.index[5]), g.sample(frac=1.0, random_state=1)):
            assert tb._reference_of_stretches(other, "exec_ns") is None
            pd.testing.assert_frame_equal(tb.per_job_reference(data, sc, "exec_ns", cf, rows=other),
                                          st.per_step_reference(other.assign(run_id=other["run_id"].cat.codes),
                                                                column="exec_ns", by=("run_id",)), check_exact=True)


@pytest.mark.parametrize("runs", [1, 2, 3, 4, 7, 50])
def test_per_job_reference_median_of_sorted_integer_runs_is_numpys(runs):
    """The median of each job's runs sorted as integers is np.median's of their floats, bit
    for bit: odd and even numbers of runs, ties, negative and large values."""
    from xtalk.analysis import stats as st

    rng = np.random.default_rng(runs)
    n = 301
    for values in (260_000 + rng.integers(-3_000, 3_000, runs * n), rng.integers(0, 3, runs * n),
                   (1 << 52) + rng.integers(-9, 9, runs * n), -rng.integers(0, 10**12, runs * n)):
        g = pd.DataFrame({"run_id": pd.Categorical(np.repeat([f"r{i}" for i in range(runs)], n)),
                          "job": np.tile(np.arange(2, n + 2), runs), "exec_ns": values.astype(np.int64)})
        got = tb._reference_of_stretches(g, "exec_ns")
        assert got is not None
        want = np.median(values.reshape(runs, n).astype(float), axis=0)
        assert np.array_equal(got["median_ns"].to_numpy(), want)
        pd.testing.assert_frame_equal(got, st.per_step_reference(g.assign(run_id=g["run_id"].cat.codes),
                                                                 column="exec_ns", by=("run_id",)), check_exact=True)


def test_a_group_in_run_order_gives_the_wakeup_series_of_its_subset(data):
    """The wake-up series from the group's stretches, copied once in run order, is the one
    from the group's masked subset (warm-up included), row for row, for every group."""
    from xtalk.analysis import wakeup as wk

    cols = ["run_id", "job", "warmup", "wakeup_ns", "release_ns", "end_ns", "period_ns"]
    for sc, cf in tb.groups(data):
        ordered = tb.group_in_run_order(data, sc, cf, cols)
        assert ordered is not None and list(ordered.columns) == cols
        plain = tb.subset(data, sc, cf, cols, warmup=True)
        assert len(ordered) == len(plain) and set(ordered["run_id"].cat.categories) == set(plain["run_id"].cat.categories)
        pd.testing.assert_frame_equal(wk.wakeup_series(ordered), wk.wakeup_series(plain), check_exact=True)


def test_a_groups_wakeup_series_run_by_run_is_the_one_of_its_subset(data):
    """The cached series, built run by run from the frames' stretches, holds the numbers of
    wakeup_series of the group's subset row for row (its run_id a Categorical of the same
    ids); its runs are those a groupby gives."""
    from xtalk.analysis import wakeup as wk

    cols = ["run_id", "job", "warmup", "wakeup_ns", "release_ns", "end_ns", "period_ns"]
    for sc, cf in tb.groups(data):
        got = tb.wakeup(data, sc, cf)
        assert isinstance(got["run_id"].dtype, pd.CategoricalDtype)
        plain = wk.wakeup_series(tb.subset(data, sc, cf, cols, warmup=True))
        assert list(got.columns) == list(tb.WAKEUP_COLUMNS)
        pd.testing.assert_frame_equal(got.assign(run_id=got["run_id"].astype(str)), plain[list(got.columns)],
                                      check_exact=True, check_dtype=False)
        assert [(k, len(g)) for k, g in wk.runs_of_series(got)] == [(k, len(g)) for k, g in got.groupby("run_id", observed=True)]


@pytest.mark.parametrize("limit", [1, JOBS, JOBS + 1, 10**9])
def test_pwcet_sample_is_whole_runs_in_order_up_to_the_limit(data, monkeypatch, limit):
    """The pWCET's sample: whole runs in run-id order, each in job order, until the limit
    is reached (the run that reaches it included); a copy per call of nothing (cached)."""
    monkeypatch.setattr(tb, "PWCET_JOBS", limit)
    data.memo.pop(("pwcet_series", "pi", "default"), None)
    v, total = tb.pwcet_series(data, "pi", "default")
    j = data.measured[data.measured.scenario == "pi"]
    want, n = [], 0
    for rid in sorted(j["run_id"].astype(str).unique()):
        if n >= limit:
            break
        r = j[j["run_id"].astype(str) == rid].sort_values("job")
        want.append(r["exec_ns"].to_numpy(dtype=float))
        n += len(r)
    assert total == len(j) and np.array_equal(v, np.concatenate(want))
    assert tb.pwcet_series(data, "pi", "default")[0] is v
    fast = tb._first_runs_of_stretches(data, "pi", "default")  # what pwcet_series took: the stretches'
    assert fast is not None and np.array_equal(fast[0], v) and fast[1] == total
    monkeypatch.setattr(tb, "_first_runs_of_stretches", lambda *a: None)  # the subset's way: the same
    data.memo.pop(("pwcet_series", "pi", "default"))
    v2, total2 = tb.pwcet_series(data, "pi", "default")
    assert total2 == total and np.array_equal(v2, v)
    data.memo.pop(("pwcet_series", "pi", "default"))


def test_counters_correlation_and_redundancy(data):
    c = tb.counter_summary(data).set_index(["scenario", "counter"])
    assert c.loc[("pi", "ctr_task_clock"), "pearson_r"] > 0.95
    assert abs(c.loc[("pi", "ctr_page_faults"), "pearson_r"]) < 0.3
    assert c.loc[("solo", "ctr_page_faults"), "first"] >= 30  # the first job's page faults (planted)
    r = tb.redundant_counters(data)
    assert set(r.iloc[0][["counter_a", "counter_b"]]) == {"ctr_task_clock", "ctr_cpu_clock"}
    assert "ctr_page_faults" not in set(r.counter_a) | set(r.counter_b)


def test_two_way_grid_from_a_table():
    t = pd.DataFrame({"n": [1, 1, 2, 2, 2], "load": [10, 20, 10, 20, 20], "exec_ns": [1.0, 2.0, 3.0, 4.0, 6.0]})
    g = tb.two_way_grid(t, "n", "load")
    assert g.loc[20, 2] == 5.0 and g.loc[10, 1] == 1.0
    assert list(g.columns) == [1, 2] and list(g.index) == [10, 20]
    with pytest.raises(ValueError, match="column: 'nope'"):
        tb.two_way_grid(t, "nope", "load")


def test_parameter_grid_from_run_labels(tmp_path):
    scen = [Scenario("solo", labels={"enemies": 0, "load": 0})]
    for n in (1, 2):
        for load in (1, 3):
            scen.append(Scenario(f"e{n}-l{load}", enemies=[{"kind": "pi"}] * n, slowdown=1 + 0.1 * n * load,
                                 labels={"enemies": n, "load": load}))
    d = tb.load(write_results(tmp_path / "r", scen, repetitions=1, jobs=60))
    g = tb.parameter_grid(d)
    assert g.loc[3, 2] > g.loc[1, 2] > g.loc[1, 1]
    assert np.isnan(g.loc[1, 0]) and g.loc[0, 0] > 0  # solo sits at (0, 0) only


def test_wakeup_drift_recovers_the_planted_slope(data):
    d = tb.wakeup_drift(data)
    assert len(d) == 9
    assert ((d.ci_low < 5.0) & (5.0 < d.ci_high)).mean() >= 2 / 3
    assert not tb.quantisation(data).quantised.any()


def test_spikes_and_their_period(data):
    s = tb.spikes(data).set_index("run_id")
    assert (s.loc[s.scenario == "solo", "spikes"] == 0).all()
    per = tb.spike_periods(data)
    clean = per[(per.run_id.isin(["5-pi-r1", "8-pi-r2"])) & (per.cls == "all")]
    assert np.allclose(clean.period_jobs, SPIKE_EVERY, rtol=0.02)
    assert np.allclose(clean.period_ns, SPIKE_EVERY * 1e6, rtol=0.02)


def test_spikes_per_run_from_the_stretches_are_the_groupby(data, monkeypatch):
    """The per-run spike table read from the detection's run stretches is the groupby's, row
    for row; a detection table whose runs are not in their order goes the groupby's way."""
    got = tb.spikes(data)
    assert tb._spikes_by_stretch(tb.detected_spikes(data)) is not None
    monkeypatch.setattr(tb, "_spikes_by_stretch", lambda d: None)
    pd.testing.assert_frame_equal(got, tb.spikes(data), check_exact=True)
    # The detection itself (integer times, run by run) is the groupby's too.
    det = tb._detected_spikes(data, None, 5.0)
    monkeypatch.setattr(tb.sp, "_spikes_at_once", lambda *a: None)
    pd.testing.assert_frame_equal(det, tb._detected_spikes(data, None, 5.0), check_exact=True)
    assert det["is_spike"].any()
    d = tb.detected_spikes(data)
    assert tb._spikes_by_stretch(d.iloc[::-1]) is None and tb._spikes_by_stretch(d.iloc[::2]) is None


def test_spike_attribution_names_the_planted_culprit(data):
    a = tb.spike_attribution(data)
    top = a[a.run_id == "2-pi-r0"].iloc[0]
    assert top["name"] == "timesyncd" and top["fisher_p"] < 1e-3
    c = tb.culprits(data)
    assert "timesyncd" in set(c[c.run_id == "2-pi-r0"].name)


def test_timeline_is_a_window_around_the_worst_traced_job(data):
    tl = tb.timeline(data)
    assert tl.attrs["job"] == 20 and tl.run_id.iloc[0] == "2-pi-r0"  # the planted serious miss
    assert "timesyncd" in set(tl.name) and "victim" in set(tl.name)
    assert tl.rel_start_ns.min() >= -2 * 1_000_000


def test_pwcet_estimates_iid_data_and_refuses_periodic_spikes(data):
    p = tb.pwcet(data)
    solo = p[p.scenario == "solo"]
    assert solo.refused.isna().all() and len(solo) == 10
    assert (solo.pwcet_ns >= data.measured[data.measured.scenario == "solo"].exec_ns.quantile(0.99)).all()
    pi = p[p.scenario == "pi"]
    assert len(pi) == 1 and "ljung_box" in pi.refused.iloc[0]
    iid = tb.pwcet_iid(data)
    assert not iid[iid.scenario == "pi"].passed.all() and iid[iid.scenario == "solo"].passed.all()


def test_not_a_results_directory(tmp_path):
    with pytest.raises(UsageError, match="not an xtalk results directory"):
        tb.load(tmp_path)


def test_blame_ranks_the_spike_culprit(data):
    from conftest import xtalk

    r = xtalk("blame", data.run_dir("2-pi-r0"))
    assert r.returncode == 0, r.stderr
    assert "culprits of the" in r.stdout
    end = min(i for i in (r.stdout.find("who woke the victim"), r.stdout.find("off its CPU")) if i >= 0)
    table = r.stdout[r.stdout.index("culprits of the"):end]
    assert table.index("timesyncd") < table.index("kworker")
    # --json: the same ranking as rows, times as {value, unit} (report/verdicts.table_document).
    j = xtalk("blame", data.run_dir("2-pi-r0"), "--json")
    assert j.returncode == 0, j.stderr
    doc = __import__("json").loads(j.stdout)
    names = [str(row["name"]) for row in doc["spikes"]]
    first = {who: next(i for i, n in enumerate(names) if who in n) for who in ("timesyncd", "kworker")}
    assert doc["kind"] == "blame" and first["timesyncd"] < first["kworker"], names
    assert doc["spikes"][0]["excess"]["unit"] == "ns" and doc["rows"] and "slowest_jobs" in doc


def test_group_markers_agree_with_the_library(data):
    from xtalk.analysis.stats import markers

    for scen in ("solo", "pi"):
        jobs = data.jobs
        mk = markers(jobs[jobs.scenario == scen], column="exec_ns", by=()).iloc[0]
        ours = tb.group_markers(data, scen, "default", "exec_ns")
        assert ours == {k: float(mk[k]) for k in ("best", "median", "first", "worst")}


def test_culprits_rank_by_the_time_they_held_the_victim_off_and_are_queryable(data, tmp_path):
    import xtalk

    c = tb.culprits(data)
    run = c[c.run_id == "2-pi-r0"]
    assert run.blocked_ns.is_monotonic_decreasing
    # The synthetic trace's culprits preempt the victim inside its jobs: held off = present.
    top = run.set_index("name").loc["timesyncd"]
    assert top.blocked_ns == top.preempted_ns == top.total_ns > 0 and top.jobs_blocked == top.jobs_hit
    view = xtalk.open(data.path).culprits()
    assert set(view.run_id) == set(c.run_id)
    mine = view[(view.run_id == "2-pi-r0") & (view.name == "timesyncd")]
    assert mine.blocked_ns.sum() == top.blocked_ns and mine.scenario.eq("pi").all()
    assert tb.wakers(data).empty  # the synthetic trace logs no wake-up: no waker is made up
    bare = write_results(tmp_path / "bare", [Scenario("solo")], repetitions=1, jobs=20)
    empty = xtalk.open(bare).culprits()
    assert empty.empty and {"run_id", "blocked_ns", "ns"} <= set(empty.columns)


@pytest.mark.parametrize("values", [
    [300, 100, 200, 100, 250],                       # a narrow span: counted
    [-5, 3, -5, 0, 7, 7, 7],                         # negative: counted from the lowest
    [1, 2**31 + 5, 3, 2**31 + 5],                    # wide span beyond int32: numpy's sort of int64
    [10, 2_000_000_000, 20, 30],                     # wide span within int32: the int32 sort
    [42],
])
def test_a_groups_values_sorted_by_counting_or_by_numpy_are_the_same_floats(values):
    rng = np.random.default_rng(1)
    v = np.array(values * 50, dtype=np.int64)
    rng.shuffle(v)
    got = tb._sorted_floats(pd.Series(v))
    assert got.dtype == np.float64 and np.array_equal(got, np.sort(v.astype(float)))
    f = pd.Series(v.astype(float))
    f.iloc[3] = np.nan  # floats with a NaN: numpy's sort, NaN last
    assert np.array_equal(tb._sorted_floats(f), np.sort(f.to_numpy()), equal_nan=True)


def test_groups_are_the_pairs_with_jobs_solo_first(data):
    assert tb.groups(data) == [("solo", "default"), ("solo-b", "default"), ("pi", "default")]


@pytest.mark.parametrize("layout", ["runs", "shuffled", "one"])
def test_groups_read_where_labels_change_are_every_jobs_pairs(data, layout):
    """The pairs read where the scenario or configuration changes (jobs in runs), or of
    every job (labels interleaved), are the groupby's pairs with jobs, unused categories
    left out."""
    import dataclasses

    m = data.measured
    m = {"runs": m, "shuffled": m.sample(frac=1.0, random_state=2), "one": m[m["scenario"] == "pi"]}[layout]
    m = m.assign(configuration=pd.Categorical(np.where(np.arange(len(m)) % 3000 < 1500, "a", "b")))
    other = dataclasses.replace(data, measured=m.reset_index(drop=True), memo={})
    want = {(str(s), str(c)) for (s, c), g in m.groupby(["scenario", "configuration"], observed=True) if len(g)}
    got = tb.groups(other)
    assert set(got) == want and len(got) == len(want)
    assert [s for s, _ in got] == sorted((s for s, _ in got), key=lambda s: [sc for sc in data.scenarios].index(s))


@pytest.mark.parametrize("layout", ["runs", "split", "shuffled"])
def test_a_groups_rows_read_where_labels_change_are_the_masks(data, layout):
    """A group's stretches read where the scenario or configuration changes are those of the
    mask of its rows (neighbouring stretches joined), for every group and a scenario alone;
    None for interleaved rows either way."""
    import dataclasses

    m = data.measured
    if layout == "split":  # a second configuration within runs: stretches of one group side by side
        m = m.assign(configuration=pd.Categorical(np.where(np.arange(len(m)) % 700 < 300, "default", "other")))
    elif layout == "shuffled":
        m = m.sample(frac=1.0, random_state=3)
    other = dataclasses.replace(data, measured=m.reset_index(drop=True), memo={})
    keys = [(sc, cf) for sc in ("solo", "pi", "solo-b") for cf in ("default", "other", None)]
    got = {k: tb._group_rows(other, *k) for k in keys}
    assert (tb._label_changes(other) is None) == (layout == "shuffled")
    other.memo.clear()
    other.memo[("label_changes",)] = None  # the mask's way
    want = {k: tb._group_rows(other, *k) for k in keys}
    assert got == want
    assert layout == "shuffled" or all(got[k] for k in keys if k[1] != "other" or layout == "split")


@pytest.mark.parametrize("scenario", ["solo", "pi", "no-such-scenario"])
def test_a_scenarios_first_runs_are_the_groupbys(data, scenario):
    got = tb._leading_runs(data, scenario, "exec_ns", 2)
    if scenario == "no-such-scenario":
        assert got == []
        return
    sub = tb.subset(data, scenario, None, ["run_id", "exec_ns"])
    want = [v.to_numpy(dtype=float) for _, v in sub.groupby("run_id", observed=True)["exec_ns"]][:2]
    assert len(got) == 2 and all(g.dtype == np.float64 and np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("values", [
    [400_000, 400_003, 399_990, 400_001],            # narrow: counted
    [-5, 3, -5, 0, 7, 7, 7],                         # negative: counted from the lowest
    [1, 2**31 + 5, 3, 2**31 + 5],                    # wide span beyond int32: sorted as floats
    [10, 2_000_000_000, 20, 30],                     # wide span within int32: the int32 sort
])
@pytest.mark.parametrize("buffer", [7, 1 << 20])
def test_a_groups_values_sorted_from_slices_are_the_subsets(monkeypatch, values, buffer):
    """_sorted_int_spans of a group's slices of the column (counted through a buffer
    flushed many times, or once) gives _sorted_floats of the group's rows copied out."""
    monkeypatch.setattr(tb, "COUNT_BUFFER", buffer)
    rng = np.random.default_rng(2)
    v = np.array(values * 40, dtype=np.int64)
    rng.shuffle(v)
    spans = [(0, 13), (20, 21), (30, 90), (100, len(v))]
    want = tb._sorted_floats(pd.Series(np.concatenate([v[a:b] for a, b in spans])))
    got = tb._sorted_int_spans(v, spans)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    assert tb._sorted_int_spans(v, []).size == 0


def test_sorted_values_and_leading_runs_from_slices_are_the_masks(data, monkeypatch):
    """Every group's sorted values and the first runs of a scenario (as they are, and sorted)
    read from the groups' stretches equal those of the former path (a mask of the rows, a
    copy of the group, a sort)."""
    fast = {(sc, cf, col): tb._sorted_group(data, sc, cf, col) for sc, cf in tb.groups(data)
            for col in ("exec_ns", "response_ns")}
    fast[("pi", None, "exec_ns")] = tb._sorted_group(data, "pi", None, "exec_ns")
    runs = {sc: tb._leading_runs(data, sc, "exec_ns", 2) for sc in ("solo", "pi")}
    ordered = {sc: tb._sorted_leading_runs(data, sc, "exec_ns", 3) for sc in ("solo", "pi", "no-such-scenario")}
    assert all(tb._group_rows(data, sc, cf) for sc, cf, _ in fast)
    monkeypatch.setattr(tb, "_group_rows", lambda *a: None)
    for (sc, cf, col), v in fast.items():
        assert np.array_equal(v, tb._sorted_floats(tb.subset(data, sc, cf, [col])[col]))
    for sc, got in runs.items():
        want = tb._leading_runs(data, sc, "exec_ns", 2)
        assert len(got) == 2 and all(np.array_equal(a, b) for a, b in zip(got, want))
    for sc, got in ordered.items():
        want = [np.sort(v) for v in tb._leading_runs(data, sc, "exec_ns", 3)]
        assert len(got) == len(want) == (0 if sc == "no-such-scenario" else 3)
        assert all(a.dtype == np.float64 and np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("layout", ["stretches", "categorical", "interleaved", "split", "nan"])
def test_a_series_first_runs_as_a_slice_are_the_masks_rows(layout):
    """The rows of the runs _first_runs keeps (quantisation's) taken as the leading slice
    where each run is one stretch: the rows the mask of those runs gives (string and
    categorical run ids); interleaved runs, a run in two stretches or a row without a run id
    take the mask."""
    rid = np.repeat(["r3", "r1", "r2", "r0"], [40, 25, 30, 50]).astype(object)
    if layout == "interleaved":
        rid = np.tile(["r3", "r1", "r2", "r0"], 37)[:145]
    elif layout == "split":
        rid = np.concatenate([rid[:20], rid[40:65], rid[20:40], rid[65:]])
    elif layout == "nan":
        rid[3] = None
    g = pd.DataFrame({"run_id": rid, "interval_ns": np.arange(rid.size, dtype=float)})
    g["run_id"] = g["run_id"].astype("category" if layout == "categorical" else "str")
    for cap in (1, 40, 41, 64, 66, 1000):
        want = g[g["run_id"].isin(tb._first_runs(g, cap, sort=False))]
        got = tb._first_runs_rows(g, cap)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_exact=True)
        assert list(got.index) == list(want.index)


@pytest.mark.parametrize("cols", [["run_id", "job", "exec_ns"], None, ["exec_ns", "no-such-column", "missed"]])
def test_a_subset_from_the_groups_stretches_is_the_masks_rows(data, monkeypatch, cols):
    """subset joined from the stretches of a group's rows gives the frame a mask of them
    gives: the same columns, dtypes, values and index (a range for one stretch), warm-up
    rows included; without stretches the mask decides."""
    want = {}
    got = {}
    keys = [(sc, cf, w) for sc, cf in tb.groups(data) for w in (False, True)] + [("pi", None, False), ("nope", None, False)]
    for sc, cf, w in keys:
        got[sc, cf, w] = tb.subset(data, sc, cf, cols, warmup=w)
    assert any(len(tb._group_rows(data, sc, cf) or ()) > 1 for sc, cf, _ in keys)
    monkeypatch.setattr(tb, "_group_rows", lambda *a: None)
    for key in keys:
        want = tb.subset(data, key[0], key[1], cols, warmup=key[2])
        pd.testing.assert_frame_equal(got[key], want, check_exact=True, check_index_type=True)
        assert type(got[key].index) is type(want.index)


def test_rows_of_spans_are_the_masks_rows_or_none():
    """_rows_of_spans against the mask: several stretches, one (a range index), categorical
    and bool columns; None for spans of single rows, no column, another index or an Arrow
    column."""
    n = 50
    j = pd.DataFrame({"run_id": pd.Categorical(np.repeat(["a", "b", "c", "d", "e"], 10), categories=list("edcba")),
                      "job": np.arange(n), "x": np.linspace(0, 1, n), "flag": np.arange(n) % 3 == 0,
                      "rep": np.arange(n, dtype=np.int32)})
    for spans in ([(0, 10), (20, 30), (45, 50)], [(10, 40)], [(0, 50)], [(3, 5), (7, 9)]):
        keep = np.zeros(n, dtype=bool)
        for a, b in spans:
            keep[a:b] = True
        for cols in (None, ["x", "run_id"], ["flag", "rep", "job"]):
            got = tb._rows_of_spans(j, spans, cols)
            want = j.loc[keep, cols] if cols is not None else j[keep]
            pd.testing.assert_frame_equal(got, want, check_exact=True, check_index_type=True)
            assert type(got.index) is type(want.index)
    assert tb._rows_of_spans(j, [(0, 1), (2, 3), (4, 5)], None) is None
    assert tb._rows_of_spans(j, [(0, 10)], []) is None
    assert tb._rows_of_spans(j.set_index(np.arange(n) + 7), [(0, 10), (20, 30)], None) is None
    assert tb._rows_of_spans(j.assign(s=pd.array(["x"] * n, dtype="string[pyarrow]")), [(0, 10), (20, 30)], None) is None


@pytest.mark.parametrize("layout", ["stretches", "interleaved", "missing", "empty", "all"])
def test_used_categories_from_stretches_are_pandas(layout):
    """The categories a column uses, read from its stretches' first codes or counted, are
    remove_unused_categories' (codes included), a row without a label among them."""
    rng = np.random.default_rng(1)
    cats = [f"r{i}" for i in range(9)]
    labels = {"stretches": np.repeat(["r4", "r1", "r7", "r1"], [30, 20, 25, 10]),
              "interleaved": rng.choice(["r0", "r3", "r8"], 500),
              "missing": np.repeat(["r2", None, "r5"], [10, 5, 10]),
              "empty": np.array([], dtype=object), "all": np.repeat(cats, 3)}[layout]
    col = pd.Series(pd.Categorical(labels, categories=cats), name="run_id", index=np.arange(len(labels)) + 3)
    got, want = tb._used_categories(col), col.cat.remove_unused_categories()
    pd.testing.assert_series_equal(got, want, check_exact=True)
    assert np.array_equal(got.cat.codes.to_numpy(), want.cat.codes.to_numpy())
