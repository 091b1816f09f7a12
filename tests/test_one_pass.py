"""One experiment, one pass: the terminal summary (summary.json, the printed table), the
report's tables and `xtalk query` give the same misses, median and p99 response times and
median-slowdown CI for every (configuration, scenario), because all of them read the cells
of analysis/cells.py. The synthetic results plant a job whose agent flag and times disagree
(the flag wins, docs/report.md) and enough jobs that the slowdown CIs are subsampled."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from conftest import xtalk
from xtalk.results import tables as tb
from xtalk.report.summary import write_summary
from xtalk.testing.synthetic import Scenario, write_results
from xtalk.store import Results

EXPERIMENT = """
name = "onepass"
repetitions = 2
settle = "20ms"
[victim]
body = "sum"
bytes = "256KiB"
period = "2ms"
jobs = 40
warmup_jobs = 2
cpus = "last"
[[scenario]]
name = "pi"
enemies = [{ kind = "pi" }]
"""


def _flip(run_dir, flags: dict[int, bool]) -> None:
    """Set the agent's `missed` flag of some jobs against their times."""
    p = run_dir / "jobs.parquet"
    t = pq.read_table(p).to_pandas()
    for job, value in flags.items():
        t.loc[t["job"] == job, "missed"] = value
    pq.write_table(pa.Table.from_pandas(t, preserve_index=False), p)


def _query(root, sql: str) -> pd.DataFrame:
    r = xtalk("query", root, sql, "--csv", timeout=300)
    assert r.returncode == 0, r.stderr
    return pd.read_csv(io.StringIO(r.stdout))


def _same(a, b, tol: float = 1e-9) -> bool:
    """Equal numbers; None (a JSON null) and NaN both mean "none"."""
    a, b = (math.nan if x is None else float(x) for x in (a, b))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a))


def _check_everywhere(root) -> dict:
    """Assert every output gives the same numbers; return the cells by (configuration, scenario)."""
    buf = io.StringIO()
    write_summary(Results(root), Console(file=buf, width=250, color_system=None))
    text = buf.getvalue()
    summary = {(r["configuration"], r["scenario"]): r for r in json.loads((root / "summary.json").read_text())}

    data = tb.load(root)
    cells = tb.cells(data).set_index(["configuration", "scenario"])
    slow = tb.slowdown(data).set_index(["configuration", "scenario", "metric"])
    miss = tb.misses(data).set_index(["configuration", "scenario"])
    verd = tb.verdicts(data).set_index(["configuration", "scenario"])
    dist = tb.distribution(data, "response_ns").set_index(["configuration", "scenario"])
    duck = tb.distribution(root, "response_ns").set_index(["configuration", "scenario"])  # DuckDB, no job loaded

    sql = _query(root, "SELECT configuration, scenario, count(*) AS jobs, sum(missed::INT) AS misses, "
                       "median(response_ns) AS med, quantile_cont(response_ns, 0.99) AS p99 "
                       "FROM jobs WHERE NOT warmup GROUP BY ALL").set_index(["configuration", "scenario"])
    view = _query(root, "SELECT * FROM cells").set_index(["configuration", "scenario"])

    assert set(summary) == set(cells.index) == set(sql.index) == set(view.index)
    for key, s in summary.items():
        c, q, v = cells.loc[key], sql.loc[key], view.loc[key]
        # misses: the agent's flags, summed by SQL over the job rows
        assert s["deadline_misses"] == c["deadline_misses"] == miss.loc[key, "n_missed"] == q["misses"] \
            == verd.loc[key, "deadline_misses"] == v["deadline_misses"], key
        assert s["jobs"] == c["jobs"] == miss.loc[key, "n_jobs"] == q["jobs"] == slow.loc[(*key, "exec"), "jobs"]
        # median and p99 of the response time
        for name, col, qcol, dcol in (("median", "median_response_ms", "med", "median"), ("p99", "p99_response_ms", "p99", "p99")):
            ms = s[col]
            assert _same(ms, c[f"response_{name}_ms"]) and _same(ms, v[f"response_{name}_ms"], 1e-6), (key, name)
            assert _same(ms, q[qcol] / 1e6) and _same(ms, dist.loc[key, dcol] / 1e6), (key, name)
            assert _same(ms, duck.loc[key, dcol] / 1e6), (key, name)
            assert _same(ms, slow.loc[(*key, "response"), f"{name}_ms"]), (key, name)
        assert _same(s["median_response_ms"], verd.loc[key, "response_median_ms"])
        # the median-slowdown CI of the execution time (the summary's), and the response's in the report
        for k in ("", "_lo", "_hi"):
            p = s[f"slowdown_median{k}"]
            assert _same(p, c[f"exec_slowdown_median{k}"]) and _same(p, slow.loc[(*key, "exec"), f"slowdown_median{k}"]), key
            assert _same(p, verd.loc[key, f"exec_slowdown_median{k}"]) and _same(p, v[f"exec_slowdown_median{k}"], 1e-6), key
            r = c[f"response_slowdown_median{k}"]
            assert _same(r, slow.loc[(*key, "response"), f"slowdown_median{k}"]) and _same(r, verd.loc[key, f"response_slowdown_median{k}"])
        assert s["runs"] == c["runs"] == slow.loc[(*key, "exec"), "runs"] and s["runs_ok"] == c["runs_ok"]
        # the printed table says the same
        line = next(ln for ln in text.splitlines() if f" {key[1]} " in ln and "│" in ln)
        assert f" {s['deadline_misses']} " in line and f"{s['median_response_ms']:.3f}" in line, line
        assert f"{s['p99_response_ms']:.3f}" in line, line
        if key[1] != "solo":
            assert f"{s['slowdown_median']:.2f} [{s['slowdown_median_lo']:.2f}, {s['slowdown_median_hi']:.2f}]" in line, line
    return {k: cells.loc[k] for k in cells.index}


def test_a_flag_against_its_times_and_subsampled_cis_say_the_same_everywhere(tmp_path):
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", slowdown=1.3, spike_every=40)],
                         repetitions=3, jobs=2000, miss_jobs=(5, 9))
    runs = sorted((root / "runs").iterdir())
    pi0 = next(d for d in runs if d.name.endswith("-pi-r0"))
    solo1 = next(d for d in runs if d.name.endswith("-solo-r1"))
    # A job the agent flagged (it failed its work) though its times are on time, and a late job
    # the flag leaves out: the flag is what the agent measured.
    _flip(pi0, {20: True, 9: False})
    _flip(solo1, {30: True})
    cells = _check_everywhere(root)
    assert cells[("default", "pi")]["deadline_misses"] == 2  # 5 and 20; 9 by its times only
    assert cells[("default", "solo")]["deadline_misses"] == 1
    assert cells[("default", "pi")]["ci_subsampled"]  # 6000 jobs a side: above tables.BOOT_JOBS


def test_old_tables_without_the_flag_count_misses_from_the_times(tmp_path):
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("pi", slowdown=1.2)], repetitions=2, jobs=100,
                         miss_jobs=(5, 9))
    for d in (root / "runs").iterdir():
        p = d / "jobs.parquet"
        pq.write_table(pq.read_table(p).drop(["missed"]), p)
    data = tb.load(root)
    c = tb.cells(data).set_index("scenario")
    assert c.loc["pi", "deadline_misses"] == 2 and c.loc["solo", "deadline_misses"] == 0
    m = tb.misses(data).set_index("scenario")
    assert m.loc["pi", "n_missed"] == 2
    assert m.loc["solo", "max_lateness_ns"] < 0  # no empty run group counted as lateness 0


def test_a_real_experiment_says_the_same_everywhere(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT)
    r = xtalk("run", f, "--results", tmp_path / "res", "--skip-feasibility", timeout=300)
    assert r.returncode == 0, r.stderr
    (root,) = (tmp_path / "res").iterdir()
    cells = _check_everywhere(root)
    assert {k[1] for k in cells} == {"solo", "pi"}
    assert all(c["jobs"] == 2 * 40 and c["runs_ok"] == 2 for c in cells.values())
    assert not np.isnan(cells[("default", "pi")]["exec_slowdown_median_lo"])


def test_the_report_computes_the_guards_write_summary_computes_whatever_summary_json_says(tmp_path):
    """The report's warnings are computed from the cells it renders, never read from a
    summary.json that may be older than the data or the code: the same list as write_summary's."""
    from xtalk.analysis.guards import Guard, Kind
    from xtalk.report.build import build, result_guards

    # Solo needs 95 % of its period (overloaded); the enemy scenario runs twice as fast.
    root = write_results(tmp_path / "res", [Scenario("solo"), Scenario("faster", slowdown=0.5)], repetitions=3,
                         jobs=200, exec_ns=950_000)
    table = write_summary(Results(root))
    fired = [w for ws in table["warnings"] for w in ws]
    assert {"overloaded_solo", "faster_under_interference"} <= {w["kind"] for w in fired}, fired
    assert [w for r in json.loads((root / "summary.json").read_text()) for w in r["warnings"]] == fired
    expect = [Guard(Kind(w["kind"]), w["configuration"], w["scenario"], w["message"]).line() for w in fired]
    # A summary.json written before the data or the code changed: one stale warning, the rest gone.
    stale = json.loads((root / "summary.json").read_text())
    for r in stale:
        r["warnings"] = []
    stale[0]["warnings"] = [{"kind": "ci_too_wide", "configuration": "default", "scenario": "solo",
                             "message": "a stale warning"}]
    (root / "summary.json").write_text(json.dumps(stale))
    assert result_guards(root)["line"].tolist() == expect
    out = tmp_path / "report"
    build(root, out, csv=False)
    assert pd.read_csv(out / "tables" / "warnings.csv")["line"].tolist() == expect
    page = (out / "index.html").read_text()
    assert "a stale warning" not in page and "overloaded alone" in page and "ran faster beside the enemies" in page
    assert "a stale warning" not in (out / "summary.md").read_text()


@pytest.fixture(autouse=True)
def _no_colour(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.mark.parametrize("layout", ["runs", "shuffled"])
@pytest.mark.parametrize("categorical", [False, True])
def test_each_cell_s_rows_are_the_groupby_s(layout, categorical):
    """analysis.cells finds each (configuration, scenario)'s rows from the stretches jobs
    come in (or the groupby, rows shuffled): the groupby's positions, a missing label in no cell."""
    from xtalk.analysis.cells import _cell_positions

    rows = [(cfg, sc) for _ in range(3) for cfg in ("iso", "shared") for sc in ("solo", "pi", "fft") for _ in range(400)]
    j = pd.DataFrame(rows, columns=["configuration", "scenario"])
    j.loc[[7, 900], "scenario"] = None
    if layout == "shuffled":
        j = j.sample(frac=1.0, random_state=3).reset_index(drop=True)
    if categorical:
        j = j.astype({"configuration": "category", "scenario": pd.CategoricalDtype(["unused", "pi", "solo", "fft"])})
    got = _cell_positions(j)
    want = {(a, b): np.asarray(ix) for (a, b), ix in
            j.groupby(["configuration", "scenario"], sort=False, observed=True).indices.items()}
    assert got.keys() == want.keys() and len(got) == 6
    for k in want:
        assert np.array_equal(got[k], want[k]), k


@pytest.mark.parametrize("categorical", [False, True])
def test_solo_spreads_from_the_runs_positions_are_the_groupby_s(categorical):
    """report.summary.solo_spreads (the `ci_too_wide` guard's input) reads each solo run's
    median from its rows' positions: the groupby's medians to the last bit, a NaN job and a
    run of NaN left out as the groupby leaves them, a configuration with one solo run none."""
    import statistics
    from types import SimpleNamespace

    from xtalk.report.summary import solo_spreads

    rng = np.random.default_rng(4)
    rows = []
    for cfg, runs in (("iso", 4), ("shared", 3), ("one", 1)):
        for r in range(runs):
            for sc in ("solo", "pi"):
                n = 301 + 2 * r  # odd and even counts: the mean of the two middle values too
                rows += [(cfg, sc, f"{cfg}-{sc}-{r}", float(v)) for v in rng.integers(90_000, 110_000 + 5_000 * r, n)]
    j = pd.DataFrame(rows, columns=["configuration", "scenario", "run_id", "exec_ns"])
    j.loc[5, "exec_ns"] = np.nan
    j.loc[j["run_id"] == "shared-solo-2", "exec_ns"] = np.nan
    if categorical:
        j = j.astype({"configuration": "category", "scenario": "category", "run_id": "category"})
    want = {}
    for cfg, g in j[j["scenario"] == "solo"].groupby("configuration", observed=True):
        med = [float(x) for x in g.groupby("run_id", observed=True)["exec_ns"].median().dropna()]
        if len(med) > 1:
            want[str(cfg)] = statistics.stdev(med) / statistics.fmean(med)
    got = solo_spreads(SimpleNamespace(measured=j))
    assert got == want and set(got) == {"iso", "shared"}


@pytest.mark.parametrize("layout", ["runs", "shuffled"])
def test_a_cell_s_misses_stretch_by_stretch_are_those_of_its_rows(layout):
    """analysis.cells counts a cell's misses and takes its largest lateness and
    responsiveness stretch by stretch of its rows (or on its rows copied out, rows
    interleaved): the numbers of the cell's rows taken whole, a 0/0 responsiveness (NaN)
    left out as pandas' max leaves it, a flag that disagrees with the times winning."""
    from xtalk.analysis import cells as ce

    rng = np.random.default_rng(9)
    parts = []
    for r in range(6):
        n = 500
        release = 10**12 + np.arange(n) * 1_000_000
        end = release + rng.integers(100_000, 2_400_000, n)
        parts.append(pd.DataFrame({"run_id": f"r{r}", "scenario": "solo" if r % 2 == 0 else "pi", "job": np.arange(n),
                                   "release_ns": release, "end_ns": end, "period_ns": 1_000_000,
                                   "deadline_ns": 1_000_000, "missed": pd.array([None] * n, dtype="boolean")}))
    j = pd.concat(parts, ignore_index=True)
    j.loc[[3, 1700], "deadline_ns"] = 0
    j.loc[1700, "end_ns"] = j.loc[1700, "release_ns"]  # 0 / 0
    j.loc[[10, 11], "missed"] = [True, False]
    j = j.drop(index=[40, 41]).reset_index(drop=True)  # two lost jobs in r0
    if layout == "shuffled":
        j = j.sample(frac=1.0, random_state=1).reset_index(drop=True)
    miss = ce._miss_columns(j)
    for (cfg, scen), ix in ce._cell_positions(j.assign(configuration="default")).items():
        c = j.iloc[ix]
        flags = c["missed"].astype(object).where(c["missed"].notna(), c["end_ns"] > c["release_ns"] + c["deadline_ns"])
        lost = sum(int(g.max() - g.min() + 1 - g.nunique()) for _, g in c.groupby("run_id")["job"])
        serious = int((c["end_ns"] > c["release_ns"] + 2 * c["period_ns"]).sum()) + lost
        want = (int(flags.astype(bool).sum()), lost, serious, int((c["end_ns"] - (c["release_ns"] + c["deadline_ns"])).max()),
                float(((c["end_ns"] - c["release_ns"]) / c["deadline_ns"]).max()))
        assert ce._cell_misses(j, ix, miss) == want, (scen, layout)
