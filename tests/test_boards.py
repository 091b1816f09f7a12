"""analysis/boards.py: board-to-board variation split from a kernel's effect, on synthetic
per-run results with planted per-board offsets and a planted kernel effect."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from xtalk.analysis.boards import board_split, per_run

#: Planted board offsets (log scale; their SD is 5 %).
OFFSETS = np.array([-0.06, -0.03, 0.0, 0.02, 0.04, 0.08])


def synthetic(offsets, effect, *, runs=10, noise=0.01, nested=False, seed=1) -> pd.DataFrame:
    """One row per run: board i's runs scaled by exp(offsets[i]), rt's by ``effect``; nested:
    even boards run stock only, odd boards rt only."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, o in enumerate(offsets):
        for kernel, e in (("stock", 1.0), ("rt", effect)):
            if nested and (i % 2 == 0) != (kernel == "stock"):
                continue
            for _ in range(runs):
                rows.append({"board": f"board-{i}", "kernel": kernel,
                             "value": 2e6 * math.exp(o) * e * math.exp(rng.normal(0, noise))})
    return pd.DataFrame(rows)


def test_planted_board_offsets_and_kernel_effect_are_split():
    s = board_split(synthetic(OFFSETS, 0.88))
    planted_sd = math.expm1(float(np.std(OFFSETS, ddof=1)))
    assert s.board_sd_low < planted_sd < s.board_sd_high
    assert s.board_concluded and abs(s.board_sd - planted_sd) < 0.02
    (rt,) = s.effects
    assert (rt.level, rt.reference, rt.design) == ("rt", "stock", "within boards")
    assert rt.low < 0.88 < rt.high and rt.significant
    # each board's offset recovered, the kernel effect removed from it
    got = np.log([s.offsets[f"board-{i}"] for i in range(len(OFFSETS))])
    assert np.allclose(got, OFFSETS - OFFSETS.mean(), atol=0.01)
    assert "the boards differ" in s.lines()[0] and "significant" in s.lines()[1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_planting_nothing_claims_nothing(seed):
    s = board_split(synthetic(np.zeros(6), 1.0, seed=seed))
    assert not s.board_concluded
    assert not s.effects[0].significant and s.effects[0].concluded
    assert "no board-to-board variation" in s.lines()[0]


def test_nested_boards_widen_the_kernel_ci_where_a_pooled_test_would_claim_an_effect():
    """Even boards ran stock, odd boards rt, no kernel effect planted: the boards' offsets
    make rt look 4 % slower run by run; the split's CI carries the board variation."""
    runs = synthetic(OFFSETS, 1.0, nested=True)
    rt, stock = (np.log(runs.loc[runs.kernel == k, "value"]) for k in ("rt", "stock"))
    assert stats.ttest_ind(rt, stock, equal_var=False).pvalue < 0.01  # the trap is real
    s = board_split(runs)
    (eff,) = s.effects
    assert eff.design == "between boards" and not eff.significant and eff.low < 1 < eff.high
    assert s.board_concluded


def test_nested_boards_still_find_a_large_kernel_effect():
    (eff,) = board_split(synthetic(OFFSETS, 0.7, nested=True)).effects
    assert eff.significant and eff.low < 0.7 < eff.high


def test_one_board_per_kernel_is_confounded_and_claims_no_ci():
    s = board_split(synthetic(OFFSETS[:2], 0.88, nested=True))
    (eff,) = s.effects
    assert eff.design == "confounded" and not eff.concluded and not eff.significant
    assert any("cannot be told" in n for n in s.notes)
    assert math.isnan(s.board_sd)


def test_one_board_with_both_kernels_says_its_effect_elsewhere_is_unknown():
    s = board_split(synthetic(OFFSETS[:1], 0.88))
    (eff,) = s.effects
    assert eff.design == "one board" and eff.significant
    assert any("not known" in n for n in s.notes)


def test_reference_level_and_bad_input():
    runs = synthetic(OFFSETS[:3], 0.88)
    (eff,) = board_split(runs, reference="rt").effects
    assert eff.reference == "rt" and eff.ratio > 1
    with pytest.raises(ValueError, match="reference 'vm'"):
        board_split(runs, reference="vm")
    with pytest.raises(ValueError, match="no run"):
        board_split(runs.assign(value=0.0))
    assert board_split(runs).to_dict()["effects"][0]["level"] == "rt"


def test_per_run_reads_each_runs_statistics_and_labels():
    jobs = pd.DataFrame({"run_id": ["a"] * 100 + ["b"] * 100 + ["c"] * 10,
                         "response_ns": list(range(100)) + list(range(100, 200)) + [1] * 10})
    labels = {"a": {"board": "b1", "kernel": "stock"}, "b": {"board": "b2", "kernel": "rt"}, "c": {}}
    pr = per_run(jobs, labels).set_index("run_id")
    assert list(pr.index) == ["a", "b"]  # c has no board: left out
    assert pr.loc["a", "median"] == pytest.approx(49.5) and pr.loc["b", "p99"] == pytest.approx(198.01)
    assert pr.loc["b", "kernel"] == "rt"


def test_a_lab_campaigns_summary_splits_boards_from_kernels(tmp_path):
    """A synthetic lab campaign (every cell on four boards under two kernels), the boards
    planted 0 %, +4 %, +8 %, +12 % and rt planted 15 % faster: the summary says both apart."""
    from rich.console import Console

    from xtalk.results import campaign_cells as cc
    from xtalk.report import boards as bd
    from xtalk.report.campaign_summary import write_campaign_summary
    from xtalk.testing.synthetic_campaign import write_campaign

    boards = {"board-1": 1.0, "board-2": 1.04, "board-3": 1.08, "board-4": 1.12}
    root = write_campaign(tmp_path / "lab", families=[], configurations=("fifo",), repetitions=3, jobs=60,
                          boards=boards, kernels={"stock": 1.0, "rt": 0.85})
    found = bd.splits(cc.load_campaign(root))
    assert {c.cell for c in found} == {"aocs · fifo · default · solo"}
    p99 = next(c.split for c in found if c.split.stat == "median")
    assert p99.factor == "kernel" and p99.board_concluded and set(p99.boards) == set(boards)
    assert p99.offsets["board-4"] > p99.offsets["board-1"]
    (rt,) = p99.effects
    assert rt.significant and rt.high < 0.95 and rt.design == "within boards"
    console = Console(record=True, width=200)
    write_campaign_summary(root, console, n_boot=200)
    text = console.export_text()
    assert "boards: aocs · fifo · default · solo: median: board-to-board SD" in text and "the boards differ" in text
    assert "## Boards and kernels" in (root / "summary.md").read_text()


def test_a_campaign_without_boards_has_no_board_section(tmp_path):
    from xtalk.results import campaign_cells as cc
    from xtalk.report import boards as bd
    from xtalk.testing.synthetic_campaign import write_campaign

    root = write_campaign(tmp_path / "plain", families=[], configurations=("fifo",), repetitions=2, jobs=20)
    assert bd.splits(cc.load_campaign(root)) == [] and bd.markdown([]) == ""


def test_two_noisy_boards_with_nothing_planted_rarely_claim_the_boards_differ():
    """Two boards, two kernels, three runs per cell, 10 % run noise (the lab test's shape):
    the board term's lower end is an F test, so a residual estimated small on one df does
    not make identical boards differ more often than the level allows."""
    claims = sum(board_split(synthetic(np.zeros(2), 1.0, runs=3, noise=0.1, seed=s)).board_concluded
                 for s in range(200))
    assert claims <= 6  # 2.5 % one-sided: 5 expected of 200 (the χ² lower end alone claimed 8)


def test_a_lab_campaigns_report_has_its_boards_section_and_table(tmp_path):
    from xtalk.report.campaign_report import build_campaign
    from xtalk.testing.synthetic_campaign import write_campaign

    root = write_campaign(tmp_path / "lab", families=[], configurations=("fifo",), repetitions=3, jobs=40,
                          boards={"b1": 1.0, "b2": 1.1, "b3": 1.2}, kernels={"stock": 1.0, "rt": 0.8})
    index = build_campaign(root, tmp_path / "report", csv=False, n_boot=100)
    page = index.read_text()
    assert "Boards and kernels" in page and "board-to-board SD" in page
    table = pd.read_csv(tmp_path / "report" / "tables" / "boards.csv")
    assert set(table["stat"]) == {"p99", "median"} and set(table["effect_level"]) == {"rt"}
    assert (table["effect_high"] < 1).all() and (table["boards"] == 3).all()
