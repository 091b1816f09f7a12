"""VM-level analysis and budget synthesis (seed 001 §4.4, after Masrur et al. 2010/2011).

VMs V_l = (Θ_l, Π_l) are scheduled by fixed priorities (RM on Π), tasks inside a VM by
RM. Equations (seed 001 numbering):

* (4.1) Ω_l: fixed point t = Θ_l + Σ_{j<l} ⌈t/Π_j⌉ Θ_j (worst-case response of V_l);
* (4.2) execution length L_l = Π_l − Θ_l + Ω_l;
* (4.3) e_{l,min} ≤ Θ_l; (4.4) necessary condition Π_l − Θ_l + Ω_l ≤ d_{l,min};
* (4.5) ω_i = e_i + Σ_{j<i} ⌈d_i/p_j⌉ e_j (worst-case demand within d_i);
* (4.6) k_{l,i} Θ_l + min(Θ_l, α_l(t_i − k_{l,i} Π_l)) ≥ ω_i, t_i = d_i − (Π_l − Θ_l),
  k_{l,i} = ⌊t_i / Π_l⌋ (the §4.4.2 form; §4.6 prints Π + Θ, a slip);
* (4.8) α_l(t): the most V_l can run in t when released with all higher-priority VMs;
* (4.12) Π_1 = d_{1,min}; (4.15) Θ² + (d_i − Π)Θ − ω_i Π = 0;
* (4.16) Δ_Θ = ω_i − k Θ − min(Θ, t_i − k Π); (4.17) η = k + ⌈min(Θ, t_i − kΠ)/Θ⌉.

Seed slips corrected here: k_{l,i} uses (Π − Θ); ω_2 of §4.6 is 500 + ⌈2000/1500⌉·300 =
1100 (the thesis writes 800); Table 4.2 has u_2 = 2/5 (e_2 = 2, p_2 = 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xtalk.sched.prm import PeriodicResource
from xtalk.sched.taskset import Task, rm_order
from xtalk.sched.uniproc import EPS

__all__ = [
    "vm_response_time",
    "execution_length",
    "worst_case_demand",
    "alpha",
    "TaskCheck",
    "VmCheck",
    "check_vm",
    "analyse_vms",
    "SynthesisStep",
    "Synthesis",
    "synthesize_highest_priority",
    "synthesize_budget",
]


def vm_response_time(budget: float, higher: list[PeriodicResource], limit: float = math.inf) -> float:
    """Ω_l (seed 001 Eq. 4.1), iterated from t = Θ_l; inf when it passes ``limit``."""
    t = budget
    while True:
        nxt = budget + sum(math.ceil(t / h.period - 1e-12) * h.budget for h in higher)
        if nxt > limit + EPS:
            return math.inf
        if abs(nxt - t) <= EPS:
            return nxt
        t = nxt


def execution_length(vm: PeriodicResource, omega: float) -> float:
    """L_l = Π_l − Θ_l + Ω_l (seed 001 Eq. 4.2)."""
    return vm.period - vm.budget + omega


def worst_case_demand(ordered: list[Task], i: int) -> float:
    """ω_i = e_i + Σ_{j<i} ⌈d_i / p_j⌉ e_j, tasks in priority order (seed 001 Eq. 4.5)."""
    ti = ordered[i]
    return ti.wcet + sum(math.ceil(ti.d / h.period - 1e-12) * h.wcet for h in ordered[:i])


def alpha(budget: float, higher: list[PeriodicResource], t: float) -> float:
    """α_l(t) (seed 001 Eq. 4.8): the largest E ≤ Θ_l with E + Σ_{j<l} ⌈s/Π_j⌉ Θ_j ≤ s for
    some s ≤ t. s − Σ⌈s/Π_j⌉Θ_j peaks at t or at multiples of some Π_j, so only those s
    are tried. For the highest-priority VM α(t) = t (seed 001 §4.4.3)."""
    if t <= 0:
        return 0.0
    points = {t}
    for h in higher:
        m = 1
        while m * h.period <= t + EPS:
            points.add(m * h.period)
            m += 1
    free = max(s - sum(math.ceil(s / h.period - 1e-12) * h.budget for h in higher) for s in points)
    return max(0.0, min(budget, free))


@dataclass(frozen=True)
class TaskCheck:
    """Eq. 4.6 for one task: lhs = k·Θ + min(Θ, α(t − kΠ)) against ω."""

    task: Task
    omega: float
    t: float
    k: int
    lhs: float

    @property
    def ok(self) -> bool:
        """Eq. 4.6 holds (and ω_i ≤ d_i, the assumption under which it is derived)."""
        return self.t >= -EPS and self.lhs + EPS >= self.omega and self.omega <= self.task.d + EPS


def _task_check(vm: PeriodicResource, higher: list[PeriodicResource], ordered: list[Task], i: int) -> TaskCheck:
    omega = worst_case_demand(ordered, i)
    t = ordered[i].d - (vm.period - vm.budget)
    if t < 0:
        return TaskCheck(ordered[i], omega, t, 0, 0.0)
    k = math.floor(t / vm.period + 1e-12)
    lhs = k * vm.budget + min(vm.budget, alpha(vm.budget, higher, t - k * vm.period))
    return TaskCheck(ordered[i], omega, t, k, lhs)


@dataclass
class VmCheck:
    """Analysis of one VM: Ω (4.1), L (4.2), Eq. 4.3/4.4 and Eq. 4.6 per task."""

    name: str
    vm: PeriodicResource
    omega: float
    length: float
    e_min_ok: bool
    necessary_ok: bool
    tasks: list[TaskCheck] = field(default_factory=list)

    @property
    def schedulable(self) -> bool:
        """Eq. 4.4 and Eq. 4.6 for every task. Eq. 4.3 (Θ ≥ e_min) is an assumption of the
        derivation reported in ``e_min_ok``; the seed's own case study (§4.6, Θ = 160 <
        e_1 = 300) does not meet it, so it is not part of the verdict."""
        return self.necessary_ok and all(c.ok for c in self.tasks)


def check_vm(name: str, vm: PeriodicResource, tasks: list[Task], higher: list[PeriodicResource]) -> VmCheck:
    """Seed 001 §4.4 conditions for one VM given the higher-priority VMs."""
    ordered = rm_order(tasks)
    omega = vm_response_time(vm.budget, higher, limit=vm.period)
    d_min = min(t.d for t in ordered)
    e_min = next(t.wcet for t in ordered if t.d == d_min)
    length = execution_length(vm, omega)
    return VmCheck(
        name=name,
        vm=vm,
        omega=omega,
        length=length,
        e_min_ok=e_min <= vm.budget + EPS,  # Eq. 4.3
        necessary_ok=length <= d_min + EPS,  # Eq. 4.4
        tasks=[_task_check(vm, higher, ordered, i) for i in range(len(ordered))],
    )


def analyse_vms(vms: list[tuple[str, PeriodicResource, list[Task]]]) -> list[VmCheck]:
    """All VMs, highest priority first (RM on Π, ties keep order), each against the ones
    before it."""
    ordered = sorted(vms, key=lambda v: v[1].period)
    out = []
    for l, (name, vm, tasks) in enumerate(ordered):
        out.append(check_vm(name, vm, tasks, [v[1] for v in ordered[:l]]))
    return out


@dataclass(frozen=True)
class SynthesisStep:
    """Budget refinement for one task (seed 001 Eq. 4.15–4.17, Example 4.4)."""

    task: str
    omega: float
    root: float  # positive root of (4.15)
    delta: float  # (4.16) at the root
    eta: int  # (4.17) at the root
    refined: float  # root + delta / eta
    budget: float  # smallest budget satisfying (4.6) found for this task


@dataclass
class Synthesis:
    """Result of the budget synthesis for the highest-priority VM."""

    period: float
    budget: float
    steps: list[SynthesisStep]
    check: VmCheck


def _min_budget_for(vm_period: float, higher: list[PeriodicResource], ordered: list[Task], i: int, tol: float) -> float | None:
    # Eq. 4.6 is non-decreasing in Θ (t_i and α grow with Θ), so bisection finds its minimum
    if not _task_check(PeriodicResource(vm_period, vm_period), higher, ordered, i).ok:
        return None
    lo, hi = 0.0, vm_period
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if _task_check(PeriodicResource(vm_period, mid), higher, ordered, i).ok:
            hi = mid
        else:
            lo = mid
    return hi


def synthesize_highest_priority(tasks: list[Task], tol: float = 1e-9) -> Synthesis:
    """Π and Θ of the highest-priority VM (seed 001 §4.4.3, Example 4.4).

    Π = d_min (4.12); start from Θ = e_min (4.3); for every other task solve (4.15), refine
    with (4.16)–(4.17) and keep the refined value when it satisfies (4.6), else the
    smallest Θ that satisfies (4.6) (found by bisection). Θ is the largest over tasks."""
    ordered = rm_order(tasks)
    d_min = min(t.d for t in ordered)
    e_min = next(t.wcet for t in ordered if t.d == d_min)
    period = d_min
    budget = e_min
    steps: list[SynthesisStep] = []
    for i, task in enumerate(ordered):
        if task.d == d_min and task.wcet == e_min and i == 0:
            continue
        omega = worst_case_demand(ordered, i)
        b = task.d - period
        root = (-b + math.sqrt(b * b + 4 * omega * period)) / 2  # Eq. 4.15
        t = task.d - (period - root)
        k = math.floor(t / period + 1e-12)
        rest = min(root, t - k * period)
        delta = omega - k * root - rest  # Eq. 4.16
        eta = k + math.ceil(rest / root - 1e-12) if root > 0 else k  # Eq. 4.17
        refined = root + delta / eta if eta > 0 else root
        need = refined
        if not (0 < refined <= period and _task_check(PeriodicResource(period, refined), [], ordered, i).ok):
            found = _min_budget_for(period, [], ordered, i, tol)
            need = found if found is not None else math.inf
        steps.append(SynthesisStep(task.name, omega, root, delta, eta, refined, need))
        budget = max(budget, need)
    if math.isinf(budget) or budget > period + EPS:
        budget = math.inf
        check = VmCheck("V1", PeriodicResource(period, period), math.inf, math.inf, False, False)
    else:
        check = check_vm("V1", PeriodicResource(period, budget), tasks, [])
    return Synthesis(period=period, budget=budget, steps=steps, check=check)


def synthesize_budget(
    tasks: list[Task],
    period: float,
    higher: list[PeriodicResource] = (),
    tol: float = 1e-6,
    require_e_min: bool = True,
) -> float | None:
    """Smallest Θ ≤ Π for a VM of period Π below ``higher`` VMs such that Eq. 4.4 and 4.6
    hold for every task (and Eq. 4.3 unless ``require_e_min`` is False, as in the seed's
    §4.6 case study); None when no budget works (seed 001 §4.4.3, last paragraph: "the
    same principle" for lower-priority VMs)."""
    ordered = rm_order(tasks)
    higher = list(higher)
    need = 0.0
    if require_e_min:
        need = max(t.wcet for t in ordered if t.d == min(x.d for x in ordered))  # Eq. 4.3
    for i in range(len(ordered)):
        b = _min_budget_for(period, higher, ordered, i, tol)
        if b is None:
            return None
        need = max(need, b)
    if need > period + EPS:
        return None
    check = check_vm("V", PeriodicResource(period, need), tasks, higher)
    return need if check.schedulable else None
