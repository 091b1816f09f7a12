"""``xtalk sched …``: schedulability analyses, simulation and task-set generation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from xtalk.sched.coupling import apply_measured_wcets, load_jobs, parse_wcet_from
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
from xtalk.sched.simulate import GLOBAL_POLICIES, SimPartition, gantt, simulate
from xtalk.sched.taskset import Task, TaskSystem, hyperperiod, load_taskset
from xtalk.sched.uniproc import (
    edf_demand_test,
    edf_utilization_test,
    inflate,
    liu_layland_bound,
    response_time_analysis,
    rm_utilization_test,
    utilization,
)
from xtalk.sched.vm import analyse_vms, check_vm, synthesize_highest_priority

app = typer.Typer(help="Schedulability (seed 001): RTA, EDF, PRM, VM budgets, SCHED_DEADLINE, simulation.")
_out = Console(width=120)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _load(file: Path, wcet_from: Optional[str], statistic: str) -> TaskSystem:
    system = load_taskset(file)
    needs = [t for t in system.tasks if t.measured]
    if wcet_from or needs:
        if not wcet_from:
            raise InputError(f"task {needs[0].name}.measured", "needs measurements", "pass --wcet-from RESULTS_DIR[:SCENARIO]")
        path, scenario = parse_wcet_from(wcet_from)
        jobs = load_jobs(path)
        system.tasks = apply_measured_wcets(system.tasks, jobs, scenario, statistic)
    missing = [t for t in system.tasks if t.wcet <= 0]
    if missing:
        raise InputError(f"task {missing[0].name}.wcet", "no WCET", "give wcet or a measured scenario")
    if system.overhead_ms:
        system.tasks = inflate(system.tasks, system.overhead_ms)
    return system


def _analyze_group(title: str, tasks: list[Task], scheduler: str, resource: PeriodicResource | None) -> bool:
    table = Table(title=title)
    for col in ("task", "wcet", "period", "deadline", "response", "schedulable", "slack"):
        table.add_column(col)
    ok = True
    if resource is not None:
        rts = prm_response_times(tasks, resource, order="dm" if scheduler == "dm" else "rm")
        for t, r in rts:
            good = r <= t.d
            ok &= good
            table.add_row(t.name, _fmt(t.wcet), _fmt(t.period), _fmt(t.d), _fmt(r), "yes" if good else "NO", _fmt(t.d - r))
        verdict, _ = prm_schedulable(tasks, resource)
        _out.print(table)
        _out.print(
            f"Γ=(Π={resource.period:g}, Θ={resource.budget:g}) bandwidth {resource.bandwidth:.3f}, "
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
            r = sim_r.get(t.name, math.nan)
            table.add_row(t.name, _fmt(t.wcet), _fmt(t.period), _fmt(t.d), _fmt(r) + " (sim)", "yes" if verdict else "NO", _fmt(t.d - r))
        _out.print(table)
        _out.print(
            f"EDF: U={utilization(tasks):.3f}, U<=1: {edf_utilization_test(tasks)}, processor demand: "
            + ("schedulable" if verdict else f"NOT schedulable (dbf(t) > t at t={fail_t})")
        )
        return verdict
    for r in response_time_analysis(tasks, order=scheduler if scheduler in ("rm", "dm") else "rm"):
        ok &= r.schedulable
        table.add_row(
            r.task.name, _fmt(r.task.wcet), _fmt(r.task.period), _fmt(r.task.d), _fmt(r.response),
            "yes" if r.schedulable else "NO", _fmt(r.slack),
        )
    _out.print(table)
    n = len(tasks)
    _out.print(
        f"U={utilization(tasks):.3f}, Liu-Layland bound {liu_layland_bound(n):.3f} "
        f"({'passes' if rm_utilization_test(tasks) else 'inconclusive'}), RTA: {'schedulable' if ok else 'NOT schedulable'}"
    )
    return ok


@app.command("analyze")
def analyze_cmd(
    file: Path = typer.Argument(..., help="task-set TOML ([[task]] tables)"),
    wcet_from: Optional[str] = typer.Option(None, "--wcet-from", help="RESULTS_DIR:SCENARIO: WCET = measured maximum"),
    statistic: str = typer.Option("max", help="max, p99, p999, mean or median of the measured execution times"),
    scheduler: Optional[str] = typer.Option(None, help="override [system] scheduler: rm, dm, edf, fp"),
) -> None:
    """Response time, verdict and slack of every task (per partition when partitions exist)."""
    try:
        system = _load(file, wcet_from, statistic)
        sched = scheduler or system.scheduler
        if sched not in ("rm", "dm", "edf", "fp"):
            raise InputError("--scheduler", f"unknown scheduler {sched!r}", "use rm, dm, edf or fp")
        ok = True
        if system.partitions:
            for p in system.partitions:
                tasks = system.tasks_of(p.name)
                if tasks:
                    ok &= _analyze_group(f"partition {p.name}", tasks, sched, PeriodicResource(p.period, p.budget))
            loose = system.tasks_of(None)
            if loose:
                ok &= _analyze_group("tasks without partition", loose, sched, None)
        else:
            ok = _analyze_group(str(file), system.tasks, sched, None)
        _out.print("verdict: " + ("schedulable" if ok else "NOT schedulable"))
    except InputError as exc:
        _fail(exc)


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
) -> None:
    """Two-level discrete-event simulation: deadline-miss ratio and response times."""
    try:
        system = _load(file, None, "max")
        loc = local or ("edf" if system.scheduler == "edf" else "rm")
        if loc not in ("rm", "edf"):
            raise InputError("--local", f"unknown policy {loc!r}", "use rm or edf")
        if system.partitions:
            parts = [
                SimPartition(p.name, system.tasks_of(p.name), loc, p.budget, p.period, p.priority)
                for p in system.partitions
            ]
            kinds = {p.server for p in system.partitions}
            if not policy and len(kinds) > 1:
                raise InputError("partition.server", f"mixed server kinds {sorted(kinds)}", "use one kind or pass --policy")
            pol = policy or {"periodic": "ps", "deferrable": "ds", "cbs": "cbs"}[kinds.pop()]
        else:
            parts = [SimPartition("cpu", system.tasks, loc)]
            pol = policy or "dedicated"
        if pol not in GLOBAL_POLICIES:
            raise InputError("--policy", f"unknown policy {pol!r}", f"use one of {', '.join(GLOBAL_POLICIES)}")
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
        res = simulate(parts, dur, pol, quantum=parse_duration_ms(quantum, "--quantum"),
                       exec_fraction=(exec_min, 1.0), rng=np.random.default_rng(seed))
        table = Table(title=f"{pol} over {dur:g} ms")
        for col in ("task", "jobs", "missed", "miss ratio", "max response"):
            table.add_column(col)
        for name, g in res.jobs.groupby("task", sort=False):
            table.add_row(str(name), str(len(g)), str(int(g["missed"].sum())), f"{g['missed'].mean():.3f}",
                          _fmt(float(g["response"].max())) if g["response"].notna().any() else "-")
        _out.print(table)
        _out.print(f"deadline-miss ratio {res.deadline_miss_ratio:.4f}")
        if csv:
            res.jobs.to_csv(csv, index=False)
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
        if dist not in DISTRIBUTIONS:
            raise InputError("--dist", f"unknown distribution {dist!r}", f"use one of {', '.join(DISTRIBUTIONS)}")
        if periods not in ("uniform", "log-uniform"):
            raise InputError("--periods", f"unknown kind {periods!r}", "use uniform or log-uniform")
        if m < 1 or k < 1:
            raise InputError("--m/--k", "must be >= 1", "use positive counts")
        tasks = generate_taskset(np.random.default_rng(seed), m=m, k=k, dist=dist, total=total, periods=periods)
        lines = [f"# generated: m={m} k={k} dist={dist} total={total} periods={periods} seed={seed}"]
        for t in tasks:
            lines += ["[[task]]", f'name = "{t.name}"', f"wcet = {t.wcet:.6f}", f"period = {t.period:g}", ""]
        text = "\n".join(lines)
        if output:
            output.write_text(text)
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
) -> None:
    """Periodic resource model: Lemma 2.1 test, minimal Θ, Shin–Lee capacity, overhead."""
    try:
        system = _load(file, None, "max")
        pi = parse_duration_ms(period, "--period")
        if pi <= 0:
            raise InputError("--period", "must be > 0", "use a positive period")
        tasks = system.tasks
        theta_min = minimal_budget(tasks, pi)
        cap = shin_lee_capacity(tasks, pi)
        _out.print(f"U = {utilization(tasks):.4f}")
        _out.print(f"minimal Θ for Π={pi:g} (Lemma 2.1): " + ("none ≤ Π" if theta_min is None else f"{theta_min:.4f}"))
        _out.print(f"Shin–Lee capacity Θ (Eq. 2.2–2.3): {cap:.4f}")
        theta = parse_duration_ms(budget, "--budget") if budget else theta_min
        if theta is not None and theta <= pi:
            res = PeriodicResource(pi, theta)
            ok, _ = prm_schedulable(tasks, res)
            _out.print(
                f"Γ=(Π={pi:g}, Θ={theta:.4f}): bandwidth {res.bandwidth:.4f}, interface overhead "
                f"{interface_overhead(tasks, res):.4f}, {'schedulable' if ok else 'NOT schedulable'}"
            )
            for t, r in prm_response_times(tasks, res):
                _out.print(f"  {t.name}: response bound {_fmt(r)} (deadline {t.d:g})")
        elif theta is not None:
            raise InputError("--budget", f"budget {theta} exceeds period {pi}", "use budget <= period")
    except InputError as exc:
        _fail(exc)


@app.command("vm")
def vm_cmd(
    file: Path = typer.Argument(..., help="task-set TOML with [[partition]] tables, or tasks only"),
    one_per_cpu: bool = typer.Option(False, help="each VM on its own CPU (no higher-priority VM)"),
) -> None:
    """VM analysis (seed 001 Eq. 4.1–4.6) of the partitions, or budget synthesis
    (Eq. 4.12–4.17) of a highest-priority VM for the tasks when there is no partition."""
    try:
        system = _load(file, None, "max")
        if not system.partitions:
            syn = synthesize_highest_priority(system.tasks)
            _out.print(f"Π = d_min = {syn.period:g} (Eq. 4.12)")
            for s in syn.steps:
                _out.print(
                    f"  {s.task}: ω={s.omega:g} (4.5), root of (4.15) {s.root:.4f}, Δ={s.delta:.4f} (4.16), "
                    f"η={s.eta} (4.17), refined Θ={s.refined:.4f}, needed Θ={_fmt(s.budget)}"
                )
            _out.print(f"Θ = {_fmt(syn.budget)}; Eq. 4.6 for every task: {syn.check.schedulable}")
            return
        vms = [(p.name, PeriodicResource(p.period, p.budget), system.tasks_of(p.name)) for p in system.partitions]
        vms = [v for v in vms if v[2]]
        checks = [check_vm(n, r, ts, []) for n, r, ts in vms] if one_per_cpu else analyse_vms(vms)
        for c in checks:
            _out.print(
                f"{c.name}: Θ={c.vm.budget:g} Π={c.vm.period:g} Ω={_fmt(c.omega)} (4.1) L={_fmt(c.length)} (4.2) "
                f"Θ≥e_min (4.3): {c.e_min_ok}, L≤d_min (4.4): {c.necessary_ok}"
            )
            for tc in c.tasks:
                _out.print(
                    f"  {tc.task.name}: ω={tc.omega:g} (4.5) t={tc.t:g} k={tc.k} "
                    f"kΘ+min(Θ,α)={tc.lhs:g} (4.6) {'ok' if tc.ok else 'FAILS'}"
                )
            _out.print(f"  {'schedulable' if c.schedulable else 'NOT schedulable'}")
    except InputError as exc:
        _fail(exc)


@app.command("deadline")
def deadline_cmd(
    file: Path = typer.Argument(..., help="task-set TOML: runtime = wcet"),
    cpus: int = typer.Option(1, help="CPUs in the root domain"),
    rt_runtime_us: int = typer.Option(950_000, help="/proc/sys/kernel/sched_rt_runtime_us"),
    rt_period_us: int = typer.Option(1_000_000, help="/proc/sys/kernel/sched_rt_period_us"),
) -> None:
    """SCHED_DEADLINE admission control for the tasks as reservations."""
    try:
        system = _load(file, None, "max")
        res = admit([Reservation(t.name, t.wcet, t.d, t.period) for t in system.tasks], cpus, rt_runtime_us, rt_period_us)
        _out.print(
            f"bandwidth {res.total_bandwidth:.4f} / limit {res.limit:.4f}: "
            + ("admitted" if res.admitted else f"REFUSED ({res.reason})")
        )
    except InputError as exc:
        _fail(exc)
