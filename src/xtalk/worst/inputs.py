"""The inputs of `xtalk worst`, checked before anything starts: each problem is one line
naming the option and the fix (UsageError, exit code 2)."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import safepath
from ..errors import UsageError
from .runs import METRICS, STATISTICS, Victim
from .stopping import Rule


@dataclass(frozen=True)
class Request:
    """A checked request: the victim, the budget, what is maximised, where results go."""

    victim: Victim
    budget_s: float
    statistic: str
    metric: str
    out: Path
    kinds: Optional[list[str]]
    stress_ng: bool
    seed: int
    rule: Rule = Rule()
    #: Runs of each confirmation scenario (fewer where the budget is short, never below 3);
    #: also the most runs one candidate gets in the search's rounds (search.schedule's cap).
    confirm_repetitions: int = 5


def budget_seconds(text: str) -> float:
    """`10m`, `10min`, `90s`, `1h` -> seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h)?\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--budget: cannot read {text!r}; give a time such as 10m, 90s or 1h")
    return float(m.group(1)) * {"s": 1, "m": 60, "min": 60, "h": 3600, None: 1}[m.group(2)]


def _victim_from_text(text: str) -> dict:
    """`--victim`: experiment-file keys (`body = "chase", bytes = "llc/2", ...`) or a
    command line (run as a `command` victim)."""
    try:
        table = tomllib.loads(f"v = {{ {text} }}")["v"] if "=" in text else None
    except tomllib.TOMLDecodeError:
        table = None
    if table and "body" in table:
        return table
    argv = shlex.split(text)
    if not argv:
        raise UsageError("--victim: empty; give experiment-file keys (body = \"chase\", bytes = \"llc/2\", jobs = 50) or a command")
    return {"body": "command", "argv": argv}


def victim(experiment: Optional[Path], text: Optional[str]) -> Victim:
    """The victim of an experiment file's `[victim]`, or of `--victim`, checked as an
    experiment file would check it."""
    from ..config.experiment import VictimSpec, format_validation_error, load
    from pydantic import ValidationError

    if (experiment is None) == (text is None):
        raise UsageError("worst: give the victim either as an experiment file or with --victim, not "
                         + ("both" if experiment else "neither"))
    if experiment is not None:
        if not Path(experiment).is_file():
            raise UsageError(f"{experiment}: no such file; give an experiment file whose [victim] is the application")
        exp = load(experiment)
        table = exp.victim.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        settle = exp.settle if isinstance(exp.settle, str) else f"{exp.settle}ms"
        source = str(experiment)
    else:
        table = _victim_from_text(text)
        settle, source = "200ms", f"--victim {text}"
        try:
            VictimSpec.model_validate(table)
        except ValidationError as e:
            line = format_validation_error("--victim", e)
            raise UsageError(line) from None
    cpus = table.pop("cpus", None)
    if table.get("body") == "command":
        table.pop("jobs", None)
        table.pop("warmup_jobs", None)
    return Victim(table, cpus, settle, source)


def resolve_cpus(v: Victim, online: list[int]) -> tuple[Victim, list[int]]:
    """The victim's CPUs (its own, else the last online CPU) and the enemies' (all others)."""
    from ..units import cpu_set

    try:
        cpus = cpu_set(v.cpus, "victim.cpus", online) if v.cpus is not None else [online[-1]]
    except ValueError as e:
        raise UsageError(f"{e}; give CPUs of this machine") from None
    others = [c for c in online if c not in cpus]
    if not others:
        raise UsageError(f"victim.cpus: {cpus} leaves no CPU for enemies; give the victim fewer CPUs")
    return Victim(v.table, list(cpus), v.settle, v.source), others


def stopping_rule(margin: str = "10%", confidence: str = "90%") -> Rule:
    """`--margin` and `--confidence` (shares: "10%" or 0.1) as the stopping rule."""
    from ..units import fraction
    from .stopping import MARGIN_MAX

    try:
        return Rule(fraction(margin, "--margin", high=MARGIN_MAX), fraction(confidence, "--confidence"))
    except ValueError as e:
        raise UsageError(str(e)) from None


def request(experiment: Optional[Path], victim_text: Optional[str], budget: str, statistic: str, metric: str, out: Path,
            kinds: Optional[list[str]], stress_ng: bool, seed: int, margin: str = "10%", confidence: str = "90%",
            confirm_repetitions: int = 5) -> Request:
    """Every option checked; nothing started. `confirm_repetitions` (3 to 10): the
    confirmation's runs of each scenario (bench/worst_vs_sweep.py gives the sweep's)."""
    from .. import catalog

    secs = budget_seconds(budget)
    rule = stopping_rule(margin, confidence)
    if statistic not in STATISTICS:
        raise UsageError(f"--statistic: {statistic!r} is not one of {', '.join(STATISTICS)}; choose one")
    if metric == "execution":  # the spelling before the one ε grammar (config/epsilon.py): said once
        import sys

        print('--metric: deprecated: "execution" is now "exec" (as in --epsilon and epsilon = { metric = "exec" })',
              file=sys.stderr)
        metric = "exec"
    if metric not in METRICS:
        raise UsageError(f"--metric: {metric!r} is not one of {', '.join(METRICS)}; choose one")
    for k in kinds or []:
        if k not in catalog.kind_names():
            raise UsageError(f"--kind: {k!r} is not an enemy kind of the catalog; choose from {', '.join(catalog.kind_names())}")
    out = safepath.results_dir(out, "--out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out: {out} exists and is not an empty directory; give a new directory")
    if not (isinstance(confirm_repetitions, int) and 3 <= confirm_repetitions <= 10):
        raise UsageError(f"confirm_repetitions: {confirm_repetitions!r} is outside 3..10; give a count such as 5")
    v = victim(experiment, victim_text)
    if v.table.get("body") == "taskset":
        raise UsageError("victim.body: a task set has per-task times, not one statistic to maximise; search one task's body")
    return Request(v, secs, statistic, metric, out, kinds, stress_ng, seed, rule, confirm_repetitions)
