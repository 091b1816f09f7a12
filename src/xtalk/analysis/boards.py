"""Board-to-board variation against a kernel's (or configuration's) effect: a lab campaign
measures the same cells on a pool of identical boards under several kernels; "RT is 12 %
better at p99" must not be "board 3 is slower".

The model, on the log of a per-run statistic (a run's p99 or median; logs so that effects are
ratios): ``y = μ + α_kernel + u_board + w_board×kernel + e_run`` with ``u ~ N(0, σ_b²)`` the
board's random offset, ``w`` how a kernel's effect differs between boards, ``e ~ N(0, σ_e²)``
run-to-run noise. It is estimated as a random-effect ANOVA on the (board, kernel) cell means,
the summary-statistics approach of mixed models, exact for balanced designs and with closed
forms (no iterative fit, no new dependency):

- **σ_e²**: the pooled within-cell variance of runs (df = runs − cells); a cell mean's noise
  ``v_e = σ_e² · mean(1/n)``.
- **σ_b²** (boards that ran every kernel, "crossed"): the two-way ANOVA without replication on
  their cell means, ``σ_b² = (MS_board − MS_resid) / K`` with ``MS_resid`` the board × kernel
  mean square (or ``v_e`` for one kernel, or when it is larger); its CI's lower end from the
  F interval of ``MS_board / MS_resid`` (above zero exactly when the F test says the boards
  differ), its upper end the χ² interval of ``MS_board`` on ``B − 1`` df less ``MS_resid``
  (Tukey–Williams). Boards that ran one
  kernel each ("nested") give it from their deviations around their kernel's mean
  (df = Σ(B_k − 1)), board × kernel variation included.
- **A kernel's effect** against the reference: crossed, the mean over boards of each board's
  own difference (the board's offset cancels) with a t interval on ``boards − 1`` df, so the
  CI is as wide as the kernel's effect varies between boards; nested, the difference of the
  kernels' board means with the between-board mean square (t on its df), so the CI carries
  the whole board-to-board variation. One board per kernel: board and kernel are
  confounded, no CI is claimed and a note says so.

Few boards make wide intervals (t on 1 df with two boards): that is the honest price of
telling boards from kernels; the run count cannot buy it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

#: What a design too small for a number reads as.
NOT_KNOWN = math.nan


@dataclass(frozen=True)
class KernelEffect:
    """One level of the factor against the reference level: the ratio of the statistic
    (level / reference) with its CI; ``design`` says how it was estimated."""

    level: str
    reference: str
    ratio: float
    low: float
    high: float
    boards: int
    design: str  # "within boards", "between boards", "one board", "confounded"

    @property
    def concluded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def significant(self) -> bool:
        """The CI excludes 1."""
        return self.concluded and (self.low > 1 or self.high < 1)

    def words(self, stat: str) -> str:
        """"rt: 0.88× stock at p99 [0.84, 0.93], significant (within boards, 6 boards)"."""
        ci = f" [{self.low:.3g}, {self.high:.3g}]" if self.concluded else ""
        verdict = "significant" if self.significant else "no significant effect" if self.concluded else "not estimable"
        return (f"{self.level}: {self.ratio:.3g}× {self.reference} at {stat}{ci}, {verdict} "
                f"({self.design}, {self.boards} board{'s' if self.boards != 1 else ''})")


@dataclass(frozen=True)
class BoardSplit:
    """The split of one statistic: the boards' random effect and each level's fixed effect."""

    stat: str
    factor: str
    boards: tuple[str, ...]
    runs: int
    #: Between-board standard deviation as a relative size (exp(σ_b) − 1), with its CI.
    board_sd: float
    board_sd_low: float
    board_sd_high: float
    #: Run-to-run standard deviation within a board and kernel, relative.
    run_sd: float
    #: board -> its offset as a ratio to the pool (kernel effects removed).
    offsets: dict[str, float]
    effects: tuple[KernelEffect, ...]
    notes: tuple[str, ...] = field(default=())
    level: float = 0.95

    @property
    def board_concluded(self) -> bool:
        """The between-board CI excludes zero: the boards differ beyond run-to-run noise."""
        return math.isfinite(self.board_sd_low) and self.board_sd_low > 0

    def lines(self) -> list[str]:
        """The split in words, one line each: the boards, then every level's effect, then notes."""
        pct = lambda x: f"{100 * x:.3g} %" if math.isfinite(x) else "unknown"  # noqa: E731
        said = ("the boards differ" if self.board_concluded
                else "no board-to-board variation beyond run-to-run noise shown")
        out = [f"{self.stat}: board-to-board SD {pct(self.board_sd)} "
               f"[{pct(self.board_sd_low)}, {pct(self.board_sd_high)}] over {len(self.boards)} boards "
               f"(run-to-run {pct(self.run_sd)}): {said}"]
        out += [e.words(self.stat) for e in self.effects]
        return out + list(self.notes)

    def to_dict(self) -> dict:
        num = lambda v: v if math.isfinite(v) else None  # noqa: E731
        return {"stat": self.stat, "factor": self.factor, "boards": list(self.boards), "runs": self.runs,
                "board_sd": num(self.board_sd), "board_sd_low": num(self.board_sd_low),
                "board_sd_high": num(self.board_sd_high), "run_sd": num(self.run_sd),
                "offsets": {b: num(v) for b, v in self.offsets.items()},
                "effects": [{"level": e.level, "reference": e.reference, "ratio": num(e.ratio), "low": num(e.low),
                             "high": num(e.high), "boards": e.boards, "design": e.design,
                             "significant": e.significant} for e in self.effects],
                "notes": list(self.notes), "level": self.level}


def _rel(log_sd: float) -> float:
    return math.expm1(log_sd) if math.isfinite(log_sd) else math.nan


def _board_ci(ms_b: float, df_b: int, ms_r: float, df_r: int, scale: float, level: float) -> tuple[float, float]:
    """CI of σ_b from ``E[ms_b] = scale·σ_b² + E[ms_r]``, mean squares on ``df_b`` and ``df_r``
    df. Lower end: the F interval of the ratio ms_b/ms_r (zero unless the F test at the level
    says the boards differ, so a residual estimated small on few df cannot make boards
    differ); upper end: the χ² interval of ms_b less ms_r (Tukey–Williams)."""
    if df_b < 1 or not math.isfinite(ms_b):
        return math.nan, math.nan
    a = (1 - level) / 2
    hi = (df_b * ms_b / stats.chi2.ppf(a, df_b) - ms_r) / scale
    if df_r < 1 or ms_r <= 0:
        lo = (df_b * ms_b / stats.chi2.ppf(1 - a, df_b) - ms_r) / scale
    else:
        lo = (ms_b / stats.f.ppf(1 - a, df_b, df_r) - ms_r) / scale
    return math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))


def board_split(runs: pd.DataFrame, *, stat: str = "p99", value: str = "value", board: str = "board",
                factor: str = "kernel", reference: str | None = None, level: float = 0.95) -> BoardSplit:
    """Split a per-run statistic (one row per run: ``board``, ``factor``, ``value`` > 0) into
    the boards' random effect and the factor's effects (module docstring). ``reference`` is the
    level the others are compared with (default: the first level in row order)."""
    df = runs[[board, factor, value]].dropna()
    df = df[df[value] > 0]
    if df.empty:
        raise ValueError("board_split: no run with a positive value")
    y = np.log(df[value].to_numpy(float))
    b = df[board].astype(str).to_numpy()
    k = df[factor].astype(str).to_numpy()
    levels = list(dict.fromkeys(k))
    if reference is not None and reference not in levels:
        raise ValueError(f"board_split: reference {reference!r} is not a level of {factor} ({', '.join(levels)})")
    ref = reference or levels[0]
    levels = [ref] + [x for x in levels if x != ref]
    boards = list(dict.fromkeys(b))
    cells = pd.DataFrame({"b": b, "k": k, "y": y}).groupby(["b", "k"], sort=False)["y"].agg(["mean", "var", "count"])
    n_runs, n_cells = len(y), len(cells)
    within = float(((cells["count"] - 1) * cells["var"].fillna(0)).sum())
    df_e = n_runs - n_cells
    s2_e = within / df_e if df_e > 0 else math.nan
    v_e = s2_e * float((1 / cells["count"]).mean()) if df_e > 0 else 0.0
    m = cells["mean"].unstack("k").reindex(index=boards, columns=levels)  # board × level cell means
    notes: list[str] = []

    crossed = [x for x in boards if m.loc[x].notna().all()]
    nested = all(m.loc[x].notna().sum() == 1 for x in boards)
    kk = len(levels)
    if len(crossed) >= 2:
        mc = m.loc[crossed].to_numpy()
        rows, cols, grand = mc.mean(axis=1), mc.mean(axis=0), mc.mean()
        df_b = len(crossed) - 1
        ms_b = kk * float(((rows - grand) ** 2).sum()) / df_b
        if kk > 1:
            ms_r, df_r = float(((mc - rows[:, None] - cols[None, :] + grand) ** 2).sum()) / (df_b * (kk - 1)), \
                df_b * (kk - 1)
            if v_e > ms_r:  # the interaction is below run noise: the noise is the residual
                ms_r, df_r = v_e, df_e
        else:
            ms_r, df_r = v_e, df_e
        s2_b = max(0.0, (ms_b - ms_r) / kk)
        sd_lo, sd_hi = _board_ci(ms_b, df_b, ms_r, df_r, kk, level)
        offsets = dict(zip(crossed, np.exp(rows - grand)))
        if len(crossed) < len(boards):
            notes.append(f"boards that did not run every {factor} are left out of the board-to-board estimate: "
                         + ", ".join(x for x in boards if x not in crossed))
    else:
        dev = m.sub(m.mean(axis=0), axis=1)  # each board's cell mean around its level's mean
        df_b = int((m.notna().sum(axis=0) - 1).clip(lower=0).sum())
        ss = float(np.nansum(dev.to_numpy() ** 2))
        ms_b = ss / df_b if df_b > 0 else math.nan
        s2_b = max(0.0, ms_b - v_e) if df_b > 0 else math.nan
        sd_lo, sd_hi = _board_ci(ms_b, df_b, v_e, df_e, 1.0, level)
        offsets = {x: float(np.exp(np.nanmean(dev.loc[x].to_numpy()))) for x in boards}
        if df_b == 0:
            notes.append(f"every {factor} ran on one board only: board-to-board variation cannot be measured")

    effects = []
    t = lambda dof: stats.t.ppf(1 - (1 - level) / 2, dof)  # noqa: E731
    for lv in levels[1:]:
        both = m[[ref, lv]].dropna()
        if len(both) >= 2:
            d = (both[lv] - both[ref]).to_numpy()
            se = max(float(d.std(ddof=1)) / math.sqrt(len(d)), math.sqrt(2 * v_e / len(d)) if v_e else 0.0)
            est, half, design, nb = float(d.mean()), t(len(d) - 1) * se, "within boards", len(d)
        elif len(both) == 1 and df_e > 0:
            x = both.index[0]
            n1, n0 = cells.loc[(x, lv), "count"], cells.loc[(x, ref), "count"]
            est = float(both[lv].iloc[0] - both[ref].iloc[0])
            half, design, nb = t(df_e) * math.sqrt(s2_e * (1 / n1 + 1 / n0)), "one board", 1
            notes.append(f"{lv} against {ref} on board {x} alone: its effect on other boards is not known")
        else:
            on_l, on_r = m[lv].dropna(), m[ref].dropna()
            est, nb = float(on_l.mean() - on_r.mean()), len(on_l) + len(on_r)
            if nested and df_b > 0:
                half, design = t(df_b) * math.sqrt(ms_b * (1 / len(on_l) + 1 / len(on_r))), "between boards"
            else:
                half, design = math.nan, "confounded"
                notes.append(f"{lv} and {ref} ran on different single boards: the {factor}'s effect cannot be told "
                             "from the boards'")
        effects.append(KernelEffect(lv, ref, math.exp(est), math.exp(est - half), math.exp(est + half), nb, design))

    return BoardSplit(stat, factor, tuple(boards), n_runs, _rel(math.sqrt(s2_b)) if math.isfinite(s2_b) else math.nan,
                      _rel(sd_lo), _rel(sd_hi), _rel(math.sqrt(s2_e)) if math.isfinite(s2_e) else math.nan,
                      {x: float(v) for x, v in offsets.items()}, tuple(effects), tuple(notes), level)


def per_run(jobs: pd.DataFrame, labels: dict[str, dict], *, column: str = "response_ns", board: str = "board",
            factor: str = "kernel", stats_: Sequence[str] = ("median", "p99")) -> pd.DataFrame:
    """One row per run: its board, factor level and each statistic of ``column`` over its jobs
    (``labels``: run_id -> the run's labels), the input of :func:`board_split`."""
    q = {"median": 0.5, "p99": 0.99}
    g = jobs.groupby("run_id", observed=True)[column]
    out = pd.DataFrame({s: g.quantile(q[s]) for s in stats_})
    out[board] = [labels.get(r, {}).get(board) for r in out.index]
    out[factor] = [labels.get(r, {}).get(factor) for r in out.index]
    return out.dropna(subset=[board, factor]).reset_index()
