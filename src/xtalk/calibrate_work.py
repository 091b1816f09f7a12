"""The victim's work per job from a target solo utilisation (`utilization = "30%"`).

A body's footprint may come from the caches (`bytes = "llc/4"`), but how long a job takes
depends on the machine: the same 8 MiB pointer chase took 4 ms on one machine and 18 ms on
another against a 10 ms period, and a victim overloaded alone measures its own backlog, not
interference. So the work (chase `accesses`, pi `iterations`, syscall `calls`, aocs
`repeat_step`) is set on the
target before the interleaved runs: short solo runs in the first configuration's placement and
policy measure the median execution time per unit of work, and the work that fills the asked
share of the period is used in every run of the experiment, solo and enemies alike. The passes
are kept under `calibration/` and the result in experiment.json and in each run's plan labels.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from . import catalog
from .config.expand import RunSpec
from .errors import UsageError
from .plan import Plan
from .targets.base import LocalTarget

if TYPE_CHECKING:  # the outcome's models: built at the first run, not by `xtalk plan`'s estimate
    from .outcome import RunOutcome



def knob_of(body) -> Optional[str]:
    """The parameter that sets one job's work of a plan body (its catalog `work`), or None
    when the body's work is not calibrated."""
    return catalog.body(body.kind).work

#: Jobs per calibration pass (after warm-up): enough for a stable median, short on any period.
PASS_JOBS = 20
PASS_WARMUP = 3
#: A pass whose median lands within this of the target ends the calibration.
TOLERANCE = 0.10
MAX_PASSES = 4


#: A pessimistic cost of one dependent load (a DRAM miss with a TLB miss, in a guest): the
#: first chase pass assumes it, so that pass stays near the period whatever the buffer.
SLOW_ACCESS_NS = 200


def _first_guess(body, target_ns: float) -> int:
    """A small first amount of work, sized by time rather than by the buffer: at most one pass
    over a chase buffer and at most what fills `target_ns` at SLOW_ACCESS_NS per load; a
    short pi series or a few system calls. The later passes scale it, so only its order of
    magnitude matters, but a first guess far above the period costs every job of the pass:
    one pass over 1.2 GiB (4 × a 300 MiB L3) took 3.8 s a job against a 4 ms period."""
    if body.kind == "chase":
        return max(min(body.bytes // 64, int(target_ns / SLOW_ACCESS_NS)), 2)
    if body.kind == "aocs":  # a step costs 0.2–6 µs: at most the target at 6 µs
        return max(1, int(target_ns / 6_000))
    return 100_000 if body.kind == "pi" else 200


def estimated_seconds(runs: list[RunSpec], per_run_overhead_s: float) -> float:
    """What calibration adds to an experiment: three passes (the usual count: a first guess,
    its correction, a check) of a short solo run each."""
    plan = runs[0].plan
    return 3 * (plan.settle_ms / 1e3 + (PASS_JOBS + PASS_WARMUP) * plan.victim.period_ns / 1e9 + per_run_overhead_s)


def _with_work(plan: Plan, knob: str, work: int) -> Plan:
    p = plan.model_copy(deep=True)
    setattr(p.victim.body, knob, work)
    return p


def run_on(agent, plan: Plan, run_dir: Path) -> RunOutcome:
    """Run `plan` into `run_dir` on `agent`: this machine's agent binary (a path), or a
    campaign target (anything with `run(plan, run_dir)`: local, SSH)."""
    target = agent if hasattr(agent, "run") else LocalTarget(agent)  # one door for every pass
    return target.run(plan, run_dir)


def solo_pass(plan: Plan, run_dir: Path, agent, what: str, alternative: str, jobs: int = PASS_JOBS):
    """Run `plan` alone for one short pass (`jobs` jobs after PASS_WARMUP) into `run_dir` on
    `agent` (see run_on); return its measured jobs. A pass that does not complete is an input
    error naming `what`."""
    plan = plan.model_copy(deep=True)
    plan.enemies = []
    plan.victim.jobs, plan.victim.warmup_jobs = jobs, PASS_WARMUP
    plan.run_id = run_dir.name
    plan.timeout_s = 60 + 2 * (jobs + PASS_WARMUP) * max(plan.victim.period_ns / 1e9, 1.0)
    if run_dir.exists():  # a repeated pass starts afresh
        shutil.rmtree(run_dir)
    meta = run_on(agent, plan, run_dir)
    from .store.jobs import read_job_log  # pandas, once a pass has run

    log = read_job_log(run_dir / "jobs.bin")
    measured = log[~log.warmup & ~log.failed] if len(log) else log
    if meta.status != "completed" or len(measured) < jobs // 2:
        raise UsageError(f"{what} did not complete ({meta.status}: {meta.reason}); fix that run's cause, "
                         f"{alternative}")
    return measured


def calibrate(runs: list[RunSpec], utilization: float, agent, out: Path, say=print) -> tuple[list[RunSpec], dict]:
    """Measure and set the victim's work so that a solo job takes `utilization` × period.

    `agent` is this machine's agent binary or a campaign target (see run_on). Returns the
    runs with the calibrated work (every one the same) and the record of it."""
    solo = next((r for r in runs if r.scenario == "solo"), runs[0])
    base = solo.plan
    body = base.victim.body
    knob = knob_of(body)
    if knob is None:
        raise UsageError(f"victim.utilization: body '{body.kind}' has no work to calibrate; remove utilization")
    period = base.victim.period_ns
    target_ns = utilization * period
    work = _first_guess(body, target_ns)
    passes = []
    pass_dir = out / "calibration"
    for i in range(MAX_PASSES):
        measured = solo_pass(_with_work(base, knob, work), pass_dir / f"calibration-{i}", agent,
                             "victim.utilization: the calibration run", f"or give victim.{knob} explicitly")
        median = float(measured.exec_ns.median())
        passes.append({knob: work, "median_exec_ns": median, "utilization": median / period})
        say(f"calibration pass {i + 1}: {knob} = {work}: median {median / 1e6:.3f} ms = {median / period:.0%} of the period")
        if i > 0 and abs(median - target_ns) <= TOLERANCE * target_ns:
            break
        work = max(1, round(work * target_ns / median))
    else:
        say(f"[yellow]calibration did not settle within {TOLERANCE:.0%} in {MAX_PASSES} passes; "
            f"using {knob} = {work} (the machine is noisy: the solo runs measure what it achieves)[/]")
    record = {"knob": knob, "work": work, "utilization": utilization, "period_ns": period,
              "configuration": solo.configuration, "passes": passes,
              "achieved_utilization": passes[-1]["utilization"]}
    return [dataclasses.replace(r, plan=calibrated(r.plan, record)) for r in runs], record


def calibrated(plan: Plan, record: dict) -> Plan:
    """`plan` with the work of a calibration record, labelled with it (every run of an
    experiment, or of a campaign cell, gets the same)."""
    p = _with_work(plan, record["knob"], record["work"])
    p.labels = {**p.labels, "calibrated_work": f"{record['knob']}={record['work']} for {record['utilization']:.0%} "
                                                 f"of {record['period_ns'] / 1e6:g} ms"}
    return p
