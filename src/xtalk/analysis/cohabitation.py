"""Several measured applications on one machine: who perturbs whom, and does each one's ε hold.

The job frame has one row per job with an ``application`` column and the run labels
``run_id``, ``scenario`` and ``configuration``; the scenarios are the ones the host
generates from ``[[application]]`` entries (docs/experiments.md):

    alone:<A>            A by itself: the reference of A
    pair:<A>+<B>         A and B (names in declaration order)
    first:<k>            the first k applications (a series over k, e.g. AOCS instances)
    all                  every application
    all+<scenario>       every application plus that scenario's enemies
    fault:<A>:<kind>     every application, A misbehaving (see analysis/propagation.py)

:func:`matrix` gives the interference matrix: cell (victim Y, perturber X) is the slowdown
of Y's statistic in ``pair:X+Y`` against ``alone:Y``, with the CI of
:func:`xtalk.analysis.slowdown.slowdown` (runs, then jobs, resampled; widened for few runs),
and the interference word of that CI against Y's noise floor (the spread between its alone
runs); the columns ``all`` and ``all+<scenario>`` are Y beside every application.
:func:`epsilon_verdicts` gives each application's ε verdict in the worst case it met.

Each application's statistic is its ε's (metric and statistic) when it has one, else the
median execution time. Median and max are judged over runs (the slowdown's CI); other
quantiles (p99 ...) over the pooled jobs, as :func:`xtalk.analysis.verdict.epsilon_verdict`
does. When a CI straddles the threshold that decides, :func:`runs_needed` projects how many
runs per scenario would decide it at the same effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from . import verdict as vd
from .slowdown import slowdown
from .stats import BootstrapCI, aa_noise_floor, ratio_ci

ALONE, PAIR, FIRST, ALL, FAULT = "alone", "pair", "first", "all", "fault"
#: ECSS criticality levels, highest first.
CRITICALITY = ("A", "B", "C", "D")
#: Fewer runs than this on a side: the between-run spread is unknown and no verdict but an
#: observed fact (a job above an absolute bound) is firm.
MIN_RUNS = 2
#: Projections beyond this many runs per scenario are reported as "more than".
MAX_RUNS = 1000
#: Per-run subsample of the bootstrap at very large job counts (as the report's tables).
BOOT_JOBS = 200_000


@dataclass(frozen=True)
class Application:
    """A measured application: its name, ECSS criticality (A highest … D lowest; None when
    not given) and ε bound (None when not given)."""

    name: str
    criticality: str | None = None
    epsilon: vd.EpsilonSpec | None = None

    @property
    def metric(self) -> str:
        return self.epsilon.metric if self.epsilon else "exec"

    @property
    def statistic(self) -> str:
        return self.epsilon.statistic if self.epsilon else "median"

    @property
    def rank(self) -> int:
        """0 for A (highest) … 3 for D; 4 when not given (sorted last)."""
        return CRITICALITY.index(self.criticality) if self.criticality in CRITICALITY else len(CRITICALITY)


def by_criticality(apps: Sequence[Application]) -> list[Application]:
    """Highest criticality first, declaration order within a level."""
    return sorted(apps, key=lambda a: a.rank)


def higher(a: Application, b: Application) -> bool:
    """Whether ``a`` is of strictly higher criticality than ``b`` (both given)."""
    return a.criticality in CRITICALITY and b.criticality in CRITICALITY and a.rank < b.rank


@dataclass(frozen=True)
class ScenarioName:
    """A generated scenario name read back: its kind, the applications it names, and the
    enemy scenario (``all+<scenario>``) or fault kind (``fault:<A>:<kind>``)."""

    kind: str | None
    apps: tuple[str, ...] = ()
    extra: str | None = None


def parse_scenario(name: str) -> ScenarioName:
    """Read a generated scenario name; any other name has kind None. Application names
    cannot hold ':' or '+' (the plan's name pattern), so the split is unambiguous."""
    name = str(name)
    if name.startswith("alone:"):
        return ScenarioName(ALONE, (name[6:],))
    if name.startswith("pair:") and "+" in name:
        a, b = name[5:].split("+", 1)
        return ScenarioName(PAIR, (a, b))
    if name.startswith("first:"):
        return ScenarioName(FIRST, (), name[6:])
    if name == "all":
        return ScenarioName(ALL)
    if name.startswith("all+"):
        return ScenarioName(ALL, (), name[4:])
    if name.startswith("fault:") and name.count(":") >= 2:
        _, app, kind = name.split(":", 2)
        return ScenarioName(FAULT, (app,), kind)
    return ScenarioName(None)


def pair_name(a: str, b: str, order: Sequence[str]) -> str:
    """``pair:<A>+<B>`` with the names in declaration order."""
    a, b = sorted((a, b), key=lambda n: order.index(n) if n in order else len(order))
    return f"pair:{a}+{b}"


def applications(jobs: pd.DataFrame, declared: Sequence[Application] = ()) -> list[Application]:
    """The declared applications, then any other found in the frame (no criticality, no ε)."""
    out = list(declared)
    names = {a.name for a in out}
    if "application" in jobs.columns:
        for n in dict.fromkeys(str(x) for x in jobs["application"].unique()):
            if n not in names:
                out.append(Application(n))
                names.add(n)
    return out


def is_multi(jobs: pd.DataFrame) -> bool:
    """Whether the frame holds more than one measured application."""
    if "application" not in jobs.columns:
        return False
    col = jobs["application"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        # Two codes ≥ 0 differ (categories are unique): two extremes of the codes instead of
        # nunique's hash of every job (10^7 jobs: 60 ms, four calls a report).
        codes = col.cat.codes.to_numpy()
        if codes.size == 0 or codes.max() < 0:
            return False
        hi = codes.max()
        if codes.min() >= 0:
            return bool(codes.min() != hi)
        return bool(((codes >= 0) & (codes != hi)).any())  # missing labels: left out, as nunique does
    return col.nunique() > 1


# --------------------------------------------------------------------------- samples


class Samples:
    """Per-run samples of each (configuration, scenario, application, metric), grouped once."""

    def __init__(self, jobs: pd.DataFrame):
        if not {"application", "scenario", "run_id"} <= set(jobs.columns):
            raise ValueError("jobs: need the columns application, scenario and run_id")
        j = jobs[~jobs["warmup"].astype(bool)] if "warmup" in jobs.columns else jobs
        if "configuration" not in j.columns:
            j = j.assign(configuration="default")
        self.jobs = j
        self._groups = {k: g for k, g in j.groupby(["configuration", "scenario", "application"], observed=True, sort=False)}
        self._cache: dict = {}

    def configurations(self) -> list[str]:
        return [str(c) for c in dict.fromkeys(self.jobs["configuration"])]

    def scenarios(self, configuration: str) -> list[str]:
        j = self.jobs[self.jobs["configuration"] == configuration]
        return [str(s) for s in dict.fromkeys(j["scenario"])]

    def frame(self, configuration: str, scenario: str, app: str) -> pd.DataFrame:
        return self._groups.get((configuration, scenario, app), self.jobs.iloc[0:0])

    def runs(self, configuration: str, scenario: str, app: str, metric: str) -> list[np.ndarray]:
        key = (configuration, scenario, app, metric)
        if key not in self._cache:
            g = self.frame(configuration, scenario, app)
            out = []
            if len(g):
                vals = vd.metric_values(g, metric, include_warmup=True)
                for _, idx in g.groupby("run_id", observed=True, sort=False).indices.items():
                    v = vals[idx]
                    v = v[np.isfinite(v)]
                    if v.size:
                        out.append(v)
            self._cache[key] = out
        return self._cache[key]


# --------------------------------------------------------------------------- ratios and runs needed


def ratio(scen: list[np.ndarray], ref: list[np.ndarray], statistic: str, *, n_boot: int = 2000, seed: int = 0) -> BootstrapCI:
    """stat(scen) / stat(ref) with its CI, always over runs then jobs (median, max: the
    slowdown of analysis/slowdown.py; mean, pNN: ``stats.ratio_ci`` of the per-run samples):
    the jobs of a run are not independent, and a mean ratio pooled over the jobs of 2 runs a
    side gave ±3 %. NaN when a side is empty."""
    if not scen or not ref:
        return BootstrapCI(statistic, math.nan, math.nan, math.nan, 0.95, "none", 0,
                           (sum(map(len, scen)), sum(map(len, ref))), (len(scen), len(ref)))
    if statistic in ("median", "max"):
        return slowdown(scen, ref, statistic, n_boot=n_boot, seed=seed, max_jobs=BOOT_JOBS)
    ci = ratio_ci(list(scen), list(ref), statistic, n_boot=n_boot, seed=seed)
    return BootstrapCI(ci.statistic, ci.estimate, ci.low, ci.high, ci.level, ci.method, ci.n_boot, ci.n,
                       (len(scen), len(ref)))


def _widening(k: int, level: float = 0.95) -> float:
    """The few-runs widening of a CI over runs (stats._runs_ratio_ci), 1 run counted as 2."""
    k = max(k, 2)
    a = (1 - level) / 2
    return math.sqrt(k / (k - 1)) * sps.t.ppf(1 - a, 2 * (k - 1)) / sps.norm.ppf(1 - a)


def runs_needed(estimate: float, low: float, high: float, threshold: float, runs: int, *, over_runs: bool = True,
                level: float = 0.95) -> int | None:
    """Runs per scenario at which a CI like [low, high] would no longer straddle
    ``threshold``, if the effect stays at ``estimate``: the half of the CI facing the
    threshold shrinks as 1/√runs (and, over runs, loses the few-runs widening). ``runs``
    when it already does not; None when the estimate sits on the threshold or more than
    ``MAX_RUNS`` runs would be needed (more runs will not settle it)."""
    vals = (estimate, low, high, threshold)
    if any(v is None or not np.isfinite(v) or v <= 0 for v in vals):
        return None
    gap = abs(math.log(estimate / threshold))
    side = math.log(high / estimate) if estimate < threshold else math.log(estimate / low)
    k = max(int(runs), 1)
    if side <= gap and k >= MIN_RUNS:
        return k
    if gap == 0:
        return None
    c_k = _widening(k, level) if over_runs else 1.0
    for n in range(max(k + 1, MIN_RUNS), MAX_RUNS + 1):
        c_n = _widening(n, level) if over_runs else 1.0
        if side * math.sqrt(k / n) * c_n / c_k < gap:
            return n
    return None


# --------------------------------------------------------------------------- the matrix


def noise_floor(samples: Samples, configuration: str, app: Application, *, n_boot: int = 1000, seed: int = 0) -> float:
    """How far from 1 the ratio strays between ``app``'s own alone runs (A/A, up to three
    runs); NaN with fewer than two."""
    runs = [v for v in samples.runs(configuration, f"alone:{app.name}", app.name, app.metric) if v.size >= 2][:3]
    if len(runs) < 2:
        return math.nan
    return float(aa_noise_floor(runs, app.statistic, n_boot=n_boot, method="percentile", seed=seed).floor)


MATRIX_COLUMNS = ["configuration", "victim", "perturber", "scenario", "metric", "statistic", "slowdown", "low", "high",
                  "runs", "reference_runs", "noise_floor", "interference", "method"]


def matrix(jobs: pd.DataFrame | Samples, apps: Sequence[Application] = (), *, n_boot: int = 2000,
           seed: int = 0) -> pd.DataFrame:
    """The interference matrix in long form: one row per configuration × victim Y ×
    perturber (another application X: ``pair:X+Y``; ``first:<k>`` where Y is among the
    first k; ``all``; ``all+<scenario>``) with the
    slowdown of Y's statistic against ``alone:Y``, its CI, the runs on each side, Y's noise
    floor and the interference word (analysis.verdict.interference). Pairs absent from the
    results are absent here; a missing ``alone:Y`` gives NaN cells."""
    s = jobs if isinstance(jobs, Samples) else Samples(jobs)
    apps = applications(s.jobs, apps)
    order = [a.name for a in apps]
    rows = []
    for cfg in s.configurations():
        present = set(s.scenarios(cfg))
        for y in by_criticality(apps):
            ref = s.runs(cfg, f"alone:{y.name}", y.name, y.metric)
            floor = noise_floor(s, cfg, y, seed=seed)
            beside = [(x.name, pair_name(x.name, y.name, order)) for x in by_criticality(apps) if x.name != y.name]
            beside += [(sc, sc) for sc in s.scenarios(cfg) if parse_scenario(sc).kind in (FIRST, ALL)]
            for label, scen in beside:
                if scen not in present:
                    continue
                runs = s.runs(cfg, scen, y.name, y.metric)
                if not runs:
                    continue
                ci = ratio(runs, ref, y.statistic, n_boot=n_boot, seed=seed)
                rows.append({"configuration": cfg, "victim": y.name, "perturber": label, "scenario": scen,
                             "metric": y.metric, "statistic": y.statistic, "slowdown": ci.estimate, "low": ci.low,
                             "high": ci.high, "runs": len(runs), "reference_runs": len(ref), "noise_floor": floor,
                             "interference": vd.interference(ci.low, ci.high, floor), "method": ci.method})
    return pd.DataFrame(rows, columns=MATRIX_COLUMNS)


def grid(long: pd.DataFrame, configuration: str, apps: Sequence[Application], value: str = "slowdown") -> pd.DataFrame:
    """One configuration of :func:`matrix` as victim × perturber (rows and the application
    columns criticality-ordered, then ``all`` and ``all+<scenario>``)."""
    m = long[long["configuration"] == configuration]
    names = [a.name for a in by_criticality(apps) if a.name in set(m["victim"]) | set(m["perturber"])]
    extra = [p for p in dict.fromkeys(m["perturber"]) if p not in names]
    g = m.pivot_table(index="victim", columns="perturber", values=value, aggfunc="first", dropna=False)
    g = g.reindex(index=[n for n in names if n in set(m["victim"])], columns=names + extra)
    g.index.name, g.columns.name = "victim (slowed)", "perturber (beside)"
    return g


# --------------------------------------------------------------------------- ε


EPSILON_COLUMNS = ["configuration", "application", "criticality", "verdict", "scenario", "metric", "statistic",
                   "bound", "observed_ns", "ci_low_ns", "ci_high_ns", "ratio", "ratio_low", "ratio_high", "runs",
                   "runs_needed", "firm", "note", "reference_trouble"]


def reference_trouble(samples: Samples, configuration: str, app: str) -> str:
    """Why ``alone:<app>`` is a disturbed reference (guards.reference_trouble: misses,
    serious misses, a job far longer than the median), or "" when it is sound or absent.
    A relative ε "holds" against a reference inflated by the machine (alone:aocs p99 19 ms)."""
    from .guards import reference_trouble as trouble

    f = samples.frame(configuration, f"alone:{app}", app)
    if f.empty or "exec_ns" not in f.columns:
        return ""
    missed = serious = 0
    if {"release_ns", "end_ns", "period_ns"} <= set(f.columns):
        m = vd.classify_misses(f, include_warmup=True, recorded=True)
        missed, serious = int(m["missed"].sum()), int(m["serious"].sum())
    ex = f["exec_ns"].to_numpy(dtype=float) / 1e6
    why = trouble(len(f), missed, serious, float(np.median(ex)), float(ex.max()))
    return f"alone:{app}: {why}" if why else ""


def epsilon_check(samples: Samples, configuration: str, scenario: str, app: Application, *, n_boot: int = 2000,
                  seed: int = 0) -> dict:
    """``app``'s ε in one scenario: the verdict (analysis.verdict words), the statistic and
    its CI, and, when the CI straddles the bound, the runs per scenario that would decide it.

    Absolute bound: :func:`xtalk.analysis.verdict.epsilon_verdict` (any job above a bound on
    the max is a violation: a fact). Relative bound: the ratio to ``alone:<app>`` with its CI
    (:func:`ratio`) against the factor. Fewer than ``MIN_RUNS`` runs on a side make any other
    verdict inconclusive."""
    spec = app.epsilon
    alone = f"alone:{app.name}"
    scen = samples.runs(configuration, scenario, app.name, spec.metric)
    ref = samples.runs(configuration, alone, app.name, spec.metric)
    row = {"configuration": configuration, "application": app.name, "criticality": app.criticality, "scenario": scenario,
           "metric": spec.metric, "statistic": spec.statistic, "runs": len(scen), "ratio": math.nan,
           "ratio_low": math.nan, "ratio_high": math.nan, "note": ""}
    if not scen:
        return {**row, "verdict": vd.INCONCLUSIVE, "bound": _bound_text(spec), "observed_ns": math.nan,
                "ci_low_ns": math.nan, "ci_high_ns": math.nan, "runs_needed": MIN_RUNS, "firm": False,
                "note": vd.NO_JOBS}
    fact = False
    if spec.bound_ns is not None:
        e = vd.epsilon_verdict(None, samples.frame(configuration, scenario, app.name), spec, n_boot=n_boot,
                               include_warmup=True, seed=seed).iloc[0]
        verdict = e["verdict"]
        fact = spec.statistic == "max" and e["observed_ns"] > spec.bound_ns
        k = len(scen)
        needed = runs_needed(e["observed_ns"], e["ci_low_ns"], e["ci_high_ns"], spec.bound_ns, k, over_runs=False)
        row.update(observed_ns=e["observed_ns"], ci_low_ns=e["ci_low_ns"], ci_high_ns=e["ci_high_ns"])
    else:
        if not ref:
            return {**row, "verdict": vd.INCONCLUSIVE, "bound": _bound_text(spec), "observed_ns": math.nan,
                    "ci_low_ns": math.nan, "ci_high_ns": math.nan, "runs_needed": None, "firm": False, "note": vd.NO_SOLO}
        ci = ratio(scen, ref, spec.statistic, n_boot=n_boot, seed=seed)
        verdict = vd.bound_verdict(ci.low, ci.high, spec.relative)
        k = min(len(scen), len(ref))
        needed = runs_needed(ci.estimate, ci.low, ci.high, spec.relative, k, over_runs=ci.method == "runs")
        pooled = np.concatenate(scen)
        row.update(observed_ns=float(np.quantile(pooled, _q(spec.statistic))) if spec.statistic != "mean" else float(pooled.mean()),
                   ci_low_ns=math.nan, ci_high_ns=math.nan, ratio=ci.estimate, ratio_low=ci.low, ratio_high=ci.high)
    firm = verdict != vd.INCONCLUSIVE
    value, bound = (row["ratio"], spec.relative) if spec.relative is not None else (row["observed_ns"], spec.bound_ns)
    row["above"] = bool(np.isfinite(value) and value > bound)  # the estimate itself breaks the bound
    if k < MIN_RUNS and not fact:
        verdict, firm = vd.INCONCLUSIVE, False
        needed = max(needed or MIN_RUNS, MIN_RUNS)
        row["note"] = f"{k} run(s): too few to judge"
    if not firm and needed is not None and needed <= k:
        needed = None
    return {**row, "verdict": verdict, "bound": _bound_text(spec), "runs_needed": needed if not firm else None, "firm": firm}


def _q(statistic: str) -> float:
    from .stats import _quantile_level

    q = _quantile_level(statistic)
    return 0.5 if q is None else q


def _bound_text(spec: vd.EpsilonSpec) -> str:
    return f"≤ {spec.relative:g}× alone" if spec.relative is not None else f"≤ {spec.bound_ns / 1e6:g} ms"


def _excess(r: Mapping) -> float:
    """How far past its bound a check went (for the worst case among equal verdicts)."""
    if np.isfinite(r.get("ratio", math.nan)):
        return float(r["ratio"])
    return float(r.get("observed_ns", math.nan)) if np.isfinite(r.get("observed_ns", math.nan)) else -math.inf


def cohabiting(scenario: str, app: str) -> bool:
    """Whether ``scenario`` puts ``app`` beside other software without a fault (a pair
    holding it, ``first:<k>`` (k ≥ 2, when ``app`` ran in it), ``all``, ``all+<scenario>``):
    the cases its ε is judged in."""
    p = parse_scenario(scenario)
    return (p.kind == PAIR and app in p.apps) or p.kind == ALL or (p.kind == FIRST and str(p.extra).isdigit()
                                                                  and int(p.extra) >= 2)


def epsilon_verdicts(jobs: pd.DataFrame | Samples, apps: Sequence[Application], *, n_boot: int = 2000,
                     seed: int = 0) -> pd.DataFrame:
    """Each application's ε verdict per configuration, in the worst case it met among the
    pairs holding it, ``all`` and ``all+<scenario>`` (violated before inconclusive before
    holds; the largest statistic among equals), with its statistic, CI, runs and the runs
    per scenario that would settle an inconclusive verdict. Applications without ε are not
    listed."""
    s = jobs if isinstance(jobs, Samples) else Samples(jobs)
    rows = []
    for cfg in s.configurations():
        for app in by_criticality(applications(s.jobs, apps)):
            if app.epsilon is None:
                continue
            checks = [epsilon_check(s, cfg, sc, app, n_boot=n_boot, seed=seed) for sc in s.scenarios(cfg)
                      if cohabiting(sc, app.name) and s.runs(cfg, sc, app.name, app.metric)]
            if not checks:
                continue
            rank = {vd.VIOLATED: 0, vd.INCONCLUSIVE: 1}
            worst = min(checks, key=lambda r: (rank.get(r["verdict"], 2), -_excess(r)))
            needed = [r["runs_needed"] for r in checks if not r["firm"]]
            if worst["verdict"] == vd.INCONCLUSIVE:
                # Every undecided case must be settled before the worst one is known.
                worst = {**worst, "runs_needed": None if None in needed else max(needed)}
            rows.append({**worst, "reference_trouble": reference_trouble(s, cfg, app.name)})
    return pd.DataFrame(rows, columns=EPSILON_COLUMNS)


def runs_text(needed) -> str:
    """'about N runs per scenario' / 'more runs will not settle it' for a projection."""
    if needed is None or (isinstance(needed, float) and math.isnan(needed)):
        return f"more than {MAX_RUNS} runs per scenario, or the statistic sits on the bound: more runs will not settle it"
    return f"about {int(needed)} runs per scenario would settle it"


def names(apps: Iterable[Application]) -> list[str]:
    return [a.name for a in apps]
