"""``xtalk sched …``: schedulability analyses, simulation and task-set generation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from xtalk.sched.coupling import Measured, check_statistic, load_jobs, measure_tasks, parse_wcet_from
from xtalk.sched.deadline import Reservation, admit
from xtalk.sched.generate import DISTRIBUTIONS, generate_taskset
from xtalk.sched.inputs import InputError, parse_duration_ms
from xtalk.sched.prm import (
    PeriodicResource,
    interface_overhead,
    minimal_budget,
    prm_response_times,
    prm_schedulable,
    shin_lee_capacity,
)
from xtalk.sched.placement import cpu_bandwidth, place_partitions, place_tasks
from xtalk.sched.simulate import GLOBAL_POLICIES, SimPartition, gantt, simulate, simulate_cpus
from xtalk.sched.taskset import Task, TaskSystem, hyperperiod, load_taskset
from xtalk.sched.uniproc import (
    SEED001_OVERHEAD,
    ReleaseOverhead,
    edf_demand_test,
    edf_utilization_test,
    inflate,
    liu_layland_bound,
    response_time_analysis,
    rm_utilization_test,
    utilization,
)
from xtalk.sched.vm import analyse_vms, check_vm, synthesize_highest_priority

from .. import safepath
from ..errors import UsageError

app = typer.Typer(help="Schedulability (seed 001): RTA, EDF, PRM, VM budgets, SCHED_DEADLINE, simulation.")
_out = Console(width=120)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def _output(path: Optional[Path], what: str) -> Optional[Path]:
    """A single file this command writes, checked before anything runs
    (safepath.output_file: another user's link or directory is refused); None stays None."""
    if path is None:
        return None
    try:
        return safepath.output_file(path, what)
    except UsageError as e:
        raise InputError(what, str(e).removeprefix(f"{what} ")) from None


def _results(path: Path, what: str) -> Path:
    """`path` checked as a results directory (reading it converts job logs there)."""
    try:
        return safepath.results_dir(path, what)
    except UsageError as e:
        raise InputError(what, str(e).removeprefix(f"{what} ")) from None


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "-"
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else f"{x:.3f}"


def _slack(deadline: float, response: float, good: bool) -> str:
    """d − response, where the task can meet its deadline; "none (misses)" where it cannot
    (an unbounded response once printed a slack of `inf`)."""
    if not good or math.isinf(response):
        return "none (misses)"
    return _fmt(deadline - response)


def _load(file: Path, wcet_from: Optional[str] = None, statistic: str = "max", overheads_from: Optional[str] = None,
          overheads_stat: str = "max") -> tuple[TaskSystem, dict[str, Measured]]:
    """The task system of ``file``, WCETs replaced by measurements when asked, every WCET
    inflated by the release overhead (measured with ``overheads_from``, else the file's
    ``[system] overhead``), which is said on one line; the measurements per task name."""
    from xtalk.analysis.overheads import STATS

    check_statistic(statistic)
    if overheads_stat not in STATS:  # read only with --overheads-from: a bad one is refused anyway
        raise InputError("--overheads-stat", f"unknown statistic {overheads_stat!r}", f"use {', '.join(STATS)}")
    system = load_taskset(file)
    measured: dict[str, Measured] = {}
    needs = [t for t in system.tasks if t.measured]
    if wcet_from or needs:
        if not wcet_from:
            raise InputError(f"task {needs[0].name}.measured", "needs measurements", "pass --wcet-from RESULTS_DIR[:SCENARIO]")
        path, scenario = parse_wcet_from(wcet_from)
        jobs = load_jobs(_results(path, "--wcet-from"))
        measured = measure_tasks(system.tasks, jobs, scenario, statistic)
        if not measured:
            raise InputError("--wcet-from", f"{wcet_from!r} gives no scenario and no task names one (`measured`)",
                             "write RESULTS_DIR:SCENARIO")
        system.tasks = [t.with_wcet(measured[t.name].wcet) if t.name in measured else t for t in system.tasks]
    missing = [t for t in system.tasks if t.wcet <= 0]
    if missing:
        raise InputError(f"task {missing[0].name}.wcet", "no WCET", "give wcet or a measured scenario")
    if overheads_from:
        oh, check = _measured(overheads_from, overheads_stat)
        was = f"[system] overhead = {system.overhead_ms * 1e3:g} µs" if system.overhead_ms else "no [system] overhead"
        _out.print(f"overhead: measured, {_overhead_text(oh)} added to every WCET ({overheads_stat} of each Δ from "
                   f"{overheads_from}; replaces {was}; seed 001's constant is {SEED001_OVERHEAD.total * 1e3:g} µs)",
                   markup=False, highlight=False)
        if check["below"]:
            _out.print(_below_text(check), markup=False, highlight=False)
        system.tasks = inflate(system.tasks, oh)
    elif system.overhead_ms:
        _out.print(f"overhead: [system] overhead = {system.overhead_ms * 1e3:g} µs added to every WCET (from {file.name})",
                   markup=False, highlight=False)
        system.tasks = inflate(system.tasks, system.overhead_ms)
    return system, measured


def _overhead_text(oh: ReleaseOverhead) -> str:
    us = [x * 1e3 for x in (oh.event, oh.release, oh.sched, oh.cxs)]
    return (f"Δevent {us[0]:.1f} + Δrel {us[1]:.1f} + Δsched {us[2]:.1f} + Δcxs {us[3]:.1f} = Δ^relEv "
            f"{oh.total * 1e3:.1f} µs")


def _below_text(check: dict) -> str:
    """The warning of a measured overhead below the latency it stands for."""
    not_ = f" ({check['tail_not']})" if check["tail_not"] else ""
    return (f"overhead: warning: the {check['stat']} of each Δ sums to {check['sum_us']:.1f} µs, below the "
            f"{check['stat']} of the measured wake-up latency, {check['latency_us']:.1f} µs: the trace decomposed "
            f"{check['tail_explained']:.0%} of the latency tail ({check['tail_jobs']} job{'s' if check['tail_jobs'] != 1 else ''} "
            "at or above its p99, "
            f"{check['latency_p99_us']:.1f} µs){not_}; the WCETs are inflated by less than the victim waited "
            "(`xtalk summary --view overheads` shows the tail and why it is not decomposed; --overheads-stat max adds more)")


def measured_overhead(spec: str, stat: str = "max") -> ReleaseOverhead:
    """Δ^relEv from a results directory with kernel traces (``RESULTS[:SCENARIO]``): each Δ's
    ``stat`` (max, p99, mean) over the jobs where the trace decomposed it (xtalk.trace.overheads)."""
    return _measured(spec, stat)[0]


def _measured(spec: str, stat: str) -> tuple[ReleaseOverhead, dict]:
    """:func:`measured_overhead` and its ``analysis.overheads.tail_check``."""
    from xtalk.analysis.overheads import STATS, breakdown, tail_check
    from xtalk.store import open as open_results
    from xtalk.store.overheads import collect

    if stat not in STATS:
        raise InputError("--overheads-stat", f"unknown statistic {stat!r}", f"use {', '.join(STATS)}")
    path, scenario = parse_wcet_from(spec, "--overheads-from")
    try:
        results = open_results(_results(path, "--overheads-from"))
    except FileNotFoundError as e:
        raise InputError("--overheads-from", str(e), "give the directory `xtalk run` printed") from None
    jobs, traced = collect(results.runs())
    if traced.empty:
        raise InputError("--overheads-from", f"{path}: no run has a kernel trace",
                         "run examples/latency_overheads.toml (it has [trace]) as root and give its results")
    if scenario is not None and scenario not in set(jobs["scenario"].astype(str)):
        raise InputError("--overheads-from", f"no traced run of scenario {scenario!r} in {path}",
                         f"use one of {', '.join(sorted(set(jobs['scenario'].astype(str))))}")
    b = breakdown(jobs, stat, scenario)
    if any(math.isnan(v) for v in b.values()):
        raise InputError("--overheads-from", f"{path}: no job's release could be decomposed from its trace",
                         "see `xtalk summary --view overheads` for the reasons")
    oh = ReleaseOverhead(event=b["event"] / 1e3, release=b["rel"] / 1e3, sched=b["sched"] / 1e3, cxs=b["cxs"] / 1e3)
    return oh, tail_check(jobs, stat, scenario)


_OVH_FROM = typer.Option(None, "--overheads-from",
                         help="RESULTS[:SCENARIO] with kernel traces (examples/latency_overheads.toml): the measured "
                              "Δ^relEv replaces [system] overhead")
_OVH_STAT = typer.Option("max", "--overheads-stat", help="max, p99 or mean of each measured Δ")


def _measured_cells(name: str, bound: float, measured: dict[str, Measured], exceeded: list[str]) -> list[str]:
    m = measured.get(name)
    if m is None or math.isnan(m.response_max):
        return ["-", "-"]
    within = m.response_max <= bound + 1e-9
    if not within:
        exceeded.append(name)
    return [_fmt(m.response_max), "yes" if within else "NO (exceeds)"]


def _analyze_group(title: str, tasks: list[Task], scheduler: str, resource: PeriodicResource | None,
                   measured: dict[str, Measured] | None = None, exceeded: list[str] | None = None) -> bool:
    """Print one group's table (per task: bound, verdict, slack and, when measured, the
    measured response beside the bound); tasks measured above their bound go to ``exceeded``."""
    measured = measured or {}
    exceeded = [] if exceeded is None else exceeded
    table = Table(title=title)
    bound_col = "response (ms, sim)" if scheduler == "edf" and resource is None else "bound (ms)"
    cols = ["task", "wcet (ms)", "period (ms)", "deadline (ms)", bound_col, "schedulable", "slack (ms)"]
    if measured:
        cols += ["measured max response (ms)", "within bound"]
    for col in cols:
        table.add_column(col, justify="left" if col == "task" else "right")

    def row(t: Task, r: float, good: bool) -> None:
        cells = [t.name, _fmt(t.wcet), _fmt(t.period), _fmt(t.d), _fmt(r), "yes" if good else "NO", _slack(t.d, r, good)]
        table.add_row(*(cells + (_measured_cells(t.name, r, measured, exceeded) if measured else [])))

    ok = True
    if resource is not None:
        rts = prm_response_times(tasks, resource, order="dm" if scheduler == "dm" else "rm")
        for t, r in rts:
            good = r <= t.d
            ok &= good
            row(t, r, good)
        verdict, _ = prm_schedulable(tasks, resource)
        _out.print(table)
        _out.print(
            f"Γ=(Π={resource.period:g} ms, Θ={resource.budget:g} ms) bandwidth {resource.bandwidth:.3f}, "
            f"U={utilization(tasks):.3f}, Lemma 2.1: {'schedulable' if verdict else 'NOT schedulable'}"
        )
        return ok and verdict
    if scheduler == "edf":
        verdict, fail_t = edf_demand_test(tasks)
        h = hyperperiod([t.period for t in tasks])
        sim_r: dict[str, float] = {}
        if h + max(t.d for t in tasks) <= 1e6:  # short enough to simulate the synchronous pattern
            res = simulate([SimPartition("cpu", tasks, local="edf")], h + max(t.d for t in tasks))
            sim_r = res.max_response_by_task().to_dict()
        for t in tasks:
            row(t, sim_r.get(t.name, math.nan), verdict)
        _out.print(table)
        _out.print(
            f"EDF: U={utilization(tasks):.3f}, U<=1: {edf_utilization_test(tasks)}, processor demand: "
            + ("schedulable" if verdict else f"NOT schedulable (dbf(t) > t at t={fail_t} ms)")
        )
        return verdict
    for r in response_time_analysis(tasks, order=scheduler if scheduler in ("rm", "dm") else "rm"):
        ok &= r.schedulable
        row(r.task, r.response, r.schedulable)
    _out.print(table)
    n = len(tasks)
    _out.print(
        f"U={utilization(tasks):.3f}, Liu-Layland bound {liu_layland_bound(n):.3f} "
        f"({'passes' if rm_utilization_test(tasks) else 'inconclusive'}), RTA: {'schedulable' if ok else 'NOT schedulable'}"
    )
    return ok


def _cpu_title(k: int, parts: list) -> str:
    names = ", ".join(f"{p.name} ({p.bandwidth:.3f})" for p in parts)
    return f"CPU {k}: {names}, bandwidth {cpu_bandwidth(parts):.3f}"


@app.command("analyze")
def analyze_cmd(
    file: Path = typer.Argument(..., help="task-set TOML ([[task]] tables)"),
    wcet_from: Optional[str] = typer.Option(
        None, "--wcet-from", help="RESULTS_DIR:SCENARIO (or CONFIGURATION/SCENARIO): WCET = measured maximum"),
    statistic: str = typer.Option("max", help="max, p99, p999, mean or median of the measured execution times"),
    scheduler: Optional[str] = typer.Option(None, help="override [system] scheduler: rm, dm, edf, fp"),
    overheads_from: Optional[str] = _OVH_FROM,
    overheads_stat: str = _OVH_STAT,
) -> None:
    """Response time, verdict and slack of every task (per CPU and partition when there are
    several); with --wcet-from, the measured response of each task beside its bound; with
    --overheads-from, every WCET inflated by the measured release overhead (seed 001 §4.5)."""
    try:
        system, measured = _load(file, wcet_from, statistic, overheads_from, overheads_stat)
        sched = scheduler or system.scheduler
        if sched not in ("rm", "dm", "edf", "fp"):
            raise InputError("--scheduler", f"unknown scheduler {sched!r}", "use rm, dm, edf or fp")
        for name, m in measured.items():
            _out.print(f"{name}: WCET = {m.wcet:.3f} ms, the measured {statistic} of {m.source} under "
                       f"{m.scenario!r} ({m.jobs} jobs)")
        ok = True
        exceeded: list[str] = []
        if system.partitions:
            placed = place_partitions(system)
            for k, parts in placed.items():
                _out.print(_cpu_title(k, parts))
                for p in parts:
                    tasks = system.tasks_of(p.name)
                    if tasks:
                        ok &= _analyze_group(f"CPU {k}, partition {p.name}", tasks, sched,
                                             PeriodicResource(p.period, p.budget), measured, exceeded)
            loose = system.tasks_of(None)
            if loose:
                ok &= _analyze_group("tasks without partition (a CPU of their own)", loose, sched, None, measured, exceeded)
        elif (system.cpus or 1) > 1:
            placed_tasks = place_tasks(system.tasks, system.cpus, sched)
            _out.print(f"{system.cpus} CPUs, partitioned: first-fit decreasing utilisation, no migration")
            for k, tasks in placed_tasks.items():
                ok &= _analyze_group(f"CPU {k}", tasks, sched, None, measured, exceeded)
        else:
            ok = _analyze_group(str(file), system.tasks, sched, None, measured, exceeded)
        _out.print("verdict: " + ("schedulable" if ok else "NOT schedulable"))
        _explain_excess(exceeded)
    except InputError as exc:
        _fail(exc)


def _explain_excess(exceeded: list[str]) -> None:
    """A measured response above its bound: say what the model leaves out (the measurement
    counts from the nominal release)."""
    if exceeded:
        _out.print(f"measured above the bound: {', '.join(exceeded)}. A measured response counts from the nominal "
                   "release, so the wake-up latency and the time the kernel took are in it but not in the model: give "
                   "them as the task's jitter and blocking, or read the excess as what they cost.")


def sim_groups(system: TaskSystem, local: str, policy: str) -> tuple[list[tuple[int, list[SimPartition], str]], str]:
    """The CPUs to simulate, each with its partitions and level-1 policy, placed as the
    analysis places them (:mod:`xtalk.sched.placement`); and the policy's name."""
    groups: list[tuple[int, list[SimPartition], str]] = []
    if system.partitions:
        kinds = {p.server for p in system.partitions}
        if not policy and len(kinds) > 1:
            raise InputError("partition.server", f"mixed server kinds {sorted(kinds)}", "use one kind or pass --policy")
        pol = policy or {"periodic": "ps", "deferrable": "ds", "cbs": "cbs"}[kinds.pop()]
        placed = place_partitions(system)
        for k, parts in placed.items():
            sp = [SimPartition(p.name, system.tasks_of(p.name), local, p.budget, p.period, p.priority) for p in parts]
            sp = [p for p in sp if p.tasks]
            if sp:
                groups.append((k, sp, pol))
        loose = system.tasks_of(None)
        if loose:
            groups.append((max(placed, default=-1) + 1, [SimPartition("cpu", loose, local)], "dedicated"))
        return groups, pol
    pol = policy or "dedicated"
    for k, tasks in place_tasks(system.tasks, system.cpus or 1, local).items():
        groups.append((k, [SimPartition(f"cpu{k}" if (system.cpus or 1) > 1 else "cpu", tasks, local)], pol))
    return groups, pol


@app.command("simulate")
def simulate_cmd(
    file: Path = typer.Argument(..., help="task-set TOML"),
    policy: str = typer.Option("", help=f"level-1 policy: {', '.join(GLOBAL_POLICIES)} (default: dedicated, or the partitions' server kind)"),
    duration: Optional[str] = typer.Option(None, help="simulated time, e.g. 2s (default: hyperperiod + max deadline)"),
    quantum: str = typer.Option("10ms", help="rr time slice"),
    local: str = typer.Option("", help="task-level policy rm or edf (default from [system] scheduler)"),
    seed: int = typer.Option(0, help="seed for random execution times"),
    exec_min: float = typer.Option(1.0, help="jobs run U[exec_min, 1]·WCET"),
    plot: Optional[Path] = typer.Option(None, "--gantt", help="write a Gantt chart (PNG)"),
    csv: Optional[Path] = typer.Option(None, help="write the job trace as CSV"),
    overheads_from: Optional[str] = _OVH_FROM,
    overheads_stat: str = _OVH_STAT,
) -> None:
    """Two-level discrete-event simulation, per CPU as the analysis places servers and tasks:
    deadline-miss ratio and response times."""
    try:
        plot, csv = _output(plot, "--gantt"), _output(csv, "--csv")
        system, _ = _load(file, overheads_from=overheads_from, overheads_stat=overheads_stat)
        loc = local or ("edf" if system.scheduler == "edf" else "rm")
        if loc not in ("rm", "edf"):
            raise InputError("--local", f"unknown policy {loc!r}", "use rm or edf")
        if policy and policy not in GLOBAL_POLICIES:
            raise InputError("--policy", f"unknown policy {policy!r}", f"use one of {', '.join(GLOBAL_POLICIES)}")
        groups, pol = sim_groups(system, loc, policy)
        if not 0 < exec_min <= 1:
            raise InputError("--exec-min", f"{exec_min} outside (0, 1]", "use e.g. 0.5")
        if duration:
            dur = parse_duration_ms(duration, "--duration")
        else:
            dur = hyperperiod([t.period for t in system.tasks]) + max(t.d for t in system.tasks)
            cap = 1000 * max(t.period for t in system.tasks)
            if dur > cap:  # co-prime periods: the hyperperiod can be astronomically long
                _out.print(f"hyperperiod too long to simulate; simulating {cap:g} ms (set --duration)")
                dur = cap
        for k, parts, p in groups:
            names = ", ".join(f"{sp.name} ({sp.budget / sp.period:.3f})" if sp.budget else sp.name for sp in parts)
            _out.print(f"CPU {k}: {names} under {p}")
        import numpy as np  # for a simulation, not for `xtalk sched --help`

        res = simulate_cpus([(k, parts, p) for k, parts, p in groups], dur, quantum=parse_duration_ms(quantum, "--quantum"),
                            exec_fraction=(exec_min, 1.0), rng=np.random.default_rng(seed))
        table = Table(title=f"{pol} over {dur:g} ms on {len(groups)} CPU{'s' if len(groups) != 1 else ''}")
        for col in ("task", "CPU", "jobs", "missed", "miss ratio", "max response (ms)"):
            table.add_column(col, justify="left" if col == "task" else "right")
        for name, g in res.jobs.groupby("task", sort=False):
            table.add_row(str(name), str(int(g["cpu"].iloc[0])), str(len(g)), str(int(g["missed"].sum())),
                          f"{g['missed'].mean():.3f}",
                          _fmt(float(g["response"].max())) if g["response"].notna().any() else "-")
        _out.print(table)
        _out.print(f"deadline-miss ratio {res.deadline_miss_ratio:.4f}")
        if csv:
            safepath.write_csv(res.jobs, csv, index=False)
        if plot:
            gantt(res, str(plot), title=f"{file.name}: {pol}")
            _out.print(f"wrote {plot}")
    except (InputError, ValueError) as exc:
        _fail(exc)


@app.command("generate")
def generate_cmd(
    m: int = typer.Option(1, help="processors"),
    k: int = typer.Option(5, help="tasks per processor (n = m·k)"),
    dist: str = typer.Option("uni-medium", help=", ".join(DISTRIBUTIONS)),
    total: Optional[float] = typer.Option(None, help="total utilisation (UUniFast) instead of --dist"),
    periods: str = typer.Option("uniform", help="uniform, log-uniform"),
    seed: int = typer.Option(..., help="random seed (required: generation is always seeded)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="write TOML here (default: stdout)"),
) -> None:
    """Random task set (seed 001 §3.4.4) as TOML."""
    try:
        output = _output(output, "--output")
        if dist not in DISTRIBUTIONS:
            raise InputError("--dist", f"unknown distribution {dist!r}", f"use one of {', '.join(DISTRIBUTIONS)}")
        if periods not in ("uniform", "log-uniform"):
            raise InputError("--periods", f"unknown kind {periods!r}", "use uniform or log-uniform")
        if m < 1 or k < 1:
            raise InputError("--m/--k", "must be >= 1", "use positive counts")
        import numpy as np

        tasks = generate_taskset(np.random.default_rng(seed), m=m, k=k, dist=dist, total=total, periods=periods)
        lines = [f"# generated: m={m} k={k} dist={dist} total={total} periods={periods} seed={seed}; times in ms"]
        if m > 1:  # analysed and simulated on m CPUs (partitioned), not on one
            lines += ["[system]", f"cpus = {m}", ""]
        for t in tasks:
            lines += ["[[task]]", f'name = "{t.name}"', f"wcet = {t.wcet:.6f}", f"period = {t.period:g}", ""]
        text = "\n".join(lines)
        if output:
            safepath.write_text(output, text)
            _out.print(f"wrote {output} ({len(tasks)} tasks, U = {utilization(tasks):.3f})")
        else:
            typer.echo(text)
    except (InputError, ValueError) as exc:
        _fail(exc)


@app.command("prm")
def prm_cmd(
    file: Path = typer.Argument(..., help="task-set TOML"),
    period: str = typer.Option(..., help="resource period Π"),
    budget: Optional[str] = typer.Option(None, help="budget Θ to check (default: the minimal one)"),
    overheads_from: Optional[str] = _OVH_FROM,
    overheads_stat: str = _OVH_STAT,
) -> None:
    """Periodic resource model: Lemma 2.1 test, minimal Θ, Shin–Lee capacity, overhead."""
    try:
        system, _ = _load(file, overheads_from=overheads_from, overheads_stat=overheads_stat)
        pi = parse_duration_ms(period, "--period")
        if pi <= 0:
            raise InputError("--period", "must be > 0", "use a positive period")
        tasks = system.tasks
        theta_min = minimal_budget(tasks, pi)
        cap = shin_lee_capacity(tasks, pi)
        _out.print(f"U = {utilization(tasks):.4f}")
        _out.print(f"minimal Θ for Π={pi:g} ms (Lemma 2.1): " + ("none ≤ Π" if theta_min is None else f"{theta_min:.4f} ms"))
        _out.print(f"Shin–Lee capacity Θ (Eq. 2.2–2.3): {cap:.4f} ms")
        theta = parse_duration_ms(budget, "--budget") if budget else theta_min
        if theta is not None and theta <= pi:
            res = PeriodicResource(pi, theta)
            ok, _ = prm_schedulable(tasks, res)
            _out.print(
                f"Γ=(Π={pi:g} ms, Θ={theta:.4f} ms): bandwidth {res.bandwidth:.4f}, interface overhead "
                f"{interface_overhead(tasks, res):.4f}, {'schedulable' if ok else 'NOT schedulable'}"
            )
            for t, r in prm_response_times(tasks, res):
                _out.print(f"  {t.name}: response bound {_fmt(r)} ms (deadline {t.d:g} ms)")
        elif theta is not None:
            raise InputError("--budget", f"budget {theta} ms exceeds period {pi} ms", "use budget <= period")
    except InputError as exc:
        _fail(exc)


@app.command("vm")
def vm_cmd(
    file: Path = typer.Argument(..., help="task-set TOML with [[partition]] tables, or tasks only"),
    one_per_cpu: bool = typer.Option(False, help="each VM on its own CPU, whatever the placement (no higher-priority VM)"),
    overheads_from: Optional[str] = _OVH_FROM,
    overheads_stat: str = _OVH_STAT,
) -> None:
    """VM analysis (seed 001 Eq. 4.1–4.6) of the partitions, per CPU as they are placed (first
    fit by bandwidth, or their `cpu`), or budget synthesis (Eq. 4.12–4.17) of a
    highest-priority VM for the tasks when there is no partition."""
    try:
        system, _ = _load(file, overheads_from=overheads_from, overheads_stat=overheads_stat)
        if not system.partitions:
            syn = synthesize_highest_priority(system.tasks)
            _out.print(f"Π = d_min = {syn.period:g} ms (Eq. 4.12)")
            for s in syn.steps:
                _out.print(
                    f"  {s.task}: ω={s.omega:g} ms (4.5), root of (4.15) {s.root:.4f} ms, Δ={s.delta:.4f} ms (4.16), "
                    f"η={s.eta} (4.17), refined Θ={s.refined:.4f} ms, needed Θ={_fmt(s.budget)} ms"
                )
            _out.print(f"Θ = {_fmt(syn.budget)} ms; Eq. 4.6 for every task: {syn.check.schedulable}")
            return
        placed = place_partitions(system)
        checks = []
        for k, parts in placed.items():
            vms = [(p.name, PeriodicResource(p.period, p.budget), system.tasks_of(p.name)) for p in parts]
            vms = [v for v in vms if v[2]]
            if one_per_cpu:
                checks += [check_vm(n, r, ts, []) for n, r, ts in vms]
                continue
            _out.print(_cpu_title(k, parts) + (": VMs by RM on Π" if len(vms) > 1 else ""))
            checks += analyse_vms(vms)
        for c in checks:
            _out.print(
                f"{c.name}: Θ={c.vm.budget:g} ms Π={c.vm.period:g} ms Ω={_fmt(c.omega)} ms (4.1) L={_fmt(c.length)} ms (4.2) "
                f"Θ≥e_min (4.3): {c.e_min_ok}, L≤d_min (4.4): {c.necessary_ok}"
            )
            for tc in c.tasks:
                _out.print(
                    f"  {tc.task.name}: ω={tc.omega:g} ms (4.5) t={tc.t:g} ms k={tc.k} "
                    f"kΘ+min(Θ,α)={tc.lhs:g} ms (4.6) {'ok' if tc.ok else 'FAILS'}"
                )
            _out.print(f"  {'schedulable' if c.schedulable else 'NOT schedulable'}")
    except InputError as exc:
        _fail(exc)


@app.command("reserve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def reserve_cmd(
    ctx: typer.Context,
    budget: Optional[str] = typer.Option(None, help="Θ: runtime per period (ms, or with a unit: 450us)"),
    period: Optional[str] = typer.Option(None, help="Π: period = deadline (ms, or with a unit)"),
    taskset: Optional[Path] = typer.Option(None, help="take Θ and Π from `xtalk sched vm` of this task set (no partition)"),
    tid: list[int] = typer.Option([], help="a thread id (repeat)"),
    qmp: Optional[str] = typer.Option(None, help="a qemu QMP socket: its vCPU threads"),
    record: Optional[Path] = typer.Option(None, help="write what was set and read back (JSON)"),
) -> None:
    """Run COMMAND (after `--`) with the threads under a SCHED_DEADLINE reservation (Θ, Π),
    then give each thread its previous policy back (seed 001 ch. 3: vCPU threads as a
    partition). Root. Exit 2 with one line for bad input; otherwise COMMAND's status."""
    import json
    import signal
    import subprocess

    from xtalk.sched.qmp import query_vcpu_threads
    from xtalk.sched.reserve import Policy, reserved, same_policy

    command = list(ctx.args)
    try:
        record = _output(record, "--record")
        if taskset is not None:
            if budget is not None or period is not None:
                raise InputError("--taskset", "given with --budget/--period", "give one or the other")
            syn = synthesize_highest_priority(_load(taskset)[0].tasks)
            theta_ms, pi_ms = syn.budget, syn.period
            if math.isinf(theta_ms):
                raise InputError("--taskset", "no budget makes the task set schedulable (Eq. 4.6)")
        else:
            if budget is None or period is None:
                raise InputError("--budget", "Θ and Π are both needed", "give --budget and --period, or --taskset")
            theta_ms, pi_ms = parse_duration_ms(budget, "--budget"), parse_duration_ms(period, "--period")
        if not command:
            raise InputError("COMMAND", "nothing to run under the reservation", "append -- COMMAND ARGS")
        if command[0].startswith("-"):  # an option this command lacks, not a program to run as root
            raise InputError("COMMAND", f"{command[0]!r} is not an option of `xtalk sched reserve`",
                             "see `xtalk sched reserve --help`; the command goes after --")
        tids = list(tid) + (query_vcpu_threads(qmp) if qmp else [])
        theta_ns, pi_ns = round(theta_ms * 1e6), round(pi_ms * 1e6)

        def interrupted(*_):
            raise KeyboardInterrupt

        # SIGTERM as Ctrl-C: the command is stopped, then `reserved` restores the threads.
        signal.signal(signal.SIGTERM, interrupted)
        with reserved(tids, theta_ns, pi_ns) as rec:
            for t, entry in rec["threads"].items():
                was, now = Policy(**entry["before"]), Policy(**entry["during"])
                typer.echo(f"reserve: thread {t}: {now.describe()} (was {was.describe()})", err=True)
            child = subprocess.Popen(command)
            try:
                rc = child.wait()
            except KeyboardInterrupt:
                # not left running once the reservation it was started under is gone
                child.terminate()
                try:
                    child.wait(30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                rc = 130
        restored = all(e.get("after") == "gone" or same_policy(Policy(**e["before"]), Policy(**e["after"]))
                       for e in rec["threads"].values())
        if record:
            safepath.write_text(record, json.dumps(dict(rec, command=command, status=rc, restored=restored), indent=2))
        typer.echo(f"reserve: {len(rec['threads'])} thread(s) restored: {restored}", err=True)
        raise typer.Exit(code=rc)
    except InputError as exc:
        _fail(exc)


@app.command("deadline")
def deadline_cmd(
    file: Path = typer.Argument(..., help="task-set TOML: runtime = wcet"),
    cpus: int = typer.Option(1, help="CPUs in the root domain"),
    rt_runtime_us: int = typer.Option(950_000, help="/proc/sys/kernel/sched_rt_runtime_us"),
    rt_period_us: int = typer.Option(1_000_000, help="/proc/sys/kernel/sched_rt_period_us"),
    overheads_from: Optional[str] = _OVH_FROM,
    overheads_stat: str = _OVH_STAT,
) -> None:
    """SCHED_DEADLINE admission control for the tasks as reservations."""
    try:
        system, _ = _load(file, overheads_from=overheads_from, overheads_stat=overheads_stat)
        res = admit([Reservation(t.name, t.wcet, t.d, t.period) for t in system.tasks], cpus, rt_runtime_us, rt_period_us)
        _out.print(
            f"bandwidth {res.total_bandwidth:.4f} / limit {res.limit:.4f}: "
            + ("admitted" if res.admitted else f"REFUSED ({res.reason})")
        )
    except InputError as exc:
        _fail(exc)
