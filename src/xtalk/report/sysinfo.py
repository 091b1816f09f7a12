"""`xtalk sysinfo`: what this target offers for measurement and isolation, in one table."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import safepath


def _yes(v) -> str:
    return "yes" if v else "no"


def rows(env: dict) -> list[tuple[str, str]]:
    """(item, value) pairs, from the agent's environment document."""
    k, cpu, cap = env["kernel"], env["cpu"], env.get("capabilities", {})
    pmu = cap.get("pmu", {})
    caches = ", ".join(f"L{c['level']} {c['type'].lower()} {c['size_bytes'] >> 10} KiB" for c in cpu["caches"] if c.get("size_bytes"))
    hw = pmu.get("core_pmu")
    cg = cap.get("cgroups", {})
    v1 = sorted({c for m in cg.get("v1", []) for c in m["controllers"]})
    v2 = sorted({c for m in cg.get("v2", []) for c in m["controllers"]})
    virt = env["virtualization"]
    origin = env.get("fixture")
    numa = cpu.get("numa") or []
    return ([("machine fixture", f"hand-made from {origin.get('source')}" if origin.get("hand_made")
              else f"recorded {origin.get('recorded')} with {origin.get('source')}")] if origin else []) + [
        ("kernel", f"{k['release']} ({'PREEMPT_RT' if k['preempt_rt'] else 'stock'}, HZ={k.get('hz') or '?'})"),
        ("cpu", f"{cpu['model']} × {cpu['count']} (online {cpu['online']})"),
        ("caches", caches),
        *([("NUMA nodes", ", ".join(f"{n['node']}: CPUs {n['cpus']}" for n in numa))] if len(numa) > 1 else []),
        ("isolated CPUs / nohz_full", f"{cpu.get('isolated') or '-'} / {k.get('nohz_full') or '-'}"),
        ("clocksource", env["clocksource"]["current"] or "?"),
        ("virtualization", (f"hypervisor {virt['vendor']}" if virt["hypervisor"] else "none") + (", container" if virt["container"] else "")
         + (f", emulated: {virt['emulated']}" if virt.get("emulated") else "")),
        ("time-sync services", ", ".join(env["time_sync_services"]) or "none running"),
        ("hardware PMU", f"{hw} ({len(pmu.get('sysfs_events') or [])} sysfs events, rdpmc={pmu.get('rdpmc')})" if hw
         else "not available: hardware counters cannot be read; software events only"),
        ("countable events", ", ".join(pmu.get("countable", [])) or "none"),
        ("perf_event_paranoid", str(pmu.get("perf_event_paranoid"))),
        ("tracefs", cap.get("tracefs", {}).get("mount") or "not mounted (mount -t tracefs nodev /sys/kernel/tracing)"),
        ("cgroup v1 controllers", ", ".join(v1) or "none"),
        ("cgroup v2 controllers", ", ".join(v2) or "none"),
        ("RT group scheduling", _yes(cg.get("rt_group_scheduling") or k.get("rt_group_sched"))),
        ("RT throttling", f"{k.get('sched_rt_runtime_us')} / {k.get('sched_rt_period_us')} us"),
        ("SCHED_DEADLINE", _yes(cap.get("sched_deadline"))),
        ("resctrl (cache/memory partitioning)", ("mounted at " + cap["resctrl"]["mount"]) if cap.get("resctrl", {}).get("mount")
         else ("supported, not mounted" if cap.get("resctrl", {}).get("supported") else "not supported")),
    ]


def show(env: dict, console: Console) -> None:
    t = Table(title="this target", show_header=False)
    t.add_column("item", style="bold")
    t.add_column("value")
    for item, value in rows(env):
        t.add_row(item, value)
    console.print(t)


#: Kernel parameters a fixture keeps from the boot line: those that change scheduling or timing.
TIMING_PARAMETERS = {"isolcpus", "nohz_full", "nohz", "rcu_nocbs", "rcu_nocb_poll", "irqaffinity", "nosmt", "mitigations",
                     "threadirqs", "preempt", "idle", "processor.max_cstate", "intel_idle.max_cstate", "intel_pstate",
                     "skew_tick", "tsc", "clocksource", "transparent_hugepage", "hugepages", "default_hugepagesz",
                     "sched_rt_runtime_us", "psi", "nosoftlockup", "nowatchdog", "audit", "cpuidle_haltpoll.force",
                     "haltpoll.guest_halt_poll_ns"}


def record(path: Path) -> Path:
    """Write this machine's facts (the agent's sysinfo document, with `fixture` saying when and
    how it was recorded) as a machine fixture; return the path."""
    from ..version import __version__
    from ..errors import UsageError
    from ..targets.agent import MACHINE_ENV, local_facts, machine_fixture

    if machine_fixture() is not None:
        raise UsageError(f"--record: records this machine; unset {MACHINE_ENV} (and --machine) first")
    env = dict(local_facts().environment)
    # The boot line also names the machine's own set-up (root device, consoles, init
    # arguments); a fixture keeps the parameters that change timing only.
    kernel = dict(env["kernel"])
    kernel["cmdline"] = " ".join(w for w in kernel.get("cmdline", "").split()
                                 if w.split("=", 1)[0] in TIMING_PARAMETERS)
    env["kernel"] = kernel
    origin = {"hand_made": False, "source": f"xtalk sysinfo --record (xtalk {__version__})",
              "recorded": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        safepath.write_text(path, json.dumps({"fixture": origin, **env}, indent=2) + "\n")
    except OSError as e:
        raise UsageError(f"--record: cannot write {path}: {e.strerror}") from None
    return path
