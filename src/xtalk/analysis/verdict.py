"""Deadline misses, serious misses and the ε verdict.

Serious miss (seed 000 §6.5.2): "A deadline miss is considered serious when the step cannot
be executed in the next period [...] if a deadline miss occurs but the process can execute
the missing code during the next period it isn't a serious deadline miss". Job k, released
at r_k = t0 + k·P, has "the next period" [r_k + P, r_k + 2P). Hence, in xtalk:

    missed(k)  ⇔  end_k > r_k + D            (D = relative deadline)
    serious(k) ⇔  end_k > r_k + 2·P          (it did not finish by the end of the next period)

and a job index missing inside a run (a step that never executed: the seed detected those by
counting executions) is counted as *lost* and also as serious. A serious miss is a miss
whenever D ≤ 2P, which is always the case for the constrained deadlines xtalk uses.

ε property (seed 002 §I-B): "the perturbation made by one software on to others should not
be greater than ε", ε being an execution or response time. :func:`epsilon_verdict` turns a
bound into holds / violated / inconclusive using a confidence interval, not a point value.

Every verdict word a report prints is made here, from the vocabularies below (the ε verdict,
the interference word of a slowdown CI against the noise floor, a scenario's status, an
observation goal, fault containment); the renderers (report/, intrusiveness.py) ask for the
word and only format it. tests/test_verdict_words.py checks that they do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special

from . import stats as st

# --------------------------------------------------------------------------- the words

# The vocabularies, min_effect and the one interference rule live in .words (no numpy there).
# Verdict is where the report asks for every word: all of words.py is re-exported here.
from .words import (  # noqa: F401
    HOLDS, VIOLATED, INCONCLUSIVE, VERDICTS, REFERENCE, NO_EPSILON, NO_SOLO, NO_JOBS,
    EPSILON_STATES, NO_CI, TOO_NOISY, SLOWED_DOWN, SPED_UP, WITHIN_NOISE, INTERFERENCE,
    CONCLUDED, MIN_EFFECT, EPS_VIOLATED, SERIOUS_MISSES, DEADLINE_MISSES, EPS_INCONCLUSIVE,
    EPS_HOLDS_SLOWED, EPS_HOLDS, NOTHING_BEYOND_NOISE, OK, ABOVE_RTA, ABOVE_RTA_SUFFIX,
    LATENCY_HIGHER, LATENCY_WITHIN_NOISE, NO_JOBS_STATUS, DISTURBED_SUFFIX, STATUSES, MET,
    MISSED, GOALS, PROPAGATED, SLOWED, REFUSED, CONTAINED, CONTAINMENT, MISS_ALPHA,
    NOT_EXERCISED, min_effect, interference,
)


def _nan(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def status(eps_verdicts: Sequence[str], serious: int, missed: int, words: Sequence,
           reference_disturbed: bool = False) -> str:
    """A scenario's status, the worst of: ε violated, serious misses, misses, ε
    inconclusive, a slowdown beyond the noise floor (``words``: :func:`interference` of each
    metric); ε holds or nothing beyond noise otherwise. Against a ``reference_disturbed``
    every status but a violation of ε says so (DISTURBED_SUFFIX): a reference that misses
    cannot back "holds" or "ok"."""
    s = _status(eps_verdicts, serious, missed, words)
    return s + DISTURBED_SUFFIX if reference_disturbed and s != EPS_VIOLATED else s


def _status(eps_verdicts: Sequence[str], serious: int, missed: int, words: Sequence) -> str:
    if VIOLATED in eps_verdicts:
        return EPS_VIOLATED
    if serious:
        return SERIOUS_MISSES
    if missed:
        return DEADLINE_MISSES
    if INCONCLUSIVE in eps_verdicts:
        return EPS_INCONCLUSIVE
    if SLOWED_DOWN in words:
        return EPS_HOLDS_SLOWED if eps_verdicts else SLOWED_DOWN
    if eps_verdicts:
        return EPS_HOLDS
    return NOTHING_BEYOND_NOISE if any(w == WITHIN_NOISE for w in words) else OK


def task_status(generic: str, missed: int, above: bool) -> str:
    """A task set's status: ε as decided on the pooled jobs (``generic``, :func:`status`),
    misses as the agent flagged them per task (the generic status reads the job table's
    period, the hyperperiod), then any task whose response exceeded its RTA bound."""
    if generic == EPS_VIOLATED:
        s = generic
    elif missed:
        s = DEADLINE_MISSES
    elif generic == EPS_INCONCLUSIVE:
        s = generic
    else:
        s = EPS_HOLDS if generic.startswith(EPS_HOLDS) else OK
    if above:
        s = ABOVE_RTA if s in (OK, EPS_HOLDS) else s + ABOVE_RTA_SUFFIX
    return s


def latency_status(generic: str, word: str | None, solo: bool) -> str:
    """A latency victim's status: the generic one (:func:`status`) when it names misses or
    an ε verdict against the bound; otherwise what the wake-up latency did (``word``:
    :func:`interference` of the response time)."""
    if generic not in (SLOWED_DOWN, OK, NOTHING_BEYOND_NOISE, EPS_HOLDS_SLOWED):
        return generic
    if word == SLOWED_DOWN:
        return LATENCY_HIGHER
    return OK if solo or word is None else LATENCY_WITHIN_NOISE


def goal(lo: float, hi: float, bound: float) -> str:
    """An observation's cost ratio CI against its goal: met when the whole CI is within the
    bound, missed when it is all above, otherwise inconclusive (the machine's noise is
    larger than the effect)."""
    if hi <= bound:
        return MET
    if lo > bound:
        return MISSED
    return INCONCLUSIVE


def containment(failure: bool, timing: bool, completed: int, refused: int, uncertain: bool = False) -> str:
    """Fault containment of one scenario: propagated when the fault made the victim fail
    (``failure``), slowed when only its timing suffered beyond the tolerance (``timing``),
    refused when no run completed and some could not start the fault, inconclusive when
    the victim missed more than its reference but not significantly (``uncertain``,
    :func:`more_misses`), contained otherwise."""
    if failure:
        return PROPAGATED
    if timing:
        return SLOWED
    if completed == 0 and refused:
        return REFUSED
    return INCONCLUSIVE if uncertain else CONTAINED


def more_misses(k: int, n: int, k_ref: int, n_ref: int) -> float:
    """p-value of the one-sided exact test (Fisher's) that the victim's miss rate (k of n
    jobs) is above its reference's (k_ref of n_ref): small only when the jobs are enough
    to tell the excess from chance (4 misses in 400 jobs against 0 in 400: p 0.06). 1.0
    when the victim missed no more than the reference, or either side has no job."""
    if n <= 0 or n_ref <= 0 or k * n_ref <= k_ref * n:
        return 1.0
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k, n - k], [k_ref, n_ref - k_ref]], alternative="greater")[1])


def jobs_to_tell(k: int, n: int, k_ref: int, n_ref: int, runs: int, most: int = 64) -> int | None:
    """Runs per side after which miss rates like these (k of n, k_ref of n_ref over ``runs``
    runs) would be significant (:func:`more_misses` below MISS_ALPHA), or None beyond ``most``
    times as many or when the victim missed no more."""
    if n <= 0 or n_ref <= 0 or k * n_ref <= k_ref * n:
        return None
    for m in range(2, most + 1):
        if more_misses(k * m, n * m, k_ref * m, n_ref * m) < MISS_ALPHA:
            return max(1, runs) * m
    return None


#: The status a guard's warning line is listed under (coloured as a warning).
GUARD = "guard"


def severity(status: str) -> str:
    """How bad a status is, for colouring: 'bad' (a violation or misses), 'warn' (ε
    inconclusive, a slowdown, a guard) or '' (nothing to report)."""
    s = status.lower()
    if VIOLATED in s or "miss" in s or s == PROPAGATED:
        return "bad"
    if INCONCLUSIVE in s or "slowed" in s or "disturbed" in s or status == GUARD:
        return "warn"
    return ""


def worst_epsilon(verdicts: Sequence[str]) -> int:
    """Index of the worst ε verdict (violated, then inconclusive, then the rest)."""
    rank = {VIOLATED: 0, INCONCLUSIVE: 1}
    return min(range(len(verdicts)), key=lambda i: rank.get(verdicts[i], 2))


# --------------------------------------------------------------------------- misses


def _steady(jobs: pd.DataFrame, include_warmup: bool) -> pd.DataFrame:
    if not include_warmup and "warmup" in jobs.columns:
        return jobs[~jobs["warmup"].astype(bool)]
    return jobs


def classify_misses(jobs: pd.DataFrame, *, include_warmup: bool = False, recorded: bool = False) -> pd.DataFrame:
    """Per job: ``lateness_ns`` = end − (release + deadline), ``missed``, ``serious``.

    ``missed`` is recomputed from the times (end > release + deadline) and an existing
    ``missed`` column overwritten, unless ``recorded``: then the agent's per-job flag is kept
    where the table has one (it is what the agent measured, and also marks a job that failed
    to do its work), the times deciding only where it is absent (tables written before the
    flag, NA). Without ``deadline_ns`` the deadline is the period. ``serious`` (not done by the
    end of the next period) is always from the times: the agent records no such flag.
    ``responsiveness`` = response / deadline (SPEC §7 metrics).
    """
    need = ("release_ns", "end_ns", "period_ns")
    for col in need:
        if col not in jobs.columns:
            raise ValueError(f"jobs: missing column {col!r}")
    df = _steady(jobs, include_warmup).copy()
    rel = df["release_ns"].to_numpy(dtype=np.int64)
    end = df["end_ns"].to_numpy(dtype=np.int64)
    per = df["period_ns"].to_numpy(dtype=np.int64)
    dl = df["deadline_ns"].to_numpy(dtype=np.int64) if "deadline_ns" in df.columns else per
    df["lateness_ns"] = end - (rel + dl)
    late = end > rel + dl
    if recorded and "missed" in df.columns:
        flag = df["missed"]
        late = np.where(flag.isna().to_numpy(), late, flag.fillna(False).to_numpy(dtype=bool))
    df["missed"] = late
    df["serious"] = end > rel + 2 * per
    df["responsiveness"] = (end - rel) / dl
    return df


def missed_flags(jobs: pd.DataFrame, *, recorded: bool = False) -> np.ndarray:
    """:func:`classify_misses`'s ``missed`` of every row of ``jobs`` (warm-up included), as
    a boolean array, without copying the table."""
    for col in ("release_ns", "end_ns", "period_ns"):
        if col not in jobs.columns:
            raise ValueError(f"jobs: missing column {col!r}")
    if recorded and "missed" in jobs.columns and jobs["missed"].dtype == bool:  # a flag on every job: the times unread
        return jobs["missed"].to_numpy(dtype=bool)
    rel = jobs["release_ns"].to_numpy(dtype=np.int64)
    end = jobs["end_ns"].to_numpy(dtype=np.int64)
    dl = jobs["deadline_ns" if "deadline_ns" in jobs.columns else "period_ns"].to_numpy(dtype=np.int64)
    late = end > rel + dl
    if recorded and "missed" in jobs.columns:
        flag = jobs["missed"]
        late = np.where(flag.isna().to_numpy(), late, flag.fillna(False).to_numpy(dtype=bool))
    return np.asarray(late, dtype=bool)


def _wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (sound near 0, where miss ratios live)."""
    if n == 0:
        return float("nan"), float("nan")
    z = float(special.ndtri(0.5 + level / 2.0))
    p = k / n
    den = 1.0 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # At k = 0 (k = n) the bound is exactly 0 (1); the subtraction leaves rounding dust.
    lo = 0.0 if k == 0 else max(0.0, c - h)
    hi = 1.0 if k == n else min(1.0, c + h)
    return lo, hi


def _lost_jobs(g: pd.DataFrame) -> int:
    """Job indices missing between the first and last job of a run (never executed)."""
    if "job" not in g.columns or g.empty:
        return 0
    j = g["job"].to_numpy(dtype=np.int64)
    # A run's jobs come in index order: strictly increasing indices are all distinct, and
    # np.unique's sort of every index is not needed.
    distinct = j.size if j.size < 2 or bool(np.all(j[1:] > j[:-1])) else np.unique(j).size
    return int(j.max() - j.min() + 1 - distinct)


def deadline_misses(
    jobs: pd.DataFrame,
    *,
    by: Sequence[str] = ("run_id",),
    level: float = 0.95,
    include_warmup: bool = False,
    recorded: bool = False,
) -> pd.DataFrame:
    """Deadline-miss and serious-miss counts and ratios per group (SPEC §6, seed 000 §6.5.2).

    Columns: n_jobs, n_missed, miss_ratio with its Wilson CI (miss_ci_low, miss_ci_high),
    n_lost (job indices absent inside the run), n_serious (serious misses + lost jobs),
    serious_ratio (over n_jobs + n_lost), max_lateness_ns, max_responsiveness. ``recorded``:
    count the agent's per-job ``missed`` flag (:func:`classify_misses`).
    """
    # Only the columns the counts read: classify_misses copies what it is given.
    need = [*dict.fromkeys([*by, "job", "warmup", "missed", "release_ns", "end_ns", "period_ns", "deadline_ns"])]
    df = classify_misses(jobs[[c for c in need if c in jobs.columns]], include_warmup=include_warmup, recorded=recorded)
    keys = [b for b in by if b in df.columns]
    rows = []
    for key, g in (df.groupby(keys, sort=True) if keys else [((), df)]):
        n = len(g)
        k = int(g["missed"].sum())
        lost = _lost_jobs(g)
        ser = int(g["serious"].sum()) + lost
        lo, hi = _wilson(k, n, level)
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row.update(
            n_jobs=n, n_missed=k, miss_ratio=k / n if n else float("nan"), miss_ci_low=lo, miss_ci_high=hi,
            n_lost=lost, n_serious=ser, serious_ratio=ser / (n + lost) if n + lost else float("nan"),
            max_lateness_ns=int(g["lateness_ns"].max()) if n else 0,
            max_responsiveness=float(g["responsiveness"].max()) if n else float("nan"),
        )
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- ε verdict


@dataclass(frozen=True)
class EpsilonSpec:
    """An ε bound (seed 002 §I-B) on one application's timing.

    ``metric``: 'exec' (end − start) or 'response' (end − release).
    ``statistic``: 'max' (default: the ε property is about every job), 'median', 'mean' or 'pNN'.
    Exactly one of ``bound_ns`` (absolute, ns) and ``relative`` (bound = relative × the same
    statistic of the solo run, e.g. 1.2 for "1.2 × solo max") must be given.
    ``level``: confidence level of the intervals.
    """

    metric: str = "exec"
    statistic: str = "max"
    bound_ns: float | None = None
    relative: float | None = None
    level: float = 0.95

    def __post_init__(self) -> None:
        if self.metric not in ("exec", "response"):
            raise ValueError(f"EpsilonSpec.metric: must be 'exec' or 'response', got {self.metric!r}")
        if not isinstance(self.statistic, str):
            raise ValueError(f"EpsilonSpec.statistic: must be a name, got {self.statistic!r}")
        try:
            st._quantile_level(self.statistic)
        except ValueError:
            raise ValueError(
                f"EpsilonSpec.statistic: unknown {self.statistic!r} (use 'max', 'median', 'mean' or 'pNN')"
            ) from None
        if (self.bound_ns is None) == (self.relative is None):
            raise ValueError("EpsilonSpec.bound_ns / EpsilonSpec.relative: give exactly one of them")
        if self.bound_ns is not None and not (np.isfinite(self.bound_ns) and self.bound_ns > 0):
            raise ValueError(f"EpsilonSpec.bound_ns: must be a positive number of ns, got {self.bound_ns!r}")
        if self.relative is not None and not (np.isfinite(self.relative) and self.relative > 0):
            raise ValueError(f"EpsilonSpec.relative: must be a positive factor, got {self.relative!r}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"EpsilonSpec.level: must be in (0, 1), got {self.level!r}")

    @classmethod
    def from_mapping(cls, spec: Mapping) -> "EpsilonSpec":
        """Build from a dict (e.g. a TOML table); unknown keys are an error naming the key."""
        known = {f.name for f in fields(cls)}
        for key in spec:
            if key not in known:
                raise ValueError(f"EpsilonSpec.{key}: unknown field (known: {sorted(known)})")
        return cls(**dict(spec))


_METRIC_COLUMNS = {"exec": ("exec_ns", "start_ns"), "response": ("response_ns", "release_ns")}


def metric_values(jobs: pd.DataFrame, metric: str, *, include_warmup: bool = False) -> np.ndarray:
    """``exec_ns`` or ``response_ns`` of the steady-state jobs, derived from end − start /
    end − release when the column itself is absent."""
    col, origin = _METRIC_COLUMNS[metric]
    df = _steady(jobs, include_warmup)
    if col in df.columns:
        return df[col].to_numpy(dtype=float)
    if "end_ns" in df.columns and origin in df.columns:
        return (df["end_ns"] - df[origin]).to_numpy(dtype=float)
    raise ValueError(f"jobs: no {col!r} column and no end_ns/{origin} to derive it")


def run_values(jobs: pd.DataFrame, metric: str, *, include_warmup: bool = False) -> list[np.ndarray] | None:
    """:func:`metric_values` split by run (``run_id``), runs in order of appearance; None
    when the frame does not say which run a job belongs to."""
    if "run_id" not in jobs.columns:
        return None
    values = metric_values(jobs, metric, include_warmup=include_warmup)
    runs = _steady(jobs, include_warmup)["run_id"].astype(str).to_numpy()
    _, first, inverse = np.unique(runs, return_index=True, return_inverse=True)
    return [values[inverse == i] for i in np.argsort(first)]


def bound_verdict(low: float, high: float, bound: float) -> str:
    """A CI [low, high] against an upper bound: holds when all of it is at or below the
    bound, violated when all of it is above, inconclusive when it straddles the bound."""
    return _decide(low, high, bound)


def _decide(low: float, high: float, bound: float) -> str:
    if high <= bound:
        return HOLDS
    if low > bound:
        return VIOLATED
    return INCONCLUSIVE


def epsilon_verdict(
    solo: pd.DataFrame | None,
    scenario: pd.DataFrame,
    spec: EpsilonSpec | Mapping,
    *,
    n_boot: int = 4000,
    include_warmup: bool = False,
    seed: st.SeedLike = None,
) -> pd.DataFrame:
    """One-row DataFrame: observed value, its CI, the bound and the verdict.

    Absolute bound: the bootstrap CI of the scenario statistic is compared with
    ``bound_ns``: entirely below or at it → holds, entirely above → violated, straddling →
    inconclusive. For ``max`` the bootstrap CI ends at the observed maximum, so any observed
    job above the bound is a violation (a fact, not an estimate) and "holds" means "no job
    observed above the bound" — use :mod:`xtalk.analysis.pwcet` for a probabilistic claim.

    Relative bound: bound_ns = relative × stat(solo); the decision uses the CI of the ratio
    stat(scenario)/stat(solo) against ``relative``, so the uncertainty of the solo reference
    counts too. ``solo`` may be None only for absolute bounds.
    """
    if not isinstance(spec, EpsilonSpec):
        spec = EpsilonSpec.from_mapping(spec)
    scen = metric_values(scenario, spec.metric, include_warmup=include_warmup)
    row = dict(metric=spec.metric, statistic=spec.statistic, n_scenario=int(np.isfinite(scen).sum()))
    ref = None if solo is None or spec.bound_ns is not None else metric_values(solo, spec.metric,
                                                                             include_warmup=include_warmup)
    if row["n_scenario"] < 2 or (ref is not None and int(np.isfinite(ref).sum()) < 2):
        # One job (or none) a side: no interval to judge with; inconclusive, never a crash.
        nan = np.nan
        row.update(observed_ns=nan, ci_low_ns=nan, ci_high_ns=nan,
                   bound_ns=float(spec.bound_ns) if spec.bound_ns is not None else nan,
                   bound_kind="absolute" if spec.bound_ns is not None else "relative",
                   relative=nan if spec.relative is None else spec.relative, solo_ns=nan,
                   n_solo=0 if ref is None else int(np.isfinite(ref).sum()), ratio=nan, ratio_ci_low=nan, ratio_ci_high=nan,
                   level=spec.level, verdict=INCONCLUSIVE)
        return pd.DataFrame([row])
    if spec.bound_ns is not None:
        ci = st.bootstrap_ci(scen, spec.statistic, level=spec.level, n_boot=n_boot, seed=seed)
        bound = float(spec.bound_ns)
        verdict = _decide(ci.low, ci.high, bound)
        if spec.statistic == "max" and ci.estimate > bound:
            verdict = VIOLATED
        row.update(observed_ns=ci.estimate, ci_low_ns=ci.low, ci_high_ns=ci.high, bound_ns=bound,
                   bound_kind="absolute", relative=np.nan, solo_ns=np.nan, n_solo=0,
                   ratio=np.nan, ratio_ci_low=np.nan, ratio_ci_high=np.nan)
    else:
        if solo is None:
            raise ValueError("solo: a relative ε bound needs the solo job table")
        rng = st._rng(seed)
        ci = st.bootstrap_ci(scen, spec.statistic, level=spec.level, n_boot=n_boot, seed=rng)
        # Runs, then jobs within them, resampled where the frames say which run each job is
        # of: the interval the slowdown beside the verdict has (jobs of one run are not
        # independent, so a job-level interval is narrower than the data allow).
        by_run = (run_values(scenario, spec.metric, include_warmup=include_warmup),
                  run_values(solo, spec.metric, include_warmup=include_warmup))
        if None not in by_run:
            rci = st.ratio_ci(by_run[0], by_run[1], spec.statistic, level=spec.level, n_boot=n_boot, seed=rng)
        else:
            rci = st.ratio_ci(scen, ref, spec.statistic, level=spec.level, n_boot=n_boot, seed=rng)
        solo_val = st.statistic_value(ref, spec.statistic)
        verdict = _decide(rci.low, rci.high, spec.relative)
        row.update(observed_ns=ci.estimate, ci_low_ns=ci.low, ci_high_ns=ci.high,
                   bound_ns=spec.relative * solo_val, bound_kind="relative", relative=spec.relative,
                   solo_ns=solo_val, n_solo=int(np.isfinite(ref).sum()),
                   ratio=rci.estimate, ratio_ci_low=rci.low, ratio_ci_high=rci.high)
    row.update(level=spec.level, verdict=verdict)
    return pd.DataFrame([row])


def epsilon_verdicts(
    solo: pd.DataFrame | None,
    scenario: pd.DataFrame,
    specs: Sequence[EpsilonSpec | Mapping],
    **kwargs,
) -> pd.DataFrame:
    """:func:`epsilon_verdict` for several specs, one row each."""
    return pd.concat([epsilon_verdict(solo, scenario, s, **kwargs) for s in specs], ignore_index=True)
