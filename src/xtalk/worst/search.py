"""Successive halving over interleaved short runs: the search of `xtalk worst`.

Why successive halving and not Bayesian optimisation: the objective (a statistic of the
victim's time under a combination of enemies) is noisy, categorical (kinds, placements) and
cheap to compare only side by side. Successive halving (Jamieson & Talwalkar 2016; the
budgeted form of Karnin et al. 2013) needs no model of that space, spends the budget where
the candidates are still hard to tell apart, and its runs of one round are interleaved in one
experiment with `solo`, so every candidate's score is its ratio to the solo runs of the same
round (a slow drift of the machine moves both and cancels). A round keeps the best 1/eta of
its candidates and gives each survivor eta times the runs; a survivor's score pools all its
rounds (log ratios weighted by runs), so a lucky short run is outweighed by longer ones.

The logic here is pure: `evaluate(candidates, repetitions)` runs a round and returns each
candidate's score (higher hurts more) and the seconds it took; tests use a synthetic noisy
objective, `xtalk worst` the agent (runs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, Sequence, TypeVar

T = TypeVar("T")

#: Candidates a round keeps: 1/ETA of them.
ETA = 2
#: First-round sizes tried, largest first, when fitting the search into its budget.
FIRST_ROUND_SIZES = (96, 64, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2)


class BudgetTooSmall(ValueError):
    """Not even the smallest search fits: the message names the time it needs."""


@dataclass(frozen=True)
class Stage:
    """One planned round: candidates, runs of each (and of solo), estimated seconds, and
    how many it keeps."""

    candidates: int
    repetitions: int
    seconds: float
    keep: int


def stage_seconds(candidates: int, repetitions: int, run_s: float, round_overhead_s: float) -> float:
    """A round's time: every candidate and solo, `repetitions` runs each, plus its fixed cost
    (making and checking the round's experiment)."""
    return (candidates + 1) * repetitions * run_s + round_overhead_s


def schedule(first: int, run_s: float, round_overhead_s: float, finalists: int = 3, eta: int = ETA,
             first_repetitions: int = 1, batch: int | None = None, cap: int | None = None) -> list[Stage]:
    """The rounds of a search starting from `first` candidates: each keeps the best 1/eta
    (at least `finalists`) and gives them eta times the runs; the last round is the one that
    keeps `finalists` (a search of `finalists` or fewer is one round that keeps them all).
    With `batch`, the first round is tried in batches of that many (Explore). With `cap`, no
    candidate gets more than `cap` runs over all rounds: the round that reaches it keeps the
    finalists (the confirmation measures them with that many runs again: more precision in
    the search would rank finer than the confirmation can tell apart)."""
    out = []
    n, reps, total = first, first_repetitions, 0
    while True:
        if cap is not None:
            reps = max(1, min(reps, cap - total))
        total += reps
        capped = cap is not None and total >= cap
        keep = min(n, finalists if capped else max(finalists, math.ceil(n / eta)))
        secs = (explore_seconds(n, batch, reps, run_s, round_overhead_s) if batch and not out
                else stage_seconds(n, reps, run_s, round_overhead_s))
        out.append(Stage(n, reps, secs, keep))
        if keep <= finalists:
            return out
        n, reps = keep, reps * eta


def fit(budget_s: float, run_s: float, round_overhead_s: float, finalists: int = 3, eta: int = ETA,
        largest: int | None = None, batch: int | None = None, cap: int | None = None) -> list[Stage]:
    """The biggest schedule whose estimate fits `budget_s` (at most `largest` first-round
    candidates, `largest` itself tried first). BudgetTooSmall when none does. A first round
    tried in batches (`batch`: the stopping rule reads one score per candidate) has one run
    each; otherwise two are tried first."""
    sizes = ([largest] if largest is not None and largest not in FIRST_ROUND_SIZES else []) + list(FIRST_ROUND_SIZES)
    for first in sizes:
        if largest is not None and first > largest:
            continue
        for reps in ((1,) if batch else (2, 1)):
            plan = schedule(first, run_s, round_overhead_s, finalists, eta, reps, batch, cap)
            if sum(s.seconds for s in plan) <= budget_s:
                return plan
    least = sum(s.seconds for s in schedule(min(2, largest or 2), run_s, round_overhead_s, finalists, eta, 1, cap=cap))
    raise BudgetTooSmall(f"the smallest search takes about {least:.0f} s here (one run ≈ {run_s:.1f} s)")


@dataclass
class Arm(Generic[T]):
    """A candidate and what the rounds said of it."""

    item: T
    key: Hashable
    scores: list[tuple[int, int, float]] = field(default_factory=list)  # (round, repetitions, score)

    @property
    def score(self) -> float:
        """Pooled score: geometric mean of the rounds' scores weighted by their runs."""
        w = sum(r for _, r, _ in self.scores)
        if not w:
            return float("nan")
        return math.exp(sum(r * math.log(max(s, 1e-12)) for _, r, s in self.scores) / w)


@dataclass
class Trace:
    """The search as it went: every round's candidates, their scores, who was kept."""

    rounds: list[dict] = field(default_factory=list)
    stopped: str = ""
    #: The first round's batches: after each, what the stopping rule said (Explore.check).
    exploration: list[dict] = field(default_factory=list)
    #: Why the first round stopped trying new candidates: "rule", "budget", "exhausted"
    #: (every candidate drawn was tried) or "" (no rule).
    stopped_by: str = ""

    def as_json(self) -> dict:
        return {"rounds": self.rounds, "stopped": self.stopped, "exploration": self.exploration,
                "stopped_by": self.stopped_by}


@dataclass(frozen=True)
class Explore(Generic[T]):
    """The first round tried in batches of at most `batch` candidates; after each,
    `check(arms tried so far)` returns (fired, a record for the trace). When it fires, or
    when the next batch would not leave the later rounds their time, the search stops trying
    new candidates and halves among those tried. `more(arms tried so far)`, when given, is
    how many more candidates the rule needs before it can fire: a batch is never larger, so
    the rule is asked as soon as it can fire and no candidate is measured past it."""

    batch: int
    check: Callable[[list["Arm[T]"]], tuple[bool, dict]]
    more: Callable[[list["Arm[T]"]], int] | None = None


def explore_seconds(candidates: int, batch: int, repetitions: int, run_s: float, round_overhead_s: float) -> float:
    """The first round's time when tried in batches: each batch has its own solo runs and
    fixed cost."""
    full, rest = divmod(candidates, batch)
    return (full * stage_seconds(batch, repetitions, run_s, round_overhead_s)
            + (stage_seconds(rest, repetitions, run_s, round_overhead_s) if rest else 0.0))


def successive_halving(items: Sequence[T], evaluate: Callable[[list[T], int], tuple[dict, float]],
                       plan: list[Stage], budget_s: float, run_s: float, round_overhead_s: float = 0.0,
                       key: Callable[[T], Hashable] = lambda x: x, on_round: Callable[[int, list[Arm[T]], float], None] | None = None,
                       label: Callable[[T], str] = str, explore: Explore[T] | None = None, eta: int = ETA,
                       cap: int | None = None) -> tuple[list[Arm[T]], Trace]:
    """Run the planned rounds (`schedule`/`fit`: each keeps `stage.keep`) over the first
    `plan[0].candidates` of `items`, a run costing about `run_s`; return every arm ranked (the
    survivors of the last round first, by pooled score) and the trace. The budget holds:
    before each round the planned repetitions are cut to what the time left allows at the
    pace observed so far, and the search stops when not even one run each fits. With
    `explore`, the first round goes in batches until its rule fires or its time is spent
    (past `plan[0].candidates` too, while `items` last: spares for candidates that gave no
    score), and the later rounds (`eta`, `cap`: `schedule`) are planned again for the
    candidates tried."""
    arms = [Arm(x, key(x)) for x in (items if explore is not None else items[: plan[0].candidates])]
    alive = arms[: plan[0].candidates]
    spent, trace = 0.0, Trace()
    tried_ids: set[int] = set()
    finalists = plan[-1].keep
    state = {"pace": 1.0}  # observed / estimated seconds, from the rounds so far

    def measure(i: int, group: list[Arm[T]], reps: int) -> tuple[dict, float]:
        scores, seconds = evaluate([a.item for a in group], reps)
        planned = stage_seconds(len(group), reps, run_s, round_overhead_s)
        state["pace"] = max(0.25, seconds / planned) if planned > 0 else state["pace"]
        for a in group:
            if a.key in scores and math.isfinite(scores[a.key]):
                a.scores.append((i, reps, float(scores[a.key])))
        return scores, seconds

    i = 0
    while i < len(plan):
        stage = plan[i]
        n = len(alive)
        reps = stage.repetitions
        cost = lambda r: stage_seconds(n, r, run_s * state["pace"], round_overhead_s)  # noqa: E731
        if i == 0 and explore is not None:
            reps = reps if spent + cost(reps) <= budget_s else 1
            tried: list[Arm[T]] = []
            scores: dict = {}
            seconds = 0.0
            pool = arms if explore.more is not None else alive  # the planned first round, then spares for the rule
            while True:
                if len(tried) >= len(pool):
                    # Every candidate drawn was tried before the rule fired; without `more`
                    # the pool is the planned round, which the budget sized.
                    trace.stopped_by = "exhausted" if explore.more is not None else "budget"
                    break
                size = explore.batch
                if explore.more is not None:
                    size = min(size, max(1, explore.more(tried)))
                group = pool[len(tried): len(tried) + size]
                # The next batch, and the later rounds for every candidate tried then, at the
                # pace so far; the first batch needs only to fit itself.
                run = run_s * state["pace"]
                later = sum(s.seconds for s in schedule(len(tried) + len(group), run, round_overhead_s, finalists, eta,
                                                        reps, cap=cap)[1:]) if tried else 0.0
                if spent + stage_seconds(len(group), reps, run, round_overhead_s) + later > budget_s:
                    trace.stopped_by = "budget"
                    break
                got, secs = measure(i, group, reps)
                spent, seconds = spent + secs, seconds + secs
                scores.update(got)
                tried += group
                fired, record = explore.check([a for a in tried if a.scores])
                trace.exploration.append({**record, "candidates": len(tried), "seconds": round(spent, 2)})
                if fired:
                    trace.stopped_by = "rule"
                    break
            if not tried:
                trace.stopped = f"round 1: about {cost(1):.0f} s needed, {budget_s - spent:.0f} s left"
                break
            alive = tried
            tried_ids = {id(a) for a in tried}  # the spares never tried are not returned
            # The later rounds planned again for the candidates tried.
            rest = schedule(len(tried), run_s, round_overhead_s, finalists, eta, reps, cap=cap)
            stage = Stage(len(tried), reps, seconds, rest[0].keep)
            plan = [stage] + rest[1:]
        else:
            while reps > 1 and spent + cost(reps) > budget_s:
                reps -= 1
            if spent + cost(reps) > budget_s:
                trace.stopped = f"round {i + 1}: about {cost(reps):.0f} s needed, {budget_s - spent:.0f} s left"
                break
            scores, seconds = measure(i, alive, reps)
            spent += seconds
        ranked = sorted(alive, key=lambda a: -_finite(a.score))
        last = i == len(plan) - 1
        keep = ranked[: stage.keep]
        trace.rounds.append({
            "round": i + 1, "repetitions": reps, "seconds": round(seconds, 2),
            "candidates": [{"key": str(a.key), "label": label(a.item), "score": _round(scores.get(a.key)),
                            "pooled": _round(a.score), "kept": a in keep} for a in ranked],
        })
        if on_round:
            on_round(i, ranked, spent)
        alive = keep
        i += 1
        if len(alive) <= 1 and not last:
            break
    ranked_alive = sorted(alive, key=lambda a: -_finite(a.score))
    rest = sorted((a for a in arms if a not in alive and (explore is None or id(a) in tried_ids)),
                  key=lambda a: (-len(a.scores), -_finite(a.score)))
    return ranked_alive + rest, trace


def _finite(x: float) -> float:
    return x if isinstance(x, float) and math.isfinite(x) else float("-inf")


def _round(x) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 4)
