"""`xtalk gate RESULTS [--baseline OLD] [--max-regression 5%] [--epsilon ...]`: a verdict a
CI pipeline can act on.

Each check is one application × configuration × scenario × question, with one of three
outcomes: *pass*, *fail* or *inconclusive* (the data cannot tell). The questions:

- every ε bound (given with ``--epsilon``, or stored with the experiment or the campaign's
  applications) holds: the ε verdict of ``analysis.verdict`` (its CI against the bound);
- with ``--baseline``, no statistic regressed beyond the allowed change: the median and p99
  of each common cell against the baseline (``analysis.change``, as `xtalk compare` judges
  them), failed when the ratio's CI lies wholly above ``1 + max_regression``, passed when it
  lies at or below it, inconclusive when it straddles it.

Exit status: 0 when nothing failed (inconclusive checks fail only with ``strict``), 1 when a
check failed (each failure printed on one line: what, by how much, with the CI), 2 for bad
input. ``--junit FILE`` writes JUnit XML, one test case per check, so GitLab, GitHub and
Jenkins show the gate natively (inconclusive: skipped, or failed with ``strict``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from .. import safepath
from ..analysis import words as vd  # the words only: `xtalk run --gate` loads this before its first run
from ..errors import UsageError

PASS, FAIL, INCONCLUSIVE = "pass", "fail", vd.INCONCLUSIVE  # a check the data cannot decide: the ε word
#: An ε verdict as a check outcome.
_FROM_EPSILON = {vd.HOLDS: PASS, vd.VIOLATED: FAIL, vd.INCONCLUSIVE: INCONCLUSIVE}


@dataclass(frozen=True)
class Check:
    """One gated question about one cell."""

    name: str  # "epsilon response p99 ≤ 1.5× solo", "regression p99 ≤ +5 %"
    application: str
    configuration: str
    scenario: str
    outcome: str  # pass, fail, inconclusive
    detail: str  # the numbers the outcome follows from

    @property
    def where(self) -> str:
        parts = [self.application, self.configuration if self.configuration not in ("", "default") else "", self.scenario]
        return " · ".join(p for p in parts if p)

    def line(self) -> str:
        return f"{self.outcome.upper()}: {self.where}: {self.name}: {self.detail}"


def parse_regression(text: str | None) -> float | None:
    """``"5%"`` or ``"0.05"`` → 0.05; None stays None."""
    if text is None:
        return None
    t = str(text).strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f'--max-regression: cannot read {text!r}; write a percentage such as "5%"') from None
    if not (0 <= value < math.inf):
        raise UsageError(f'--max-regression: {text!r} is out of range; give 0% or more (e.g. "5%")')
    return value


def _ratio_text(ratio: float, low: float, high: float) -> str:
    return f"×{ratio:.3f} [{low:.3f}, {high:.3f}]" if all(map(math.isfinite, (ratio, low, high))) else f"×{ratio:.3f} (no CI)"


def epsilon_checks(path: Path, epsilons: Sequence) -> list[Check]:
    """One check per ε bound and cell of an experiment or a campaign."""
    from ..results.campaign_cells import cell_table, is_campaign, load_campaign
    from ..results import tables as tb

    out = []
    if is_campaign(path):
        cells = cell_table(load_campaign(path), epsilons)
        for r in cells.to_dict("records"):
            if r.get("eps_verdict") not in _FROM_EPSILON:
                continue
            detail = (f"observed {_ratio_text(r['eps_ratio'], r['eps_ratio_lo'], r['eps_ratio_hi'])} of solo"
                      if math.isfinite(r["eps_ratio"]) else f"observed {r['eps_observed_ms']:.3f} ms") + \
                f", bound {r['eps_bound_ms']:.3f} ms (the worst of: {r['epsilon']})"
            out.append(Check(f"epsilon {r['epsilon']}", str(r.get("application", "")), str(r.get("configuration", "")),
                             str(r["scenario"]), _FROM_EPSILON[r["eps_verdict"]], detail))
        return out
    data = tb.load(path)
    from .cohabitation import declared, of_report

    if declared(data.experiment):  # several applications, each with its own ε (analysis/cohabitation.py)
        for r in of_report(data, 2000).epsilon.to_dict("records"):
            detail = (f"observed {_ratio_text(r['ratio'], r['ratio_low'], r['ratio_high'])} of alone"
                      if math.isfinite(r["ratio"]) else
                      f"observed {r['observed_ns'] / 1e6:.3f} ms [{r['ci_low_ns'] / 1e6:.3f}, {r['ci_high_ns'] / 1e6:.3f}]"
                      if math.isfinite(r["observed_ns"]) else "no value") + \
                f", bound {r['bound']} (the worst scenario){'; ' + r['note'] if r['note'] else ''}"
            out.append(Check(f"epsilon {r['metric']} {r['statistic']} ≤ {r['bound']}", str(r["application"]),
                             str(r["configuration"]), str(r["scenario"]), _FROM_EPSILON.get(r["verdict"], INCONCLUSIVE),
                             detail))
    app = tb.application_name(data)
    for r in tb.epsilon_table(data, epsilons).to_dict("records"):
        if r["bound_kind"] == "relative":
            detail = f"observed {_ratio_text(r['ratio'], r['ratio_ci_low'], r['ratio_ci_high'])} of solo, bound ×{r['relative']:g}"
        else:
            detail = (f"observed {r['observed_ns'] / 1e6:.3f} ms [{r['ci_low_ns'] / 1e6:.3f}, {r['ci_high_ns'] / 1e6:.3f}], "
                      f"bound {r['bound_ns'] / 1e6:g} ms")
        out.append(Check(f"epsilon {r['epsilon']}", app, str(r["configuration"]), str(r["scenario"]),
                         _FROM_EPSILON.get(r["verdict"], INCONCLUSIVE), detail))
    return out


def regression_checks(path: Path, baseline: Path, allowed: float) -> list[Check]:
    """One check per statistic and cell common to ``path`` and ``baseline``: the change
    against the baseline within ``allowed`` (0.05: +5 %)."""
    from . import compare as cm

    cm.check_inputs([baseline, path], [])
    comp = cm.compare([cm.measure(baseline, "baseline"), cm.measure(path, "results")])
    out = []
    for cell, scenario, _, ch in comp.changes:
        outcome = _FROM_EPSILON[ch.within(allowed)] if ch.concluded else INCONCLUSIVE
        detail = (f"{comp.quantity} {ch.stat} {_ratio_text(ch.ratio, ch.low, ch.high)} of the baseline, "
                  f"allowed +{100 * allowed:g} %; {ch.words()}")
        out.append(Check(f"regression {ch.stat} ≤ +{100 * allowed:g} %", cell, "", scenario, outcome, detail))
    for cell, scenario, labels in comp.partial:
        out.append(Check("regression: cell in both", cell, "", scenario, INCONCLUSIVE,
                         f"only in {'the baseline' if labels == ['baseline'] else 'these results'}: not compared"))
    return out


def failed(checks: Sequence[Check], strict: bool) -> list[Check]:
    """The checks that fail the gate."""
    return [c for c in checks if c.outcome == FAIL or (strict and c.outcome == INCONCLUSIVE)]


def junit(checks: Sequence[Check], strict: bool, name: str = "xtalk gate") -> bytes:
    """JUnit XML: one test suite, one test case per check (classname: the cell)."""
    import xml.etree.ElementTree as ET

    bad = failed(checks, strict)
    skipped = [c for c in checks if c.outcome == INCONCLUSIVE and c not in bad]
    suite = ET.Element("testsuite", name=name, tests=str(len(checks)), failures=str(len(bad)), errors="0",
                       skipped=str(len(skipped)))
    for c in checks:
        case = ET.SubElement(suite, "testcase", classname=c.where, name=c.name)
        if c in bad:
            ET.SubElement(case, "failure", message=f"{c.outcome}: {c.detail}", type=c.outcome).text = c.line()
        elif c in skipped:
            ET.SubElement(case, "skipped", message=f"inconclusive: {c.detail}")
        ET.SubElement(case, "system-out").text = c.line()
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def run(path: Path, *, baseline: Path | None, max_regression: str | None, epsilons: Sequence[str], strict: bool,
        junit_path: Path | None, as_json: bool, console, record: bool = False) -> int:
    """The command: gather the checks, print them (or JSON), write JUnit, return the exit
    status. ``record`` (`run --gate`, `campaign run --gate`): the checks also go into the
    results' verdicts.json, as its ``gate``."""
    import json
    import sys

    from ..results import epsilon as eps

    path = Path(path)
    if not (path / "runs").is_dir():
        raise UsageError(f"RESULTS: {path} is not an xtalk results directory (no runs/); give the directory "
                         "`xtalk run` or `xtalk campaign run` printed")
    if baseline is not None and not (Path(baseline) / "runs").is_dir():
        raise UsageError(f"--baseline: {baseline} is not an xtalk results directory (no runs/)")
    allowed = parse_regression(max_regression)
    if allowed is not None and baseline is None:
        raise UsageError("--max-regression: needs --baseline OLD (the results to compare against)")
    specs = [eps.parse(e) for e in epsilons]
    checks = epsilon_checks(path, specs)
    if baseline is not None:
        checks += regression_checks(path, Path(baseline), 0.0 if allowed is None else allowed)
    if not checks:
        raise UsageError("nothing to gate: give --epsilon METRIC:STATISTIC:BOUND or --baseline OLD, or declare ε "
                         "in the experiment (victim.epsilon) or the campaign's applications")
    bad = failed(checks, strict)
    if junit_path is not None:
        safepath.write_bytes(Path(junit_path), junit(checks, strict))
    if record:
        _record(path, {"strict": strict, "baseline": str(baseline) if baseline else None, "passed": not bad,
                       "exit_status": 1 if bad else 0, "checks": [asdict(c) for c in checks]})
    if as_json:
        json.dump({"schema_version": 1, "results": str(path), "baseline": str(baseline) if baseline else None,
                   "strict": strict, "passed": not bad, "checks": [asdict(c) for c in checks]},
                  sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for c in checks:
            if c in bad or c.outcome == INCONCLUSIVE:
                console.print(c.line(), markup=False)
        n = {o: sum(c.outcome == o for c in checks) for o in (PASS, FAIL, INCONCLUSIVE)}
        why = "" if not n[INCONCLUSIVE] else " (failing: --strict)" if strict else \
            " (the data cannot tell: more repetitions narrow the CIs; --strict fails them)"
        console.print(f"gate: {'FAILED' if bad else 'passed'}: {n[PASS]} passed, {n[FAIL]} failed, "
                      f"{n[INCONCLUSIVE]} inconclusive{why}", markup=False)
    return 1 if bad else 0


def _record(path: Path, gate: dict) -> None:
    """The gate's checks into RESULTS/verdicts.json (left alone when there is none)."""
    import json

    from . import verdicts

    try:
        doc = json.loads((path / verdicts.FILE).read_text())
    except (OSError, ValueError):
        return
    if not isinstance(doc, dict) or doc.get("schema_version") != verdicts.SCHEMA_VERSION:
        return  # damaged or another version: `xtalk summary` writes it again
    doc["gate"] = gate
    verdicts.write(path, doc)


def options(gate: bool, baseline, max_regression, strict: bool, junit) -> dict | None:
    """The `--gate` options of `run` and `campaign run`, checked before anything runs; None
    without --gate (and a refusal when a gate option comes without it)."""
    if not gate:
        given = [n for n, v in (("--baseline", baseline), ("--max-regression", max_regression), ("--strict", strict),
                                ("--junit", junit)) if v]
        if given:
            raise UsageError(f"{given[0]}: gates the results; add --gate (or run `xtalk gate RESULTS` afterwards)")
        return None
    if baseline is not None and not (Path(baseline) / "runs").is_dir():
        raise UsageError(f"--baseline: {baseline} is not an xtalk results directory (no runs/)")
    if parse_regression(max_regression) is not None and baseline is None:
        raise UsageError("--max-regression: needs --baseline OLD (the results to compare against)")
    return {"baseline": baseline, "max_regression": max_regression, "strict": strict, "junit_path": junit}


def after(results: Path, gating: dict, console) -> int:
    """`--gate` of `run` and `campaign run`: :func:`run` on the fresh results, its checks
    recorded in their verdicts.json; its exit status (0 passed, 1 failed)."""
    try:
        return run(results, epsilons=[], as_json=False, console=console, record=True, **gating)
    except UsageError as e:
        if str(e).startswith("nothing to gate"):  # no ε declared and no baseline given
            raise UsageError(f"--gate: {e}") from None
        raise
