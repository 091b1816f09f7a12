"""Is a change significant? The one judgement `xtalk compare` (and a gate) makes about two
measurements of the same cell: before (the first label: a kernel, a board, a commit) and
after.

The ratio ``stat(after) / stat(before)`` and its CI come from :func:`stats.ratio_cis` over
the runs of both sides (runs, then jobs within them, resampled; widened for few runs), the
same interval as a slowdown against solo. A change is *significant* when the CI excludes 1
(pyperf's "1.12x slower (significant)"), otherwise "no significant change". The minimum
detectable change is the relative change the interval's half-width (on the log scale) spans:
with these runs, a change smaller than it could not have been told from noise, so "no
significant change" means "none larger than that".

The runs of one side were interleaved with each other by xtalk; the two sides were measured
at different times (often on different machines), so drift between them (temperature,
firmware, other load) is not controlled and is part of what a significant change may show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .stats import ratio_cis

#: What `xtalk compare` says about drift between the two sides.
DRIFT_NOTE = ("runs within one results directory were interleaved; between directories machine drift is not "
              "controlled, so a significant change may include it")


@dataclass(frozen=True)
class Change:
    """One statistic of one cell, after against before."""

    stat: str
    ratio: float
    low: float
    high: float
    runs: tuple[int, int]  # (before, after)
    level: float = 0.95

    @property
    def concluded(self) -> bool:
        """Both ends of the CI known (enough runs and jobs on each side)."""
        return all(math.isfinite(x) for x in (self.ratio, self.low, self.high))

    @property
    def significant(self) -> bool:
        """The CI excludes 1."""
        return self.concluded and (self.low > 1 or self.high < 1)

    @property
    def direction(self) -> str:
        """"slower" (the statistic grew), "faster" or "same"."""
        return "slower" if self.ratio > 1 else "faster" if self.ratio < 1 else "same"

    @property
    def minimum_detectable(self) -> float:
        """The relative change the CI's half-width spans (0.05: 5 %); NaN without a CI."""
        if not self.concluded or self.low <= 0:
            return math.nan
        return math.sqrt(self.high / self.low) - 1

    def words(self) -> str:
        """"1.12× slower, significant", "1.05× faster, not significant" or "no data"."""
        if not self.concluded:
            return "not comparable (a side has no jobs)" if not math.isfinite(self.ratio) else \
                f"{self.ratio:.2f}× (no CI: too few runs)"
        if self.ratio >= 1:
            size = f"{self.ratio:.2f}× {self.direction}" if self.ratio > 1 else "the same"
        else:
            size = f"{1 / self.ratio:.2f}× faster"
        return f"{size}, significant" if self.significant else \
            f"no significant change ({size}; smallest detectable ±{100 * self.minimum_detectable:.0f} %)"

    def within(self, allowed: float) -> str:
        """The change against an allowed growth (0.05: +5 %) as an ε verdict: holds when the
        whole CI is at or below 1 + allowed, violated when all of it is above, inconclusive
        when it straddles it (analysis.verdict.bound_verdict)."""
        from .verdict import bound_verdict

        return bound_verdict(self.low, self.high, 1 + allowed)

    def to_dict(self) -> dict:
        """The JSON shape (`xtalk compare --json`)."""
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {"stat": self.stat, "ratio": num(self.ratio), "low": num(self.low), "high": num(self.high),
                "level": self.level, "runs_before": self.runs[0], "runs_after": self.runs[1],
                "significant": self.significant, "direction": self.direction,
                "minimum_detectable_change": num(self.minimum_detectable), "verdict": self.words()}


def changes(before: Sequence[np.ndarray], after: Sequence[np.ndarray], stats: Sequence[str] = ("median", "p99"), *,
            level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict[str, Change]:
    """The :class:`Change` of each of ``stats`` from per-run samples of each side (one array
    per run). A side without jobs gives NaN ratios (``concluded`` false)."""
    before = [np.asarray(g, dtype=float) for g in before if len(g)]
    after = [np.asarray(g, dtype=float) for g in after if len(g)]
    runs = (len(before), len(after))
    if not before or not after:
        return {s: Change(s, math.nan, math.nan, math.nan, runs, level) for s in stats}
    cis = ratio_cis(after, before, tuple(stats), level=level, n_boot=n_boot, seed=seed)
    return {s: Change(s, ci.estimate, ci.low, ci.high, runs, level) for s, ci in cis.items()}
