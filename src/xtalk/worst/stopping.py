"""When `xtalk worst` may stop trying new candidates: a tolerance bound with a stated guarantee.

The claim, after `n` random candidates (drawn as the search draws them, space.Space.sample)
whose highest score is `M`:

    with confidence `confidence`, a candidate the search has not tried, drawn the same way,
    scores above `T = M × (1 + margin)` with probability at most `p`.

`p` (`Assessment.beyond`) is what the search reports after every round of its first phase;
the rule fires when `p ≤ 1 − confidence` (the 90/90 pairing of a one-sided tolerance bound,
Wilks 1941: "90 % sure that fewer than 10 % of the space is worse by more than the margin").

Why this holds (a noisy form of Wilks' argument). Let `q` be the score such that a drawn
candidate's true score is at least `q` with probability `p' ≥ p`. If the claim fails, then
`T < q`, so every one of the `n` measured scores is below `q / (1 + margin)`. One draw does
that with probability at most `1 − p'(1 − ε)`, where `ε` is the chance that a candidate's
measured score understates its true score by more than the factor `1 + margin`. The `n`
draws are independent, so the failure has probability at most `(1 − p(1 − ε))^n`; `p` is
chosen to make that `1 − confidence`:

    p = (1 − (1 − confidence)^(1/n)) / (1 − ε)

`ε`: a candidate's "true score" is the median of its measured score (the score a round of
the same runs gives it typically), so `ε ≤ 1/2` with no further assumption, and that is what
`xtalk worst` uses: at 90/90 the rule then needs 45 random candidates (Wilks' 22 without
noise). The margin sets the threshold the claim is about; with `ε = 1/2` the count does not
depend on it. Where a score's log noise is known to be at most `σ` (log-normal),
`ε = Φ(−ln(1+margin)/σ)` is smaller and the rule fires sooner (`noise_logs`: `σ` an upper
confidence bound from repeated measurements of one thing, the confidence split in two
halves). `xtalk worst` does not use that: an enemy can make a victim's times far noisier
than solo's, which the solo runs cannot bound, and then the shorter count over-claims
(tests/test_worst_stopping.py shows it failing its coverage).

Assumptions, stated in the result: the random candidates are independent draws of one
distribution (distinct ones: drawing without replacement only helps); the scores of
different candidates are independent given their true scores (a round's candidates share
its solo runs, which correlates them a little: the simulated searches of the tests do the
same and keep their coverage). The seeded candidates (each kind alone) are tried too and may
raise `M`, which only makes the claim safer; they do not count in `n`.

What it does not claim: that no worse candidate exists. A combination rarer than `p` in
the sampling distribution (one placement of one kind among thousands) can be missed by any
rule that samples; the bound says how rare it must be.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from scipy import stats

#: Defaults of `--margin` and `--confidence`.
MARGIN = 0.10
CONFIDENCE = 0.90
#: The least confidence a claim is made at (below it the rule says little), and the most.
CONFIDENCE_RANGE = (0.5, 0.999)
#: The largest margin accepted (a factor of 11 is no longer a margin).
MARGIN_MAX = 10.0
#: The assumptions the claim rests on, for result.json and the printout.
ASSUMPTIONS = (
    "the random candidates are independent draws of one distribution (space.sample); the seeded ones "
    "(each kind alone) are tried too but do not count",
    "a candidate's true score is the median of its measured score; candidates' measurements are independent "
    "given their true scores (a round's shared solo runs correlate them a little)",
)
#: Said when a noise bound is used (never by `xtalk worst`: see the module's docstring).
NOISE_ASSUMPTION = ("a score's log noise is normal with a standard deviation at most sigma, an upper bound from "
                    "repeated measurements of one thing (x sqrt 2: a score is a ratio of two statistics)")


@dataclass(frozen=True)
class Assessment:
    """The rule's estimate after `tried` random candidates."""

    tried: int
    best: float  # M: the highest score measured so far (seeded candidates included)
    threshold: float  # T = M × (1 + margin)
    beyond: float  # p: upper bound on the chance an untried candidate scores above T
    target: float  # 1 − confidence: the rule fires when beyond ≤ target
    miss: float  # ε: the chance a score understates its true value by more than the margin
    sigma: Optional[float]  # the noise bound used (None: ε = 1/2)
    needed: int  # random candidates the rule needs at this ε
    fired: bool

    def as_json(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def text(self, confidence: float) -> str:
        """One line: the estimate, and whether it meets the target."""
        head = (f"{self.tried} random candidates: with {confidence:.0%} confidence an untried one scores above "
                f"{self.threshold:.2f}× (best {self.best:.2f}× + margin) with probability ≤ {self.beyond:.1%}")
        if self.fired:
            return head + f" ≤ {self.target:.0%}: stop"
        return head + f" (the rule needs ≤ {self.target:.0%}: {self.needed} random candidates)"


def check(margin: float, confidence: float) -> None:
    """ValueError naming the option and the fix when either is out of range."""
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and 0 < margin <= MARGIN_MAX):
        raise ValueError(f"--margin: {margin!r} is outside (0, {MARGIN_MAX:g}]; give a share such as 10% or 0.1")
    lo, hi = CONFIDENCE_RANGE
    if not (isinstance(confidence, (int, float)) and math.isfinite(confidence) and lo <= confidence <= hi):
        raise ValueError(f"--confidence: {confidence!r} is outside [{lo:.0%}, {hi:.1%}]; give e.g. 90%")


def miss_probability(margin: float, sigma: Optional[float]) -> float:
    """ε: the chance that a median-unbiased score with log-normal noise `sigma` is below its
    true value by more than the factor `1 + margin` (1/2 when `sigma` is unknown)."""
    if sigma is None or not math.isfinite(sigma):
        return 0.5
    if sigma <= 0:
        return 0.0
    return min(0.5, float(stats.norm.cdf(-math.log1p(margin) / sigma)))


def beyond(n: int, alpha: float, miss: float) -> float:
    """p: the bound on the chance that an untried candidate scores above the threshold,
    after `n` random candidates, failing with probability `alpha`."""
    if n <= 0:
        return 1.0
    return min(1.0, (1.0 - alpha ** (1.0 / n)) / (1.0 - miss))


def needed(alpha: float, target: float, miss: float) -> int:
    """The fewest random candidates for which `beyond` ≤ `target`."""
    return max(1, math.ceil(math.log(alpha) / math.log1p(-target * (1.0 - miss))))


def noise_upper(log_values: Sequence[float], confidence: float) -> Optional[float]:
    """An upper confidence bound on the standard deviation of `log_values` (chi-square;
    None with fewer than 3 values)."""
    x = [float(v) for v in log_values if math.isfinite(v)]
    if len(x) < 3:
        return None
    mean = sum(x) / len(x)
    ss = sum((v - mean) ** 2 for v in x)
    return math.sqrt(ss / float(stats.chi2.ppf(1.0 - confidence, len(x) - 1)))


@dataclass(frozen=True)
class Rule:
    """The stopping rule of `xtalk worst`: `margin` (a share: 0.1 is 10 %) and `confidence`."""

    margin: float = MARGIN
    confidence: float = CONFIDENCE

    def __post_init__(self) -> None:
        check(self.margin, self.confidence)

    def assess(self, random_scores: Sequence[float], best: float, noise_logs: Sequence[float] = ()) -> Assessment:
        """The estimate after the random candidates' scores `random_scores` (one measured
        score each) and the highest score so far `best` (seeded candidates included).
        `noise_logs` (the log of repeated measurements of one statistic, e.g. each round's
        solo) gives a noise bound; fewer than 3, or none: ε = 1/2."""
        alpha = 1.0 - self.confidence
        n = sum(1 for s in random_scores if math.isfinite(s))
        sigma_solo = noise_upper(noise_logs, 1.0 - alpha / 2)
        if sigma_solo is not None:
            sigma = math.sqrt(2.0) * sigma_solo
            miss, a = miss_probability(self.margin, sigma), alpha / 2
        else:
            sigma, miss, a = None, 0.5, alpha
        p = beyond(n, a, miss)
        return Assessment(n, float(best), float(best) * (1.0 + self.margin), p, alpha, miss, sigma, needed(a, alpha, miss),
                          p <= alpha)

    def as_json(self) -> dict:
        return {"margin": self.margin, "confidence": self.confidence,
                "claim": (f"with {self.confidence:.0%} confidence, an untried candidate drawn as the search draws them "
                          f"scores above the best score × {1 + self.margin:g} with probability at most `beyond`; "
                          f"the rule fires when that is ≤ {1 - self.confidence:.0%}. Not a claim that no worse candidate "
                          "exists: one rarer than `beyond` can be missed"),
                "assumptions": list(ASSUMPTIONS)}
