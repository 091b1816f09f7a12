"""Which CPU runs which server or task: the one placement that analysis and simulation share.

Servers (``[[partition]]``) reserve Θ/Π of one CPU. A partition with ``cpu = k`` goes to CPU
k; the others go, in file order, to the first CPU whose reserved bandwidth stays ≤ 1 (first
fit). That is how seed 001 §4.6 ran Table 4.3: two (160 ms, 200 ms) reservations need 1.6
CPUs, so under SCHED_DEADLINE on its multicore host each VM had a CPU of its own. A CPU
whose servers reserve more than its whole bandwidth cannot give every server its budget, so
such a placement is refused (it is never silently analysed or simulated).

Tasks without partitions run on one CPU unless ``[system] cpus = m``: then they are
partitioned (no migration) by first-fit decreasing utilisation, a task going to the first CPU
on which the exact test still passes (response-time analysis for fixed priorities, processor
demand for EDF); a task that fits nowhere goes to the least-loaded CPU, where the analysis
then reports the miss.
"""

from __future__ import annotations

from xtalk.sched.inputs import InputError
from xtalk.sched.taskset import Partition, Task, TaskSystem
from xtalk.sched.uniproc import EPS, edf_demand_test, response_time_analysis, utilization

__all__ = ["place_partitions", "place_tasks", "cpu_bandwidth"]


def cpu_bandwidth(parts: list[Partition]) -> float:
    """Σ Θ/Π of the servers on one CPU."""
    return sum(p.bandwidth for p in parts)


def place_partitions(system: TaskSystem) -> dict[int, list[Partition]]:
    """CPU index → the partitions it serves (see the module doc). Raises :class:`InputError`
    when a CPU would carry more than bandwidth 1 or more CPUs are needed than
    ``[system] cpus`` allows."""
    limit = system.cpus
    cpus: dict[int, list[Partition]] = {}
    for i, p in enumerate(system.partitions):
        if p.cpu is not None:
            if limit is not None and p.cpu >= limit:
                raise InputError(f"partition[{i}].cpu", f"CPU {p.cpu} but [system] cpus = {limit}", f"use a cpu below {limit}")
            cpus.setdefault(p.cpu, []).append(p)
    for i, p in enumerate(system.partitions):
        if p.cpu is not None:
            continue
        k = 0
        while cpu_bandwidth(cpus.get(k, [])) + p.bandwidth > 1 + EPS:
            k += 1
        if limit is not None and k >= limit:
            raise InputError(
                "system.cpus",
                f"partition {p.name!r} (bandwidth {p.bandwidth:.3f}) fits on none of the {limit} CPUs",
                "raise [system] cpus or lower the budgets",
            )
        cpus.setdefault(k, []).append(p)
    for k, parts in cpus.items():
        bw = cpu_bandwidth(parts)
        if bw > 1 + EPS:
            names = " + ".join(f"{p.name} {p.bandwidth:.3f}" for p in parts)
            raise InputError(
                "partition.cpu",
                f"CPU {k} would reserve bandwidth {bw:.3f} > 1 ({names})",
                "give these partitions different cpu values (or none: first fit), or lower their budgets",
            )
    return dict(sorted(cpus.items()))


def _fits(tasks: list[Task], scheduler: str) -> bool:
    if utilization(tasks) > 1 + EPS:
        return False
    if scheduler == "edf":
        return edf_demand_test(tasks)[0]
    return all(r.schedulable for r in response_time_analysis(tasks, order="dm" if scheduler == "dm" else "rm"))


def place_tasks(tasks: list[Task], cpus: int, scheduler: str = "rm") -> dict[int, list[Task]]:
    """Partitioned scheduling on ``cpus`` CPUs: first-fit decreasing utilisation with the
    exact uniprocessor test as admission; each CPU's list keeps the file order."""
    if cpus <= 1:
        return {0: list(tasks)}
    order = {t.name: i for i, t in enumerate(tasks)}
    bins: list[list[Task]] = [[] for _ in range(cpus)]
    for t in sorted(tasks, key=lambda t: -t.utilization):
        k = next((k for k in range(cpus) if _fits(bins[k] + [t], scheduler)), None)
        if k is None:  # fits nowhere: the analysis of that CPU will show the miss
            k = min(range(cpus), key=lambda k: utilization(bins[k]))
        bins[k].append(t)
    return {k: sorted(b, key=lambda t: order[t.name]) for k, b in enumerate(bins) if b}
