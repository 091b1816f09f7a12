"""The stopping rule of `xtalk worst` (worst/stopping.py) against synthetic noisy objectives
whose true scores are known: its claimed confidence holds, it stops early on a flat objective
and claims nothing beyond the margin, a planted group of much worse candidates is found
before it stops, and a rule that ignores the noise fails the same check (the check can fail).

Pure Python: each simulated search draws candidates, measures them as `xtalk worst` does (a
round's candidates share that round's solo runs, so their noise is correlated within a
round), and asks the rule after every round.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from xtalk.worst import search, stopping

BATCH = 12
SEARCHES = 200
CLAIM = 0.90


def simulate(draw, sigma: float, rule: stopping.Rule, rng: np.random.Generator, planned: int = 96,
             enemy_noise=None, use_noise_bound: bool = False, batch: int = BATCH):
    """One search's first phase: rounds of `batch` random candidates until the rule fires or
    `planned` are tried. A score is true × candidate noise / the round's solo noise, both
    log-normal with sigma/√2 (a score's log noise is sigma), or a candidate's own
    `enemy_noise(true)` (an enemy that makes the victim noisier than solo). With
    `use_noise_bound`, the rule gets the rounds' solo statistics for its noise bound.
    Returns the last assessment."""
    scores: list[float] = []
    solo_logs: list[float] = []
    a = rule.assess([], 1.0)
    while len(scores) < planned:
        solo = rng.normal(0.0, sigma / math.sqrt(2))
        solo_logs.append(solo)
        true = draw(rng, batch)
        own = enemy_noise(true) if enemy_noise else np.full(batch, sigma / math.sqrt(2))
        scores += list(true * np.exp(rng.normal(0.0, 1.0, batch) * own - solo))
        a = rule.assess(scores, max(scores), solo_logs if use_noise_bound else ())
        if a.fired:
            break
    return a


def coverage(draw, tail, rule: stopping.Rule, seed: int, claim=None, **kw) -> tuple[float, int]:
    """The share of SEARCHES simulated searches whose final claim holds: the true chance of a
    fresh candidate scoring above the threshold (`tail(t)`) is within the claimed bound."""
    rng = np.random.default_rng(seed)
    held = fired = 0
    for _ in range(SEARCHES):
        a = simulate(draw, rng=rng, rule=rule, **kw) if claim is None else claim(rng)
        held += tail(a.threshold) <= a.beyond
        fired += a.fired
    return held / SEARCHES, fired


def binomial_floor(n: int = SEARCHES, level: float = CLAIM, alpha: float = 0.01) -> float:
    """The lowest observed coverage a rule whose true coverage is exactly `level` shows with
    probability 1 − alpha (one-sided binomial): below it, the claim is refuted at 1 %."""
    return float(stats.binom.ppf(alpha, n, level)) / n


# A continuous population: true slowdowns log-normal around 1.3× (most combinations mild).
def lognormal(rng, n):
    return np.exp(rng.normal(math.log(1.3), 0.25, n))


def lognormal_tail(t):
    return float(stats.norm.sf((math.log(t) - math.log(1.3)) / 0.25))


# A planted group: 12 % of the space is 2× (more than the 10 % the rule may miss), the rest 1.1×.
PLANTED = 0.12


def planted(rng, n, mass=PLANTED):
    return np.where(rng.random(n) < mass, 2.0, 1.1)


def planted_tail(t, mass=PLANTED):
    return (mass if t < 2.0 else 0.0) + (1 - mass if t < 1.1 else 0.0)


def noisy_when_planted(true):
    """The planted enemies make the victim's times erratic (log noise 1.0), the others not (0.02)."""
    return np.where(true > 1.5, 1.0, 0.02)


def test_the_binomial_floor_is_below_the_claim():
    # 200 searches at a true 90 %: the 1 % quantile of the observed share is 0.85.
    assert 0.84 <= binomial_floor() < CLAIM


@pytest.mark.parametrize("draw, tail, kw", [
    (lognormal, lognormal_tail, {"sigma": 0.05}),
    (lognormal, lognormal_tail, {"sigma": 0.3}),
    (planted, planted_tail, {"sigma": 0.15}),
    (planted, planted_tail, {"sigma": 0.4}),
    (planted, planted_tail, {"sigma": 0.04, "enemy_noise": noisy_when_planted}),
    (lognormal, lognormal_tail, {"sigma": 0.05, "use_noise_bound": True}),
    (planted, planted_tail, {"sigma": 0.15, "use_noise_bound": True}),
], ids=["lognormal-quiet", "lognormal-noisy", "planted-quiet", "planted-noisy", "planted-erratic",
        "noise-bound-lognormal", "noise-bound-planted"])
def test_the_claimed_confidence_holds_in_simulated_searches(draw, tail, kw):
    """As `xtalk worst` uses the rule (no noise bound), and with a noise bound where the
    noise is what the bound assumes: the claim at 90 % holds in at least 90 % of 200
    simulated searches (issue 38's check; the seeds are fixed, the observed share is 0.985
    to 1.00), which is also above the binomial 1 % floor that would refute the claim."""
    rule = stopping.Rule(margin=0.10, confidence=CLAIM)
    held, fired = coverage(draw, tail, rule, seed=int(kw["sigma"] * 100), **kw)
    assert fired >= SEARCHES * 0.95, fired  # the rule fires within 96 candidates
    assert held >= CLAIM and held >= binomial_floor(), held


def test_a_noise_bound_from_solo_over_claims_when_enemies_make_the_victim_erratic():
    """Why `xtalk worst` uses no noise bound: from the solo runs' spread (2 %) the rule
    fires after 30 candidates, but the planted 10.1 % of enemies make the victim's times
    erratic (log noise 3) and score low half the time: the coverage check refutes that
    claim, while the rule without a bound (45 candidates) keeps it. The check can fail."""
    rule = stopping.Rule(margin=0.10, confidence=CLAIM)
    mass = 0.101
    kw = dict(draw=lambda r, n: planted(r, n, mass), tail=lambda t: planted_tail(t, mass), rule=rule,
              sigma=0.03, enemy_noise=lambda true: np.where(true > 1.5, 3.0, 0.02), batch=3)
    bounded, fired = coverage(seed=5, use_noise_bound=True, **kw)
    assert fired == SEARCHES
    assert bounded < binomial_floor(), bounded
    plain, _ = coverage(seed=5, **kw)
    assert plain >= binomial_floor(), plain



def test_on_a_flat_objective_it_stops_early_and_claims_no_better_candidate():
    rule = stopping.Rule(margin=0.10, confidence=CLAIM)
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = simulate(lambda r, n: np.ones(n), 0.1, rule, rng)
        assert a.fired and a.tried < 96, a
        assert a.threshold > 1.0  # nothing is above the best by the margin: the claim holds with p = 0
        assert a.beyond <= 1 - CLAIM


def test_a_rare_much_worse_candidate_is_not_claimed_absent():
    # 0.2 % of the space is 5×: the rule stops long before it can meet it, and its claim is
    # a bound on how rare a worse candidate is, never that none exists.
    rule = stopping.Rule(margin=0.10, confidence=CLAIM)
    rng = np.random.default_rng(11)
    missed = 0
    for _ in range(50):
        a = simulate(lambda r, n: np.where(r.random(n) < 0.002, 5.0, 1.0), 0.1, rule, rng)
        assert a.fired
        missed += a.best < 4.0
        assert a.beyond >= 0.002  # the planted mass is within what the claim allows
    assert missed >= 40  # it was rare: most searches never drew it
    assert "no worse candidate exists" in rule.as_json()["claim"] and "Not a claim" in rule.as_json()["claim"]


def test_the_bound_and_its_count():
    # ε = 1/2 without a noise bound: Wilks' 22 becomes 45 at 90/90.
    assert stopping.needed(0.1, 0.1, 0.5) == 45
    assert stopping.beyond(45, 0.1, 0.5) <= 0.1 < stopping.beyond(44, 0.1, 0.5)
    assert stopping.beyond(0, 0.1, 0.5) == 1.0
    assert stopping.miss_probability(0.1, None) == 0.5
    assert stopping.miss_probability(0.1, 0.01) < 1e-6
    assert stopping.noise_upper([0.0, 0.1], 0.9) is None
    rng = np.random.default_rng(0)
    ucb = [stopping.noise_upper(list(rng.normal(0, 0.2, 10)), 0.95) for _ in range(400)]
    assert binomial_floor(400, 0.95, 0.001) <= np.mean(np.array(ucb) >= 0.2) <= 0.99  # a 95 % upper bound
    assert 0.25 < np.median(ucb) < 0.4


@pytest.mark.parametrize("margin, confidence, word", [
    (0.0, 0.9, "--margin"), (-0.1, 0.9, "--margin"), (float("nan"), 0.9, "--margin"), (20.0, 0.9, "--margin"),
    (0.1, 0.3, "--confidence"), (0.1, 1.0, "--confidence"), (0.1, float("inf"), "--confidence"),
])
def test_out_of_range_settings_are_refused_by_name(margin, confidence, word):
    with pytest.raises(ValueError, match=word):
        stopping.Rule(margin, confidence)


def test_the_search_stops_trying_candidates_when_the_rule_fires(tmp_path):
    """successive_halving with Explore: batches until the rule fires, then halving among the
    candidates tried; the trace says which stopped it."""
    rng = np.random.default_rng(3)
    means = {i: 1.0 for i in range(96)}
    rule = stopping.Rule()

    def evaluate(arms, reps):
        return {a: means[a] * math.exp(rng.normal(0, 0.05)) for a in arms}, (len(arms) + 1) * reps

    def check(arms):
        a = rule.assess([x.score for x in arms], max(x.score for x in arms))
        return a.fired, a.as_json()

    plan = search.schedule(96, 1.0, 0.0, 3, batch=BATCH)
    ranked, trace = search.successive_halving(list(means), evaluate, plan, 1e9, 1.0,
                                              explore=search.Explore(BATCH, check))
    assert trace.stopped_by == "rule"
    tried = trace.exploration[-1]["candidates"]
    assert tried == 48 and trace.exploration[-1]["tried"] == 48 and trace.exploration[-1]["fired"]  # 45 needed at ε = 1/2, in rounds of 12
    assert len(trace.rounds[0]["candidates"]) == tried
    assert len(trace.rounds[1]["candidates"]) == tried // 2  # the halving planned again for 48
    assert sum(1 for a in ranked if a.scores) == tried
    # The same search with a budget for 24 candidates only: the budget stops it.
    small = search.schedule(24, 1.0, 0.0, 3, batch=BATCH)
    _, trace = search.successive_halving(list(means), evaluate, small, sum(s.seconds for s in small), 1.0,
                                         explore=search.Explore(BATCH, check))
    assert trace.stopped_by == "budget" and trace.exploration[-1]["candidates"] == 24
    assert not trace.exploration[-1]["fired"]
    # What result.json, the printout and stopping.png make of it.
    from xtalk.worst.driver import stopping_doc, stopping_text
    from xtalk.worst.output import stopping_figure

    doc = stopping_doc(rule, trace)
    assert doc["stopped_by"] == "budget" and doc["estimate"]["needed"] == 45 and "batch" not in doc["estimate"]
    assert stopping_text(rule, doc).startswith("stopping rule NOT met: the budget ran out after 24 random candidates")
    assert stopping_figure(tmp_path / "stopping.png", doc, "p99", "execution").stat().st_size > 1000


def test_the_budget_holds_when_batches_run_slower_than_estimated():
    rng = np.random.default_rng(4)
    means = {i: 1.0 + i / 100 for i in range(96)}
    plan = search.schedule(48, 1.0, 0.0, 3, batch=BATCH)
    budget = sum(s.seconds for s in plan)
    spent = []

    def evaluate(arms, reps):  # every run takes twice the estimate
        spent.append((len(arms) + 1) * reps * 2.0)
        return {a: means[a] * math.exp(rng.normal(0, 0.05)) for a in arms}, spent[-1]

    never = search.Explore(BATCH, lambda arms: (False, {"tried": len(arms)}))
    ranked, trace = search.successive_halving(list(means), evaluate, plan, budget, 1.0, explore=never)
    assert sum(spent) <= budget
    assert trace.stopped_by == "budget" and BATCH <= trace.exploration[-1]["candidates"] < 48
    assert ranked[0].scores and len(trace.rounds) >= 2  # the later rounds still ran, on fewer candidates


def test_batches_end_where_the_rule_can_fire_and_spares_replace_candidates_without_a_score():
    """`Explore.more` (as `xtalk worst` gives it): 3 seeded candidates and the 45 random ones
    the rule needs are tried in batches of at most 12, the rule fires on the batch that
    completes them and nothing past it is measured; a candidate whose runs gave no score is
    replaced by a spare; when the spares run out first, the trace says so."""
    rule = stopping.Rule()
    needed = rule.assess([], 1.0).needed
    seeds = {"s0", "s1", "s2"}
    rng = np.random.default_rng(5)
    failed = {"r7"}  # refused by the agent: no score

    def evaluate(arms, reps):
        return {a: (float("nan") if a in failed else math.exp(rng.normal(0.1, 0.05))) for a in arms}, (len(arms) + 1) * reps

    def check(arms):
        a = rule.assess([x.score for x in arms if x.key not in seeds], max(x.score for x in arms))
        return a.fired, a.as_json()

    def more(tried):
        scored = sum(1 for a in tried if a.scores and a.key not in seeds)
        return max(0, needed - scored) + len(seeds - {a.key for a in tried})

    items = sorted(seeds) + [f"r{i}" for i in range(needed + BATCH)]
    plan = search.schedule(len(seeds) + needed, 1.0, 0.0, 3, batch=BATCH, cap=5, eta=3)
    ranked, trace = search.successive_halving(items, evaluate, plan, 1e9, 1.0, explore=search.Explore(BATCH, check, more),
                                              eta=3, cap=5)
    assert trace.stopped_by == "rule"
    sizes = [e["candidates"] for e in trace.exploration]
    assert sizes == [12, 24, 36, 48, 49], sizes  # the last batch is the one spare the failed candidate needs
    assert trace.exploration[-1]["tried"] == needed and trace.exploration[-1]["fired"]
    assert not any(e["fired"] for e in trace.exploration[:-1])
    assert {c["key"] for c in trace.rounds[0]["candidates"]} == set(items[:49])  # no spare past it measured
    assert [len(r["candidates"]) for r in trace.rounds] == [49, 17, 6]
    assert [r["repetitions"] for r in trace.rounds] == [1, 3, 1]  # 5 runs at most for one candidate: the cap
    assert len(ranked) == 49 and sum(1 for a in ranked if a.scores) == 48
    # Too few candidates drawn for the rule: it says the space ran out, not the budget.
    short = items[: len(seeds) + 20]
    _, trace = search.successive_halving(short, evaluate, plan, 1e9, 1.0, explore=search.Explore(BATCH, check, more), eta=3,
                                         cap=5)
    assert trace.stopped_by == "exhausted" and trace.exploration[-1]["candidates"] == len(short)
    from xtalk.worst.driver import stopping_doc, stopping_text

    assert stopping_text(rule, stopping_doc(rule, trace)).startswith("stopping rule NOT met: every candidate drawn was tried")


def test_the_capped_schedule_never_measures_a_candidate_more_than_the_confirmation():
    plan = search.schedule(72, 1.0, 0.0, finalists=3, eta=3, cap=5)
    assert [(s.candidates, s.repetitions, s.keep) for s in plan] == [(72, 1, 24), (24, 3, 8), (8, 1, 3)]
    assert sum(s.repetitions for s in plan) == 5
    assert [(s.candidates, s.repetitions, s.keep) for s in search.schedule(72, 1.0, 0.0, 3, eta=3, cap=3)] == [
        (72, 1, 24), (24, 2, 3)]
    # 72 candidates: 73 + 75 + 9 runs, where 72 scenarios of a sweep at 5 runs each are 365.
    assert sum((s.candidates + 1) * s.repetitions for s in plan) == 157
