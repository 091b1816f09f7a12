"""Configurations: the scheduling and isolation settings a scenario runs under, declared per
application (victim, enemies) in `[[configuration]]` tables, optionally from a named preset.

Presets are the four configurations seed 000 §6.6 compares:
- `deadline`: every process SCHED_DEADLINE (unpinned: the kernel refuses pinned reservations
  outside exclusive cpusets). Victim runtime = its `reservation.runtime`, else half its
  period; enemies share what is left of the admission limit, 85 % of a period at most each.
- `rr`: every process SCHED_RR; the victim at its `priority` (90 by default), enemies at 50.
- `rr+cgroups`: `rr` plus one group for the victim (RT bandwidth 1 ms per 10 ms per CPU, or
  its `reservation.runtime`) and one for all enemies (what is left of 95 %: 8.5 ms per 10 ms
  beside the seed's 1 ms), 5 % left to the system (cgroup v1 RT group scheduling). Where it
  is missing (cgroup v2 has no per-group RT bandwidth) it is unavailable, and the reason
  spells out the nearest equivalent: per-task SCHED_DEADLINE with the same bandwidth.
- `deadline+cgroups`: SCHED_DEADLINE servers for the groups with SCHED_RR inside: needs the
  hierarchical CBS patch (Abeni et al. 2019); reported unavailable where the kernel lacks it.

And one for fault containment (examples/failure_propagation.toml):
- `partitioned`: every enemy in one group `faults`: the CPUs other than the victim's
  (cpuset), 16 processes, 192 MiB, reads and writes at 16 MiB/s on the disks holding the
  enemies' files (io.max on v2, blkio on v1), and where the v1 cpu controller is there a
  CFS quota of 5 ms per 10 ms and (RT group scheduling) 100 ms of RT runtime per second. On
  v2 the CPU bound is the cpuset alone: a kernel with RT group scheduling refuses real-time
  tasks below a v2 group with the cpu controller enabled, and the victim is one.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from ..plan import DeadlineSched, FifoSched, Group, IoMax, OtherSched, Plan, Regulator, RrSched
from .. import catalog, units

PRESETS = ("default", "deadline", "rr", "rr+cgroups", "deadline+cgroups", "partitioned")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ProcessSettings(_Strict):
    """What a configuration sets for the victim, or for every enemy."""

    cpus: Optional[Union[int, str, list[int]]] = None
    unpinned: bool = False
    policy: Optional[Literal["other", "fifo", "rr", "deadline"]] = None
    priority: Optional[int] = Field(default=None, ge=1, le=99)
    nice: Optional[int] = Field(default=None, ge=-20, le=19)
    runtime: Optional[Union[int, float, str]] = Field(default=None, description="SCHED_DEADLINE runtime")
    group: Optional[str] = None


class IoMaxSpec(_Strict):
    """I/O limits on the disks holding `paths` (found on the target) and on `devices`."""

    paths: list[str] = Field(default=[], description="directories whose disks are limited, e.g. the enemies' `dir`")
    devices: list[str] = Field(default=[], description='"MAJ:MIN" of whole disks (lsblk)')
    rbps: Optional[Union[int, str]] = Field(default=None, description='read rate, e.g. "16MiB/s" (an integer: bytes per second)')
    wbps: Optional[Union[int, str]] = Field(default=None, description='write rate, e.g. "16MiB/s"')
    riops: Optional[int] = Field(default=None, ge=1)
    wiops: Optional[int] = Field(default=None, ge=1)


class GroupSpec(_Strict):
    name: str = Field(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    cpus: Optional[Union[int, str, list[int]]] = None
    mems: Optional[str] = None
    exclusive: bool = False
    isolated: bool = Field(default=False, description="an isolated partition (v2 cpuset.cpus.partition = isolated); implies exclusive")
    cpu_max: Optional[str] = Field(default=None, description='"QUOTA PERIOD", e.g. "20ms 100ms"')
    cpu_weight: Optional[int] = Field(default=None, ge=1, le=10000)
    rt_runtime: Optional[Union[int, float, str]] = None
    rt_period: Optional[Union[int, float, str]] = None
    memory_max: Optional[Union[int, str]] = None
    memory_high: Optional[Union[int, str]] = None
    pids_max: Optional[int] = Field(default=None, ge=1, le=4_194_304, description="at most the kernel's PID limit")
    freezable: bool = False
    io_max: Optional[IoMaxSpec] = None
    cache_ways: Optional[Union[int, str, list[int]]] = Field(default=None, description='resctrl: the L3 ways it may fill, contiguous: "0-3"')
    memory_bandwidth: Optional[Union[int, str]] = Field(default=None, description='resctrl: its memory-bandwidth share, e.g. "30%"')


class RegulatorSpec(_Strict):
    period: Union[int, float, str] = "10ms"
    budget: Optional[Union[int, str]] = Field(default=None, description="bytes per period per enemy, e.g. \"10MB\"")
    bandwidth: Optional[str] = Field(default=None, description="or a rate, e.g. \"1GB/s\" (budget = rate × period)")
    target: Optional[Union[int, float, str]] = Field(default=None, description="feedback mode: victim job-time target")
    enemies: list[str] = []
    throttle: Literal["signal", "freeze"] = "signal"
    priority: int = Field(default=95, ge=1, le=99)
    source: Literal["cooperative", "hardware"] = "cooperative"
    event: str = "LLC-load-misses"
    bytes_per_event: int = Field(default=64, ge=1)


class ConfigurationSpec(_Strict):
    name: str = Field(max_length=64, pattern=r"^[A-Za-z0-9_.+-]+$")
    preset: Optional[Literal["default", "deadline", "rr", "rr+cgroups", "deadline+cgroups", "partitioned"]] = None
    victim: ProcessSettings = ProcessSettings()
    enemies: ProcessSettings = ProcessSettings()
    #: Experiments of [[application]]s: `victim` applies to every application, these to one each.
    applications: dict[str, ProcessSettings] = Field(default={}, description="per application (by name): its settings "
                                                     "over those of `victim`, which apply to every application")
    files: Optional[Literal["shared", "duplicated"]] = Field(
        default=None, description="applications of body aocs: every one on the same data files, or each on its own copy "
                                  "(default: each application's `files`)")
    groups: list[GroupSpec] = []
    housekeeping_cpus: Optional[Union[int, str, list[int]]] = None
    steer_irqs: bool = False
    regulator: Optional[RegulatorSpec] = None


class Unavailable(Exception):
    """This kernel cannot provide a configuration; the message names what is missing."""


def _sched(s: ProcessSettings, current, period_ns: int, field: str):
    policy = s.policy or current.policy
    if policy == "other":
        return OtherSched(nice=s.nice if s.nice is not None else getattr(current, "nice", 0))
    if policy in ("fifo", "rr"):
        prio = s.priority or getattr(current, "priority", None)
        if prio is None:
            raise ValueError(f"{field}.priority: policy '{policy}' needs a priority (1..99)")
        return RrSched(priority=prio) if policy == "rr" else FifoSched(priority=prio)
    runtime = units.duration_ns(s.runtime, f"{field}.runtime") if s.runtime is not None else getattr(current, "runtime_ns", period_ns // 2)
    return DeadlineSched(runtime_ns=runtime, deadline_ns=period_ns, period_ns=period_ns)


def _preset(name: str, plan: Plan, facts, capabilities: dict, victim_runtime_ns: int | None) -> ConfigurationSpec:
    n_enemies, period_ns, cpus = len(plan.enemies), plan.victim.period_ns, len(facts.online_cpus)
    if name == "default":
        return ConfigurationSpec(name=name)
    if name == "rr":
        return ConfigurationSpec(name=name, victim=ProcessSettings(policy="rr"), enemies=ProcessSettings(policy="rr", priority=50))
    if name == "deadline":
        v_rt = victim_runtime_ns or period_ns // 2
        left = max(0.0, cpus * 0.9 - v_rt / period_ns)
        e_rt = int(min(0.85, left / max(1, n_enemies)) * period_ns)
        return ConfigurationSpec(name=name, victim=ProcessSettings(policy="deadline", runtime=f"{v_rt}ns", unpinned=True),
                                 enemies=ProcessSettings(policy="deadline", runtime=f"{max(e_rt, 100_000)}ns", unpinned=True))
    if name == "partitioned":
        return _partitioned(plan, facts, capabilities)
    if name == "rr+cgroups":
        period = 10_000_000
        v_rt = min(victim_runtime_ns or 1_000_000, 9_000_000)
        e_rt = 9_500_000 - v_rt  # 5 % of every CPU stays with the system
        if not capabilities.get("cgroups", {}).get("rt_group_scheduling"):
            raise Unavailable(_rt_alternative(v_rt, e_rt, period, period_ns))
        return ConfigurationSpec(
            name=name, victim=ProcessSettings(policy="rr", group="victim"), enemies=ProcessSettings(policy="rr", priority=50, group="enemies"),
            groups=[GroupSpec(name="victim", rt_runtime=f"{v_rt}ns", rt_period=f"{period}ns"),
                    GroupSpec(name="enemies", rt_runtime=f"{e_rt}ns", rt_period=f"{period}ns")])
    dl = capabilities.get("deadline_group_servers", {})
    if not dl.get("available"):
        raise Unavailable(dl.get("reason", "no SCHED_DEADLINE group servers on this kernel"))
    raise Unavailable("the kernel offers SCHED_DEADLINE group servers, but xtalk does not drive them yet")


def _rt_alternative(v_rt: int, e_rt: int, group_period: int, period_ns: int) -> str:
    """Why `rr+cgroups` cannot run, and the nearest equivalent spelt out as a configuration:
    each task's SCHED_DEADLINE runtime is its group's RT share of the victim's period."""
    v = round(v_rt / group_period * period_ns / 1000)
    e = round(min(e_rt / group_period, 0.85) * period_ns / 1000)
    return ("RT group scheduling is missing: it needs the cgroup v1 cpu controller and CONFIG_RT_GROUP_SCHED (cgroup v2 has "
            f"no per-group RT bandwidth); nearest equivalent, per-task SCHED_DEADLINE with the same bandwidth ({v_rt / 1e6:g} ms and "
            f"{e_rt / 1e6:g} ms per {group_period / 1e6:g} ms): victim = {{ policy = \"deadline\", runtime = \"{v}us\", unpinned = true }}, "
            f"enemies = {{ policy = \"deadline\", runtime = \"{e}us\", unpinned = true }}")


def _controllers(capabilities: dict, version: str) -> set[str]:
    return {c for m in capabilities.get("cgroups", {}).get(version, []) for c in m.get("controllers", [])}


def _partitioned(plan: Plan, facts, capabilities: dict) -> ConfigurationSpec:
    """The `partitioned` preset: every enemy in one group bounded in CPUs, processes,
    memory and I/O, with what this machine's hierarchies offer (see the module's text)."""
    v1, v2 = _controllers(capabilities, "v1"), _controllers(capabilities, "v2")
    group: dict = {"name": "faults", "pids_max": 16, "memory_max": "192MiB"}
    victim = plan.victim.placement.cpus
    others = [c for c in facts.online_cpus if c not in victim] if victim else []
    if others and "cpuset" in v1 | v2:
        group["cpus"] = others
    if "blkio" in v1 or "io" in v2:
        # Enemies that write files (a `dir` parameter in their catalog entry) are the ones to throttle.
        dirs = [getattr(en.load, "dir", None) or "/tmp" for en in plan.enemies if catalog.kind(en.load.kind).param("dir")]
        group["io_max"] = IoMaxSpec(paths=list(dict.fromkeys(dirs)) or ["/tmp"], rbps="16MiB/s", wbps="16MiB/s")
    if "cpu" in v1:
        group["cpu_max"] = "5ms 10ms"
        if capabilities.get("cgroups", {}).get("rt_group_scheduling"):
            group.update(rt_runtime="100ms", rt_period="1s")
    return ConfigurationSpec(name="partitioned", enemies=ProcessSettings(group="faults"), groups=[GroupSpec(**group)])


def resolve(spec: ConfigurationSpec, plan: Plan, facts, victim_reservation_ns: int | None, field: str,
            faults: dict[str, tuple[str, bool]] | None = None) -> Plan:
    """The plan of a run under this configuration (the preset first, then the table's own
    settings). Raises Unavailable or ValueError (with the field). With applications, `victim`
    settings apply to every measured process and `applications.<name>` to one; `faults`
    (enemy name -> (application name, sets its own policy)) are the enemies that run inside
    an application: they take its CPUs, group and (unless they set their own) policy, after
    it is resolved."""
    caps = facts.environment.get("capabilities", {})
    base = _preset(spec.preset, plan, facts, caps, victim_reservation_ns) if spec.preset else ConfigurationSpec(name=spec.name)
    merged = ConfigurationSpec(
        name=spec.name,
        victim=ProcessSettings(**{**base.victim.model_dump(exclude_none=True), **spec.victim.model_dump(exclude_unset=True)}),
        enemies=ProcessSettings(**{**base.enemies.model_dump(exclude_none=True), **spec.enemies.model_dump(exclude_unset=True)}),
        groups=spec.groups or base.groups, housekeeping_cpus=spec.housekeeping_cpus, steer_irqs=spec.steer_irqs,
        regulator=spec.regulator)
    p = plan.model_copy(deep=True)
    faults = faults or {}
    period = p.victim.period_ns
    measured = [p.victim] + list(getattr(p, "applications", None) or [])
    for proc in measured:
        name = getattr(proc, "name", None)
        own = spec.applications.get(name) if name else None
        v = merged.victim if own is None else ProcessSettings(**{**merged.victim.model_dump(exclude_unset=True),
                                                                  **own.model_dump(exclude_unset=True)})
        at = f"{field}.applications.{name}" if own is not None else f"{field}.victim"
        _settle(proc, v, facts, proc.period_ns, at)
    by_name = {getattr(m, "name", None): m for m in measured}
    e = merged.enemies
    for en in p.enemies:
        app, own_policy = faults.get(en.name, (None, False))
        owner = by_name.get(app) if app is not None else None
        if owner is not None:
            # Inside its application: the application's CPUs and group, and its policy unless
            # the fault sets its own (an RT hog).
            en.placement.cpus = list(owner.placement.cpus) if owner.placement.cpus is not None else None
            en.group = owner.group
            if not own_policy:
                en.sched = owner.sched.model_copy()
            continue
        if e.policy or e.priority or e.nice is not None or e.runtime is not None:
            en.sched = _sched(e, en.sched, period, f"{field}.enemies")
        if e.unpinned:
            en.placement.cpus = None
        elif e.cpus is not None:
            en.placement.cpus = units.cpu_set(e.cpus, f"{field}.enemies.cpus", facts.online_cpus, p.victim.placement.cpus)
        en.group = e.group
    p.groups = [_group(g, facts, f"{field}.groups[{i}]") for i, g in enumerate(merged.groups)]
    if merged.housekeeping_cpus is not None:
        p.housekeeping_cpus = units.cpu_set(merged.housekeeping_cpus, f"{field}.housekeeping_cpus", facts.online_cpus)
    p.steer_irqs = merged.steer_irqs
    if merged.regulator is not None:
        regulator = _regulator(merged.regulator, f"{field}.regulator")
        if p.enemies:  # a scenario without enemies (solo) has nothing to regulate
            p.regulator = regulator
    return p


def _settle(proc, v: ProcessSettings, facts, period_ns: int, field: str) -> None:
    """Apply a configuration's settings `v` to one measured process (the victim or an
    application) of the plan, in place."""
    if v.policy or v.priority or v.nice is not None or v.runtime is not None:
        proc.sched = _sched(v, proc.sched, period_ns, field)
    if v.unpinned:
        proc.placement.cpus = None
    elif v.cpus is not None:
        proc.placement.cpus = units.cpu_set(v.cpus, f"{field}.cpus", facts.online_cpus)
    proc.group = v.group


def _group(g: GroupSpec, facts, field: str) -> Group:
    quota = period = None
    if g.cpu_max:
        parts = g.cpu_max.split()
        if len(parts) != 2:
            raise ValueError(f'{field}.cpu_max: write "QUOTA PERIOD", e.g. "20ms 100ms"')
        quota, period = (units.duration_ns(x, f"{field}.cpu_max") // 1000 for x in parts)
    size = lambda v, k: units.size_bytes(v, f"{field}.{k}", {}) if v is not None else None  # noqa: E731
    us = lambda v, k: units.duration_ns(v, f"{field}.{k}") // 1000 if v is not None else None  # noqa: E731
    io = None
    if g.io_max is not None:
        io = IoMax(paths=g.io_max.paths, devices=g.io_max.devices, rbps=_rate(g.io_max.rbps, f"{field}.io_max.rbps"),
                   wbps=_rate(g.io_max.wbps, f"{field}.io_max.wbps"), riops=g.io_max.riops, wiops=g.io_max.wiops)
        if not (io.paths or io.devices):
            raise ValueError(f'{field}.io_max: name the disks: paths = ["/dir"] (the disks holding them) or devices = ["MAJ:MIN"]')
        if all(x is None for x in (io.rbps, io.wbps, io.riops, io.wiops)):
            raise ValueError(f'{field}.io_max: give a limit: rbps, wbps (e.g. "16MiB/s"), riops or wiops')
    ways, mb = _resctrl(g, facts, field)
    return Group(name=g.name, cpus=units.cpu_set(g.cpus, f"{field}.cpus", facts.online_cpus), mems=g.mems, cache_ways=ways, mb_percent=mb,
                 exclusive=g.exclusive or g.isolated, isolated=g.isolated,
                 cpu_quota_us=quota, cpu_period_us=period, cpu_weight=g.cpu_weight, rt_runtime_us=us(g.rt_runtime, "rt_runtime"),
                 rt_period_us=us(g.rt_period, "rt_period"), memory_max=size(g.memory_max, "memory_max"),
                 memory_high=size(g.memory_high, "memory_high"), pids_max=g.pids_max, freezable=g.freezable, io_max=io)


def _resctrl(g: GroupSpec, facts, field: str) -> tuple[list[int] | None, int | None]:
    """The group's L3 ways and memory-bandwidth percentage (resctrl); Unavailable where the
    target has no resctrl mounted."""
    if g.cache_ways is None and g.memory_bandwidth is None:
        return None, None
    rc = facts.environment.get("capabilities", {}).get("resctrl", {})
    if not rc.get("mount"):
        raise Unavailable("cache_ways and memory_bandwidth need resctrl (Intel RDT, AMD PQoS, Arm MPAM): "
                          + ("not mounted (mount -t resctrl resctrl /sys/fs/resctrl)" if rc.get("supported") else "this kernel or CPU offers none"))
    ways = None
    if g.cache_ways is not None:
        w = g.cache_ways
        if isinstance(w, int):
            ways = list(range(w))  # the first N ways
        elif isinstance(w, list):
            ways = w
        else:
            a, _, b = w.strip().partition("-")
            if not (a.isdigit() and (not b or b.isdigit())):
                raise ValueError(f'{field}.cache_ways: write a way range such as "0-3", a list, or a count')
            ways = list(range(int(a), int(b or a) + 1))
    mb = None
    if g.memory_bandwidth is not None:
        mb = g.memory_bandwidth if isinstance(g.memory_bandwidth, int) else round(units.fraction(g.memory_bandwidth, f"{field}.memory_bandwidth") * 100)
    return ways, mb


def _rate(value: Union[int, str, None], field: str) -> int | None:
    """Bytes per second from an integer or a rate such as "16MiB/s"."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("/s"):
        raise ValueError(f'{field}: write a rate such as "16MiB/s"')
    return units.size_bytes(text[:-2], field, {})


def _regulator(r: RegulatorSpec, field: str) -> Regulator:
    period_ns = units.duration_ns(r.period, f"{field}.period")
    budget = None
    if r.bandwidth is not None:
        rate = r.bandwidth.strip()
        if not rate.endswith("/s"):
            raise ValueError(f'{field}.bandwidth: write a rate such as "1GB/s"')
        budget = int(units.size_bytes(rate[:-2], f"{field}.bandwidth", {}) * period_ns / 1e9)
    elif r.budget is not None:
        budget = units.size_bytes(r.budget, f"{field}.budget", {})
    target = units.duration_ns(r.target, f"{field}.target") if r.target is not None else None
    if budget is None and target is None:
        raise ValueError(f"{field}: give budget (or bandwidth) for budget mode, or target for feedback mode")
    return Regulator(period_us=period_ns // 1000, budget_bytes=budget, target_exec_ns=target, enemies=r.enemies,
                     throttle=r.throttle, priority=r.priority, source=r.source, event=r.event, bytes_per_event=r.bytes_per_event)
