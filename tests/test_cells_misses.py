"""A cell's misses (analysis.cells._cell_misses) computed stretch by stretch equal the
definitions applied to the cell's rows at once (verdict.classify_misses's columns), whether
the rows come in runs or interleaved, with a zero deadline (infinite responsiveness) and a
job of no time (NaN)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xtalk.analysis import cells as ce


def _jobs(order: str) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 3 * 400
    rel = np.arange(n, dtype=np.int64) % 400 * 1_000_000
    per = np.full(n, 1_000_000, dtype=np.int64)
    end = rel + rng.integers(100_000, 2_600_000, n)
    j = pd.DataFrame({"run_id": np.repeat(["a", "b", "c"], 400), "scenario": np.repeat(["solo", "pi", "pi"], 400),
                      "job": np.tile(np.arange(400), 3), "release_ns": rel, "end_ns": end, "period_ns": per,
                      "deadline_ns": per.copy(), "missed": end > rel + per})
    j.loc[5, "deadline_ns"] = 0                      # zero deadline: infinite responsiveness
    j.loc[6, ["deadline_ns", "end_ns"]] = [0, j.loc[6, "release_ns"]]  # 0 / 0: NaN, left out of the maximum
    j = j.drop(index=[450, 451])                     # two lost jobs in run b
    if order == "interleaved":
        j = j.iloc[np.argsort(np.tile(np.arange(len(j) // 2 + 1), 2)[:len(j)], kind="stable")]
    return j.reset_index(drop=True)


@pytest.mark.parametrize("order", ["runs", "interleaved"])
def test_misses_stretch_by_stretch_equal_the_whole_cells(order):
    j = _jobs(order)
    miss = ce._miss_columns(j)
    rel, end, per, dl = (j[c].to_numpy() for c in ("release_ns", "end_ns", "period_ns", "deadline_ns"))
    for scen in ("solo", "pi"):
        ix = np.flatnonzero(j["scenario"].to_numpy() == scen)
        got = ce._cell_misses(j, ix, miss)
        with np.errstate(divide="ignore", invalid="ignore"):
            resp = pd.Series(((end - rel) / dl)[ix]).max()
        lost = 2 if scen == "pi" else 0
        want = (int(j["missed"].to_numpy()[ix].sum()), lost, int((end > rel + 2 * per)[ix].sum()) + lost,
                int((end - (rel + dl))[ix].max()), float(resp))
        assert got == want
    assert ce._cell_misses(j, np.flatnonzero(j["scenario"].to_numpy() == "solo"), miss)[4] == np.inf
