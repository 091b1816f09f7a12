"""Synthetic results directories with known properties, for the report's tests and its
scale benchmark: the same layout and job table `xtalk run` writes (docs/results.md), with
Parquet written directly (no agent, no jobs.bin).

What is planted, so a test can check the report finds it: a slowdown factor per scenario,
periodic spikes (a big one every ``spike_every``·``big_every`` jobs), a wake-up drift, a
deadline miss and a serious miss where asked, counters (one redundant pair), campaign
parameters in the run labels, and a kernel trace in which a ``timesyncd`` process runs inside
every spike job while ``kworker`` hits ordinary jobs at random.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import safepath
from ..outcome import RunOutcome, write_outcome
from ..plan import Plan
from ..store.files import JOB_TABLE_WRITE

VICTIM_PID, CULPRIT_PID, NOISE_PID = 4242, 555, 77
VICTIM_CPU = 1


@dataclass
class Scenario:
    """One scenario: its enemies (as the experiment file lists them) and the planted effect."""

    name: str
    enemies: list = field(default_factory=list)
    slowdown: float = 1.0
    spike_every: int = 0  # 0: no spikes
    spike_ns: int = 400_000
    big_every: int = 0  # every Nth spike is 3× bigger
    labels: dict = field(default_factory=dict)  # extra run labels (campaign parameters)


def job_table(n: int, *, period_ns: int = 1_000_000, exec_ns: float = 200_000, slowdown: float = 1.0, sigma: float = 0.02,
              warmup: int = 2, spike_every: int = 0, spike_ns: int = 400_000, big_every: int = 0, drift_ns: float = 0.0,
              miss_jobs: tuple = (), serious_jobs: tuple = (), counters: bool = False, t0_ns: int = 10**12,
              seed: int = 0, late_every: int = 0, late_ns: int = 0) -> pd.DataFrame:
    """A job table as `store.jobs.read_job_log` returns it, vectorised (10^5 jobs in ms).
    ``late_every``/``late_ns``: every ``late_every``-th job wakes ``late_ns`` late (its
    response time grows, its execution time does not)."""
    rng = np.random.default_rng(seed)
    k = np.arange(n, dtype=np.int64)
    release = t0_ns + k * period_ns
    lat = (15_000 + rng.exponential(3_000, n) + k * drift_ns).astype(np.int64)
    if late_every:
        lat = lat + np.where(k % late_every == late_every - 1, np.int64(late_ns), np.int64(0))
    wakeup = release + lat
    start = wakeup + 1_000
    ex = exec_ns * slowdown * rng.lognormal(0.0, sigma, n)
    spike = np.zeros(n, dtype=bool)
    if spike_every:
        spike = (k % spike_every == spike_every // 2) & (k >= warmup)
        amp = np.full(n, float(spike_ns))
        if big_every:
            amp[spike & ((k // spike_every) % big_every == 0)] *= 3.0
        ex = ex + spike * amp
    ex = ex.astype(np.int64)
    for j in miss_jobs:  # late, but done within the next period
        ex[j] = period_ns + period_ns // 4 - (start[j] - release[j])
    for j in serious_jobs:  # not done by the end of the next period
        ex[j] = 2 * period_ns + period_ns // 2
    end = start + ex
    df = pd.DataFrame({
        "job": k, "warmup": k < warmup, "release_ns": release, "wakeup_ns": wakeup, "start_ns": start, "end_ns": end,
        "cpu_time_ns": ex, "cpu_start": np.full(n, VICTIM_CPU, np.int32), "cpu_end": np.full(n, VICTIM_CPU, np.int32),
        "migrated": np.zeros(n, bool), "nvcsw": np.ones(n, np.int64), "nivcsw": spike.astype(np.int64),
        "missed": end > release + period_ns, "period_ns": np.int64(period_ns), "deadline_ns": np.int64(period_ns),
    })
    df["exec_ns"] = df.end_ns - df.start_ns
    df["response_ns"] = df.end_ns - df.release_ns
    df["wakeup_latency_ns"] = df.wakeup_ns - df.release_ns
    if counters:
        df["ctr_task_clock"] = pd.array((ex * 0.97 + rng.normal(0, 500, n)).astype(np.int64), dtype="Int64")
        df["ctr_cpu_clock"] = pd.array((ex * 0.99 + rng.normal(0, 300, n)).astype(np.int64), dtype="Int64")
        df["ctr_page_faults"] = pd.array(rng.poisson(2, n) + 30 * (k == 0), dtype="Int64")
    return df


def trace_text(jobs: pd.DataFrame, *, noise_fraction: float = 0.1, seed: int = 0) -> str:
    """A tracefs text trace of the victim's CPU: the victim runs each job, `timesyncd` preempts
    it inside every job whose exec time is above 1.2 × the median, `kworker` preempts a
    random ``noise_fraction`` of the others, idle (pid 0) between jobs."""
    rng = np.random.default_rng(seed)
    med = float(jobs["exec_ns"].median())
    lines = ["# tracer: nop"]

    def sw(ts, cpu, pc, pp, state, nc, np_):
        sec, us = divmod(int(ts) // 1000, 1_000_000)
        comm = pc if pp else "<idle>"
        lines.append(f"  {comm}-{pp} [{cpu:03d}] d..2. {sec}.{us:06d}: sched_switch: prev_comm={pc} prev_pid={pp} "
                     f"prev_prio=120 prev_state={state} ==> next_comm={nc} next_pid={np_} next_prio=120")

    for j in jobs.itertuples():
        s, e = int(j.start_ns), int(j.end_ns)
        sw(s - 1_000, VICTIM_CPU, "swapper/1", 0, "R", "xt-victim", VICTIM_PID)
        culprit = ("timesyncd", CULPRIT_PID) if j.exec_ns > 1.2 * med else (
            ("kworker/1:0", NOISE_PID) if rng.random() < noise_fraction else None)
        if culprit is not None:
            a = s + (e - s) // 3
            b = a + max(2_000, (e - s) // 3)
            sw(a, VICTIM_CPU, "xt-victim", VICTIM_PID, "R+", culprit[0], culprit[1])
            sw(b, VICTIM_CPU, culprit[0], culprit[1], "S", "xt-victim", VICTIM_PID)
        sw(e + 1_000, VICTIM_CPU, "xt-victim", VICTIM_PID, "S", "swapper/1", 0)
    return "\n".join(lines) + "\n"


def culprit_rows(jobs: pd.DataFrame) -> pd.DataFrame:
    """culprits.parquet as the host derives it from the trace (one row per job × culprit)."""
    from ..trace.culprits import per_job
    from ..trace.parse import parse_lines

    events = parse_lines(trace_text(jobs).splitlines())
    return per_job(events, jobs, VICTIM_PID, {VICTIM_PID: "victim"})[1]


def outcome(run_id: str, labels: dict, jobs: pd.DataFrame | None = None, *, status: str = "completed",
            victim: dict | None = None, **fields) -> RunOutcome:
    """The run.json of a planted run, built through the outcome model (so it cannot drift from
    what the agent writes): a sum victim with the job table's period and job counts, any of
    its fields replaced by ``victim``, the plan's labels (as strings), and ``fields`` (other
    outcome fields: environment, counters ...)."""
    jobs = job_table(5) if jobs is None else jobs
    n = len(jobs)
    warm = int(jobs["warmup"].sum()) if n else 0
    v = {"body": {"kind": "sum", "bytes": 262144}, "period_ns": int(jobs["period_ns"].iloc[0]) if n else 1_000_000,
         "jobs": max(n - warm, 1), "warmup_jobs": warm, **(victim or {})}
    plan = Plan(run_id=run_id, timeout_s=60.0, victim=v, labels={k: str(x) for k, x in labels.items()})
    # Every field of the plan written, as the agent writes it.
    return RunOutcome.model_validate({
        "run_id": run_id, "status": status, "reason": None, "plan": json.loads(plan.to_json()), "jobs_recorded": n,
        "jobs_planned": n, "enemies": [], "pids": {"agent": 1, "victim": VICTIM_PID, "enemies": {}}, **fields})


def write_run(root: Path, run_id: str, scenario: str, repetition: int, jobs: pd.DataFrame, *, labels: dict | None = None,
              trace: bool = False, status: str = "completed", victim: dict | None = None) -> Path:
    d = root / "runs" / run_id
    safepath.makedirs(d)
    labels = {"scenario": scenario, "configuration": "default", "repetition": repetition, **(labels or {})}
    write_outcome(d, outcome(run_id, labels, jobs, status=status, victim=victim))
    safepath.write_parquet(pa.Table.from_pandas(jobs, preserve_index=False), d / "jobs.parquet", **JOB_TABLE_WRITE)
    if trace:
        safepath.write_text(d / "trace.txt", trace_text(jobs))
        safepath.write_parquet(pa.Table.from_pandas(culprit_rows(jobs), preserve_index=False), d / "culprits.parquet")
    return d


def write_results(root: Path, scenarios: list[Scenario], *, repetitions: int = 3, jobs: int = 400, period_ns: int = 1_000_000,
                  exec_ns: float = 200_000, trace: bool = False, counters: bool = False, drift_ns: float = 0.0,
                  miss_jobs: tuple = (), serious_jobs: tuple = (), name: str = "synthetic", seed: int = 0,
                  victim: dict | None = None) -> Path:
    """A whole results directory; runs interleaved as `xtalk run` orders them. Misses are
    planted in the last scenario's first run; with ``trace`` the first repetition of every
    scenario has a kernel trace (deriving culprits costs ~5 ms per job)."""
    root = Path(root)
    safepath.makedirs(root / "runs")
    order, i = [], 0
    for rep in range(repetitions):
        for s in scenarios:
            run_id = f"{i}-{s.name}-r{rep}"
            last = s is scenarios[-1] and rep == 0
            j = job_table(jobs, period_ns=period_ns, exec_ns=exec_ns, slowdown=s.slowdown, spike_every=s.spike_every,
                          spike_ns=s.spike_ns, big_every=s.big_every, drift_ns=drift_ns, counters=counters,
                          miss_jobs=miss_jobs if last else (), serious_jobs=serious_jobs if last else (),
                          seed=seed * 1000 + i, t0_ns=10**12 + i * 10**11)
            write_run(root, run_id, s.name, rep, j, labels=s.labels, trace=trace and rep == 0, victim=victim)
            order.append({"run_id": run_id, "scenario": s.name, "repetition": rep})
            i += 1
    exp = {"name": name, "description": "synthetic results with planted effects",
           "victim": {"body": "sum", "period": f"{period_ns / 1e6}ms", "jobs": jobs},
           "scenario": [{"name": s.name, "enemies": s.enemies} for s in scenarios if s.name != "solo"]}
    safepath.write_text(root / "experiment.json", json.dumps({"experiment": exp, "agent": "synthetic", "order": order}, indent=2))
    return root


# --------------------------------------------------------------------------- several applications


@dataclass
class Application:
    """A measured application of a synthetic cohabitation experiment (as `[[application]]`
    declares it: name, criticality, ε as the TOML table) and its own timing."""

    name: str
    criticality: str = "D"
    epsilon: dict | None = None
    exec_ns: float = 200_000
    period_ns: int = 1_000_000


def application_scenarios(apps: list[Application], faults: list[tuple[str, str]] = (), enemies: list[str] = ()) -> list[str]:
    """The scenario names the host generates: alone:<A>, pair:<A>+<B> (declaration order),
    all, all+<scenario>, fault:<A>:<kind>."""
    names = [a.name for a in apps]
    out = [f"alone:{n}" for n in names]
    out += [f"pair:{a}+{b}" for i, a in enumerate(names) for b in names[i + 1:]]
    out += ["all"] + [f"all+{e}" for e in enemies] + [f"fault:{f}:{k}" for f, k in faults]
    return out


def _present(scenario: str, names: list[str]) -> list[str]:
    if scenario.startswith("alone:"):
        return [scenario[6:]]
    if scenario.startswith("pair:"):
        return scenario[5:].split("+")
    return list(names)


def application_results(apps: list[Application], *, configurations=("default",), repetitions: int = 3, jobs: int = 300,
                        perturb: dict | None = None, faults: list[tuple[str, str]] = (), fault_effect: dict | None = None,
                        enemies: dict | None = None, sigma: float = 0.02, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(jobs, runs) of a cohabitation experiment with planted effects, in memory: the job
    frame has the ``application`` column and the run labels, warm-up jobs flagged.

    ``perturb``: {(configuration, victim, perturber): factor}: the victim's times are
    multiplied by the factor whenever the perturber runs beside it (pairs, all, faults);
    ``faults``: (faulty application, kind) pairs, one scenario each; ``fault_effect``:
    {(configuration, faulty, victim): factor} applied in that fault's scenario (a factor
    that pushes a job past its period makes it miss its deadline); ``enemies``: {scenario
    name: {(configuration, victim): factor}} for ``all+<scenario>``."""
    perturb, fault_effect, enemies = perturb or {}, fault_effect or {}, enemies or {}
    names = [a.name for a in apps]
    scenarios = application_scenarios(apps, list(faults), list(enemies))
    frames, runs, i = [], [], 0
    for rep in range(repetitions):
        for cfg in configurations:
            for sc in scenarios:
                run_id = f"{i}-{cfg}-{sc}-r{rep}"
                here = _present(sc, names)
                for a in apps:
                    if a.name not in here:
                        continue
                    f = 1.0
                    for other in here:
                        if other != a.name:
                            f *= perturb.get((cfg, a.name, other), 1.0)
                    if sc.startswith("all+"):
                        f *= enemies[sc[4:]].get((cfg, a.name), 1.0)
                    if sc.startswith("fault:"):
                        f *= fault_effect.get((cfg, sc.split(":")[1], a.name), 1.0)
                    j = job_table(jobs, period_ns=a.period_ns, exec_ns=a.exec_ns, slowdown=f, sigma=sigma,
                                  seed=seed * 100_000 + i * 16 + names.index(a.name), t0_ns=10**12 + i * 10**11)
                    frames.append(j.assign(application=a.name, scenario=sc, configuration=cfg, run_id=run_id,
                                           repetition=rep))
                runs.append({"run_id": run_id, "scenario": sc, "configuration": cfg, "repetition": rep,
                             "status": "completed", "reason": None, "applications": ",".join(here)})
                i += 1
    jobs_df = pd.concat(frames, ignore_index=True)
    for c in ("application", "scenario", "configuration", "run_id"):
        jobs_df[c] = jobs_df[c].astype("category")
    return jobs_df, pd.DataFrame(runs)


def experiment_applications(apps: list[Application]) -> list[dict]:
    """The `[[application]]` entries as the results' experiment copy keeps them."""
    out = []
    for a in apps:
        e = {"name": a.name, "criticality": a.criticality, "body": "sum", "period": f"{a.period_ns / 1e6:g}ms"}
        if a.epsilon is not None:
            e["epsilon"] = dict(a.epsilon)
        out.append(e)
    return out


def write_application_results(root: Path, apps: list[Application], *, name: str = "cohabitation",
                              **kwargs) -> tuple[Path, pd.DataFrame]:
    """A results directory of a cohabitation experiment (:func:`application_results`) as the
    store keeps it: each run's jobs.parquet holds every application's rows (``application``
    column), its labels the applications present (and the fault), the experiment copy the
    `[[application]]` entries (criticality, ε). Returns the directory and the whole job frame."""
    root = Path(root)
    jobs, runs = application_results(apps, **kwargs)
    order = []
    for r in runs.itertuples():
        j = jobs[jobs["run_id"] == r.run_id]
        own = j.drop(columns=["scenario", "configuration", "run_id", "repetition"]).reset_index(drop=True)
        own["application"] = own["application"].astype(str)
        labels = {"configuration": r.configuration, "applications": r.applications}
        if r.scenario.startswith("fault:"):
            labels.update(faulty=r.scenario.split(":")[1], fault=r.scenario.split(":")[2])
        write_run(root, r.run_id, r.scenario, r.repetition, own, labels=labels)
        order.append({"run_id": r.run_id, "scenario": r.scenario, "repetition": r.repetition})
    exp = {"name": name, "description": "synthetic applications with planted interference and faults",
           "victim": None, "application": experiment_applications(apps)}
    safepath.write_text(root / "experiment.json", json.dumps({"experiment": exp, "agent": "synthetic", "order": order}, indent=2))
    return root, jobs
