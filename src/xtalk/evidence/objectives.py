"""The objectives an applicant answers, and what of the inputs answers each one.

Each objective is a function of the loaded inputs that fills its `Finding`: its tables (written
as CSV and shown), the run ids each comes from, or "not covered" with the reason. The reasons say
what input or what xtalk feature would cover it, so a gap is a task, not a mystery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from .. import catalog
from ..report import containment
from ..results import tables as tb
from ..report.build import slowdown_display
from ..store import open as open_results
from ..version import __version__
from .inputs import Input


@dataclass
class Finding:
    """What the inputs show for one objective."""

    id: str
    title: str
    asks: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  #: artifact name -> table
    sources: dict[str, list[str]] = field(default_factory=dict)  #: artifact name -> run ids (input/run)
    notes: list[str] = field(default_factory=list)
    not_covered: str | None = None  #: why the inputs do not cover it (None: covered)

    def add(self, name: str, table: pd.DataFrame, runs: list[str]) -> None:
        if "input" in table.columns:  # every table reads from its input on
            table = table[["input", *[c for c in table.columns if c != "input"]]]
        self.tables[name] = table
        self.sources[name] = list(dict.fromkeys(runs))  # each run once, in the order met


#: Fault enemies (the catalog's class `fault`, docs/enemies.md): a run with one of these
#: injects a failure effect.
FAULT_KINDS = catalog.fault_kinds()


def _ids(inp: Input, runs: list[str]) -> list[str]:
    return [f"{inp.name}/{r}" for r in runs]


def planning_1(inputs: list[Input], f: Finding) -> None:
    """Platform identity and tools, from the environment each run.json records."""
    rows, runs = [], []
    for inp in inputs:
        metas = [m for m in inp.metas() if m.environment is not None]
        if not metas:
            continue
        env = metas[0].environment
        k, cpu = env.kernel, env.cpu
        governors = sorted({t.governor for t in cpu.topology if t.governor})
        smt = any(t.siblings and ("," in t.siblings or "-" in t.siblings) for t in cpu.topology)
        kinds = {m.environment.kernel.release for m in metas} | {m.environment.cpu.model for m in metas}
        for item, value in [
            ("CPU model", f"{cpu.model or '?'} ({cpu.vendor or '?'})"), ("CPUs (online)", f"{cpu.count} ({cpu.online})"),
            ("isolated CPUs", cpu.isolated or "none"), ("kernel", f"{k.release} {k.version}"), ("architecture", k.machine),
            ("PREEMPT_RT", "yes" if k.preempt_rt else "no"), ("kernel command line", k.cmdline),
            ("tick (HZ)", str(k.hz or "?")), ("nohz_full", k.nohz_full or "none"),
            ("RT throttling", f"{k.sched_rt_runtime_us} / {k.sched_rt_period_us} µs"),
            ("CPU frequency governor", ", ".join(governors) or "not visible"),
            ("SMT siblings", "yes" if smt else "none seen" if cpu.topology else "not visible"),
            ("clocksource", env.clocksource.current or "?"),
            ("hypervisor", (env.virtualization.vendor or "yes") if env.virtualization.hypervisor else "none detected"),
            ("container", "yes" if env.virtualization.container else "no"),
            ("xtalk-agent version", env.agent_version), ("xtalk version (bundle)", __version__),
            ("xtalk version (runs)", str(inp.experiment.get("xtalk_version") or "not recorded")),
        ]:
            rows.append((item, inp.name, value))
        if len(kinds) > 2:
            f.notes.append(f"{inp.name}: the runs do not share one kernel and CPU ({', '.join(sorted(map(str, kinds)))}).")
        runs += _ids(inp, [m.run_id or "" for m in metas])
    if not rows:
        f.not_covered = "no run.json of the inputs records its environment (runs written without the agent's machine facts)"
        return
    # One column per input: the platforms side by side, item by item.
    table = pd.DataFrame(rows, columns=["item", "input", "value"]).pivot(index="item", columns="input", values="value")
    order = list(dict.fromkeys(r[0] for r in rows))
    f.add("platform", table.reindex(order).reset_index().rename_axis(columns=None), runs)
    f.notes.append("C-states, turbo/boost and firmware versions are not read by the agent yet; they are not shown.")


def planning_2(inputs: list[Input], f: Finding) -> None:
    """Shared resources (caches, memory, NUMA, partitioning support) and their allocation per
    configuration (what each run's plan and configuration report say)."""
    caches, alloc, runs = [], [], []
    for inp in inputs:
        metas = [m for m in inp.metas() if m.environment is not None]
        if metas:
            env = metas[0].environment
            for c in env.cpu.caches:
                caches.append({"input": inp.name, "level": c.level, "type": c.type, "size_bytes": c.size_bytes,
                               "ways": c.ways, "line_bytes": c.line_bytes, "shared_cpus": c.shared_cpus})
            caches.append({"input": inp.name, "level": None, "type": "memory", "size_bytes": env.memory_bytes,
                           "ways": None, "line_bytes": None,
                           "shared_cpus": "; ".join(f"node {n.node}: {n.cpus}" for n in env.cpu.numa) or "all"})
            runs += _ids(inp, [m.run_id or "" for m in metas])
        seen = set()
        for m in inp.metas():
            conf = m.labels().get("configuration", "default")
            if conf in seen or m.plan is None:
                continue
            seen.add(conf)
            plan = m.plan.model_dump(mode="json")
            rc = m.configuration
            alloc.append({"input": inp.name, "configuration": conf, "victim CPU": plan["victim"].get("cpu"),
                          "victim policy": str(plan["victim"].get("policy") or "other"),
                          "enemy CPUs": ", ".join(sorted({str(e.get("cpu")) for e in plan.get("enemies") or []})) or "–",
                          "housekeeping CPUs": ", ".join(map(str, rc.housekeeping_cpus or [])) if rc else "–",
                          "groups": ", ".join(g.name for g in rc.groups or []) if rc and rc.groups else "–",
                          "regulator": "yes" if m.regulator is not None else "no", "example run": f"{inp.name}/{m.run_id}"})
    if not caches and not alloc:
        f.not_covered = "no run records its environment or plan, so neither the resources nor their allocation are known"
        return
    if caches:
        f.add("shared_resources", pd.DataFrame(caches), runs)
    else:
        f.notes.append("Not covered: the shared-resource inventory (no run.json records the environment).")
    if alloc:
        f.add("allocation", pd.DataFrame(alloc), [a["example run"] for a in alloc])
    f.notes.append("Interconnect and CAT/MPAM allocations are not read yet; resctrl support is in MCP_Planning_1's sources.")


def resource_usage_1(inputs: list[Input], f: Finding) -> None:
    """Configuration settings held: the declared values with their rationale, each run's settings
    snapshot before and after it and its drift (run.json `settings`, targets/settings.py); a run
    whose settings drifted is invalid and listed with its diff."""
    declared, per_run, snapshot, ids = [], [], [], []
    for inp in inputs:
        metas = [m for m in inp.metas() if m.settings is not None]
        for d in inp.experiment.get("declared_settings") or []:
            held = [m.settings.before.get(d["path"]) for m in metas]
            declared.append({"input": inp.name, "setting": d["path"], "required value": d["value"], "rationale": d["why"],
                             "read before each run": ", ".join(sorted({str(v) for v in held})) or "not recorded"})
        for m in metas:
            per_run.append({"input": inp.name, "run": m.run_id, "settings read": len(m.settings.before),
                            "held": ("unknown: not read after the run" if "after" not in m.settings.model_fields_set
                                     else "yes" if not m.settings.drift else "no: invalid"),
                            "drift": "; ".join(m.settings.drift)})
        for run, why in (getattr(inp.data, "left_out", None) or {}).items():
            if str(why).startswith("invalid: "):  # left out of the verdicts: shown here with its diff
                per_run.append({"input": inp.name, "run": run, "settings read": None, "held": "no: invalid",
                                "drift": str(why).removeprefix("invalid: ")})
                ids += _ids(inp, [run])
        if metas:
            snapshot += [{"input": inp.name, "setting": k, "value before the first run": v}
                         for k, v in metas[0].settings.before.items()]
        ids += _ids(inp, [m.run_id or "" for m in metas])
    if not per_run:
        f.not_covered = ("no run of the inputs recorded its settings snapshot (runs made before xtalk read the settings "
                         "before and after each run); run them again with this version")
        return
    f.add("settings_per_run", pd.DataFrame(per_run).astype({"settings read": "Int64"}), ids)
    f.add("settings_snapshot", pd.DataFrame(snapshot), ids)
    if declared:
        f.add("declared_settings", pd.DataFrame(declared), ids)
    else:
        f.notes.append("no declared-settings file: the values were recorded and compared run by run, but none was "
                       "declared as required (`settings` in the experiment file or `xtalk run --settings`).")
    bad = sum(r["held"] != "yes" for r in per_run)
    if bad:
        f.notes.append(f"{bad} run(s) invalid: their settings drifted during the run; left out of every verdict.")


def resource_usage_3(inputs: list[Input], f: Finding) -> None:
    """Interference channels: each scenario's enemies, their channel, what they achieved, and
    the victim's slowdown with its CI (the report's verdicts)."""
    chans, loads, ids_c, ids_l = [], [], [], []
    kinds = catalog.current().kinds
    for inp in inputs:
        if inp.multi:
            m = inp.cohabitation().matrix
            for r in m.itertuples():
                chans.append({"input": inp.name, "application": r.victim, "scenario": r.scenario,
                              "configuration": r.configuration, "channel": "another application",
                              "enemies": r.perturber, "runs": r.runs, "metric": r.metric,
                              f"slowdown of {r.statistic}": f"×{r.slowdown:.2f} [{r.low:.2f}, {r.high:.2f}]",
                              "status": r.interference})
                ids_c += _ids(inp, inp.run_ids(lambda x, s=r.scenario, c=r.configuration:
                                               (x["scenario"] == s) & (x["configuration"] == c)))
            continue
        specs, runs = inp.data.scenario_specs(), inp.runs()
        status = inp.verdicts().set_index(["scenario", "configuration"])["status"]
        app = tb.application_name(inp.data)
        sl = tb.slowdown(inp.data, n_boot=inp.n_boot)
        shown = slowdown_display(sl)  # the report's cells: a max from too few runs is not shown
        for _, r in (shown[(shown["metric"] == "exec") & (shown["scenario"] != "solo")] if len(shown) else shown).iterrows():
            # What the runs' plans ran (store: enemy_kinds), else what the experiment file declared.
            ran = runs.loc[(runs["scenario"] == r.scenario) & (runs["configuration"] == r.configuration), "enemy_kinds"]
            declared = sorted({k for x in ran.dropna() for k in str(x).split("+") if k}
                              or {e.get("kind", "?") for e in specs.get(r.scenario, []) if isinstance(e, dict)})
            chans.append({"input": inp.name, "application": app, "scenario": r.scenario, "configuration": r.configuration,
                          "channel": ", ".join(sorted({(kinds[k].channel or "unknown") if k in kinds else "unknown"
                                                       for k in declared})) or "unknown",
                          "enemies": "+".join(declared) or "–", "runs": r.runs,
                          "slowdown of median": r["slowdown median [95 % CI]"],
                          "slowdown of max": r["slowdown max [95 % CI]"],
                          "status": status.get((r.scenario, r.configuration), "")})
            ids_c += _ids(inp, inp.run_ids(lambda x, s=r.scenario, c=r.configuration:
                                           (x["scenario"] == s) & (x["configuration"] == c)))
        for m in inp.metas():
            for e in m.enemies:
                loads.append({"input": inp.name, "run": m.run_id, "scenario": m.labels().get("scenario", ""),
                              "enemy": e.name, "kind": e.kind, "unit": e.unit, "achieved rate": e.rate,
                              "target rate": e.target_rate, "intensity": e.intensity, "setup error": e.setup_error})
                ids_l.append(f"{inp.name}/{m.run_id}")
    if not chans:
        f.not_covered = "no input has a scenario with enemies beside solo, so no interference channel was exercised"
        return
    f.add("channels", pd.DataFrame(chans), ids_c)
    if loads:
        f.add("enemy_load", pd.DataFrame(loads), sorted(set(ids_l)))
    else:
        f.notes.append("No run.json records its enemies' achieved work: proof that each enemy loads its channel is missing.")
    f.notes.append("Slowdown: ratio of the execution time's statistic under interference to solo's, 95 % bootstrap CI.")


def resource_usage_4(inputs: list[Input], f: Finding) -> None:
    """Regulator conformance (configured vs achieved, overshoot) from each run's regulator report."""
    rows, ids = [], []
    for inp in inputs:
        for m in inp.metas():
            g = m.regulator
            if g is None:
                continue
            rows.append({"input": inp.name, "run": m.run_id, "configuration": m.labels().get("configuration", ""),
                         "mode": g.mode, "period_us": g.period_us, "budget_bytes": g.budget_bytes, "periods": g.periods,
                         "throttles": g.throttles, "overshoot_bytes_mean": g.overshoot_bytes_mean,
                         "overshoot_bytes_max": g.overshoot_bytes_max})
            ids.append(f"{inp.name}/{m.run_id}")
    if not rows:
        f.not_covered = ("no run of the inputs used a memory-bandwidth regulator, and capacity against worst-case "
                         "demand needs the platform's channel peaks (`xtalk characterize --peaks`), not assembled yet")
        return
    f.add("regulator", pd.DataFrame(rows), ids)
    f.notes.append("Capacity of each shared resource against the demand of all hosted software is not assembled yet.")


def software_1(inputs: list[Input], f: Finding) -> None:
    """Timing per application and scenario: max observed, slowdown, misses, verdict; pWCET or
    its refusal."""
    vs, pw, ids = [], [], []
    eps = []
    for inp in inputs:
        if inp.multi:
            e = inp.cohabitation().epsilon
            if len(e):
                eps.append(e[["application", "criticality", "configuration", "verdict", "scenario", "metric", "statistic",
                              "bound", "observed_ns", "ci_low_ns", "ci_high_ns", "runs", "note"]].assign(input=inp.name))
                ids += _ids(inp, inp.run_ids())
            f.notes.append(f"{inp.name}: applications without an ε have no verdict line; pWCET per application is "
                           "not assembled yet.")
            continue
        v = inp.verdicts()
        if len(v):
            vs.append(v[["application", "scenario", "configuration", "exec_median_ms", "exec_max_ms", "response_max_ms",
                         "jobs", "deadline_misses", "serious_misses", "status", "verdict"]].assign(input=inp.name))
            ids += _ids(inp, inp.run_ids())
        p = inp.pwcet()
        if len(p):
            pw.append(p.assign(input=inp.name))
    if not vs and not eps:
        f.not_covered = "no input has measured jobs"
        return
    if vs:
        f.add("verdicts", pd.concat(vs, ignore_index=True), ids)
    if eps:
        f.add("application_epsilon", pd.concat(eps, ignore_index=True), ids)
    if pw:
        f.add("pwcet", pd.concat(pw, ignore_index=True), ids)
    f.notes.append("No budget or ε was given to this bundle: margins to a budget are the verdicts' ε lines, when the "
                   "experiment declared one.")


def error_handling_1(inputs: list[Input], f: Finding) -> None:
    """Failure effects injected and whether they stayed contained (report/containment.py)."""
    found: dict[str, tuple[list, list]] = {"propagation": ([], []), "containment": ([], [])}
    for inp in inputs:
        r = inp.runs()
        faulty = r["fault"].fillna("").astype(str).ne("") if "fault" in r else pd.Series(False, index=r.index)
        kinds = r["enemy_kinds"].fillna("").astype(str).map(lambda s: bool(set(s.split("+")) & FAULT_KINDS))
        if not (faulty | kinds).any():
            continue
        if inp.multi:  # a fault of one application against the others (analysis/propagation.py)
            name, table = "propagation", inp.cohabitation().propagation[
                ["configuration", "scenario", "faulty", "faulty_criticality", "fault", "application", "criticality",
                 "verdict", "slowdown", "low", "high", "misses", "reference_misses", "runs_ok", "why"]]
        elif "solo" in set(r["scenario"]):  # fault enemies against the victim alone (report/containment.py)
            res = open_results(inp.path)
            table = containment.verdicts(res.runs(), res.jobs())
            name, table = "containment", table[table["scenario"].isin(set(r.loc[faulty | kinds, "scenario"]))]
        else:
            f.notes.append(f"{inp.name}: fault runs but no solo run to judge them against; left out.")
            continue
        found[name][0].append(table.assign(input=inp.name))
        found[name][1].extend(_ids(inp, [str(x) for x in r.loc[faulty | kinds, "run_id"]]))
    if not any(parts for parts, _ in found.values()):
        f.not_covered = ("no input injects a failure (no fault scenario of an experiment of applications, no fault "
                         "enemy such as memhog, forkbomb or crashloop)")
        return
    for name, (parts, ids) in found.items():
        if parts:
            f.add(name, pd.concat(parts, ignore_index=True), ids)
    f.notes.append("Detection latency of each fault is not measured yet.")


def accomplishment_summary(inputs: list[Input], f: Finding) -> None:
    """Deviations (runs that did not complete, runs left out as damaged) and known limitations;
    the traceability matrix itself is added by the bundle once every objective is known."""
    dev, ids = [], []
    for inp in inputs:
        r = inp.runs()
        for x in r[r["status"] != "completed"].itertuples():
            dev.append({"input": inp.name, "run": x.run_id, "deviation": f"run {x.status}: {x.reason or 'no reason given'}"})
            ids.append(f"{inp.name}/{x.run_id}")
        for run, why in inp.data.left_out.items():
            how = "left out" if str(why).startswith("invalid: ") else "left out as damaged"  # drift: not damage
            dev.append({"input": inp.name, "run": run, "deviation": f"{how}: {why}"})
            ids.append(f"{inp.name}/{run}")
    f.add("deviations", pd.DataFrame(dev, columns=["input", "run", "deviation"]), ids)
    f.notes += [
        "Known limitations: timings measured in a virtual machine include the hypervisor's preemptions; without a "
        "hardware PMU the enemies' effect on caches and buses is shown by their achieved rates only.",
        "Each objective marked 'not covered' above is a deviation the applicant must answer by other means.",
    ]


#: The objectives in the order the bundle shows them: (id, title, what an applicant files, function).
OBJECTIVES: list[tuple[str, str, str, Callable[[list[Input], Finding], None]]] = [
    ("MCP_Planning_1", "Platform identity and tools",
     "SoC/CPU model, active cores, OS and firmware versions, kernel command line, DVFS/SMT/idle/turbo state; "
     "tools with versions", planning_1),
    ("MCP_Planning_2", "Shared resources and their allocation",
     "cache levels with size, ways and sharing, memory; their allocation per partition (cpusets, cgroups, regulator)",
     planning_2),
    ("MCP_Resource_Usage_1", "Configuration settings held",
     "the settings that must hold, with a rationale each, and evidence they held before and after every run",
     resource_usage_1),
    ("MCP_Resource_Usage_3", "Interference channels",
     "each channel with the enemy that loads it, proof it loads it, the victim's sensitivity with CIs", resource_usage_3),
    ("MCP_Resource_Usage_4", "Capacity and regulator conformance",
     "capacity of each shared resource against worst-case demand; regulator configured against achieved, overshoot",
     resource_usage_4),
    ("MCP_Software_1", "Timing of each application",
     "per application under worst interference: max observed, pWCET or its refusal, misses, verdict; solo against "
     "concurrent", software_1),
    ("MCP_Error_Handling_1", "Failure effects and containment",
     "failure effects injected (overrun, fault enemies, throttling), detection and containment", error_handling_1),
    ("MCP_Accomplishment_Summary_1", "Accomplishment summary",
     "objective → artifact → run traceability, deviations, known tool limitations", accomplishment_summary),
]


def findings(inputs: list[Input]) -> list[Finding]:
    """Every objective's finding, in OBJECTIVES order."""
    out = []
    for oid, title, asks, fn in OBJECTIVES:
        f = Finding(oid, title, asks)
        fn(inputs, f)
        out.append(f)
    return out
