"""The verdict document, RESULTS/verdicts.json: one versioned object per experiment or
campaign that says what was concluded, with what evidence, and what the terminal warned.

`xtalk run`, `xtalk campaign run`, `xtalk summary` and `xtalk report` write it; `xtalk
summary R --json` prints it; `xtalk gate` and a CI job read it (docs/report.md, "The verdict
document"). Its JSON Schema ships as xtalk/schema/verdicts.schema.json (`xtalk summary
--schema` prints it); ``schema_version`` grows when a field changes meaning or goes away.

Shape: ``provenance`` (xtalk's version and build commit, the command line, the machine's
fingerprint and a digest of its whole sysinfo document), ``cells`` (one per application ×
configuration × scenario: statistics and slowdowns with their unit and CI as fields, deadline
misses, ε verdicts with bound, observed value, ratio and CI, the cell's guards) and
``warnings``: every warning line the command printed, in order, each with its stable kind.
The summary's terminal table, summary.md and summary.json are built from the same cells.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import sys
from pathlib import Path

from .. import safepath
from ..analysis import words as vd

SCHEMA_VERSION = 1
FILE = "verdicts.json"
#: The confidence level of every CI the summary and the cells compute.
LEVEL = 0.95
#: A warning that is not a guard of analysis/guards.py: a run-time notice of `xtalk run`
#: (a failed run, a skipped configuration, a feasibility or noise warning, an enemy's note).
NOTICE_KINDS = ("run_failed", "run_note", "runs_incomplete", "configuration_skipped", "feasibility", "noise",
                "recovered", "results_unwritable", "runs_left_out", "settings_drift")


#: Fields of the environment document left out of its digest: they vary between runs of one machine.
VOLATILE = ("memory_available_bytes",)


def schema() -> dict:
    """The shipped JSON Schema of the verdict document."""
    return json.loads((Path(__file__).resolve().parents[1] / "schema" / "verdicts.schema.json").read_text())


def finite_or_none(x):
    """A finite float, or None (JSON has no NaN)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(x):
    v = finite_or_none(x)
    return None if v is None else int(v)


def warning(kind: str, message: str, configuration: str | None = None, scenario: str | None = None,
            application: str | None = None, line: str | None = None) -> dict:
    """One warning of the document: its stable kind, where, what (``line``: as printed)."""
    return {"kind": kind, "application": application, "configuration": configuration, "scenario": scenario,
            "message": message, "line": line if line is not None else message}


def printed_lines(warnings: list[dict]) -> list[str]:
    """The warnings as the terminal and summary.md print them: a warning that several scenarios
    share word for word (same kind, application, configuration and message) is one line naming
    them all ("read, chase: ..."), in the place of the first; the document keeps one per cell."""
    groups: dict[object, list[dict]] = {}
    for i, w in enumerate(warnings):
        shared = w.get("scenario") and w.get("line") == f"{w['scenario']}: {w.get('message')}"
        key = (w.get("kind"), w.get("application"), w.get("configuration"), w.get("message")) if shared else i
        groups.setdefault(key, []).append(w)
    return [ws[0]["line"] if len(ws) == 1 else f"{', '.join(w['scenario'] for w in ws)}: {ws[0]['message']}"
            for ws in groups.values()]


def provenance(command: list[str] | None = None, environment: dict | None = None) -> dict:
    """Who wrote the document: xtalk's version and build commit (provenance.py, never the
    caller's checkout), the command line, when, and the machine (fingerprint: peaks.py's
    identity of processor, caches and memory; digest: of the whole environment document)."""
    from ..provenance import build_commit
    from ..version import __version__

    machine = None
    if environment:
        from ..peaks import machine_key

        # What changes from run to run on one machine is not its configuration.
        steady = {k: v for k, v in environment.items() if k not in VOLATILE}
        canonical = json.dumps(steady, sort_keys=True, default=str).encode()
        machine = {"fingerprint": machine_key(environment), "sysinfo_digest": hashlib.sha256(canonical).hexdigest()[:16],
                   "kernel": (environment.get("kernel") or {}).get("release")}
    return {"xtalk_version": __version__, "build_commit": build_commit(),
            "command": list(command if command is not None else ["xtalk", *sys.argv[1:]]),
            "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine}


# Statistic columns of the two cell tables: `median_response_ms` (an experiment's summary) and
# `response_p99_ms` (a campaign's cells).
_STAT = (re.compile(r"^(?P<stat>median|mean|p\d+|max|min)_(?P<metric>response|exec)_(?P<unit>ms|us|ns)$"),
         re.compile(r"^(?P<metric>response|exec)_(?P<stat>median|mean|p\d+|max|min)_(?P<unit>ms|us|ns)$"))
_SLOW = (re.compile(r"^slowdown_(?P<stat>median|p\d+|max)$"),
         re.compile(r"^(?P<metric>exec|response)_slowdown_(?P<stat>median|p\d+|max)$"))


def _statistics(row: dict) -> list[dict]:
    out = []
    for k, v in row.items():
        for rx in _STAT:
            m = rx.match(k)
            if m:
                out.append({"metric": m["metric"], "statistic": m["stat"], "value": finite_or_none(v), "unit": m["unit"]})
    return out


def _slowdowns(row: dict, metric: str = "exec") -> list[dict]:
    from ..analysis import guards

    out = []
    reference = _is_reference(str(row.get("scenario")))
    for k, v in row.items():
        for rx in _SLOW:
            m = rx.match(k)
            if m:
                lo, hi = row.get(f"{k}_lo"), row.get(f"{k}_hi")
                # The summary hides a maximum's ratio from too few runs (guards.MIN_RUNS_FOR_MAX): said here as a field.
                shown = not (m["stat"] == "max" and not reference and (_int(row.get("runs_ok")) or 0) < guards.MIN_RUNS_FOR_MAX)
                out.append({"metric": m.groupdict().get("metric") or metric, "statistic": m["stat"], "ratio": finite_or_none(v),
                            "ci_low": finite_or_none(lo), "ci_high": finite_or_none(hi), "level": LEVEL if finite_or_none(lo) is not None else None,
                            "reference": reference, "shown": shown})
    return out


def _is_reference(scenario: str) -> bool:
    return scenario == "solo" or scenario.split(" · ")[-1].startswith("alone:")


def _guards(row: dict) -> list[dict]:
    return [{"kind": w["kind"], "message": w["message"]} for w in row.get("warnings") or []]


def _epsilon_record(r: dict) -> dict:
    """One ε verdict (analysis.verdict.epsilon_verdict's row) with its numbers as fields."""
    relative = r.get("bound_kind") == "relative"
    return {"bound": str(r.get("epsilon") or ""), "metric": r.get("metric"), "statistic": r.get("statistic"),
            "bound_kind": r.get("bound_kind"), "relative": finite_or_none(r.get("relative")) if relative else None,
            "bound_ms": finite_or_none(r.get("bound_ns", math.nan)) / 1e6 if finite_or_none(r.get("bound_ns")) is not None else None,
            "verdict": r.get("verdict"),
            "observed": {"value": ms_or_none(r.get("observed_ns")), "ci_low": ms_or_none(r.get("ci_low_ns")),
                         "ci_high": ms_or_none(r.get("ci_high_ns")), "unit": "ms"},
            "ratio": {"value": finite_or_none(r.get("ratio")), "ci_low": finite_or_none(r.get("ratio_ci_low")),
                      "ci_high": finite_or_none(r.get("ratio_ci_high"))} if relative else None,
            "level": finite_or_none(r.get("level")) or LEVEL}


def ms_or_none(ns):
    """Nanoseconds as milliseconds, or None where the value is missing or not finite."""
    v = finite_or_none(ns)
    return None if v is None else v / 1e6


def experiment_cells(table, epsilon=None) -> list[dict]:
    """The cells of an experiment: the summary table's rows (report/summary.summary_table)
    with the ε verdicts of results/tables.epsilon_table (``epsilon``) beside their cell."""
    eps: dict[tuple[str, str], list[dict]] = {}
    for r in ([] if epsilon is None else epsilon.to_dict("records")):
        eps.setdefault((str(r["configuration"]), str(r["scenario"])), []).append(_epsilon_record(r))
    cells = []
    for row in json.loads(table.to_json(orient="records")):
        scenario = str(row["scenario"])
        application = row.get("application")
        plain = scenario.split(" · ", 1)[-1] if application else scenario
        cells.append({
            "application": application, "configuration": str(row["configuration"]), "scenario": scenario,
            "runs": {"planned": _int(row.get("runs")), "ok": _int(row.get("runs_ok"))}, "jobs": _int(row.get("jobs")),
            "statistics": _statistics(row), "slowdowns": _slowdowns(row),
            "deadline_misses": {"count": _int(row.get("deadline_misses")), "serious": _int(row.get("serious_misses"))},
            "epsilon": eps.get((str(row["configuration"]), plain), []) if not application else [],
            "status": None, "warnings": _guards(row)})
    return cells


def campaign_cells(cells) -> list[dict]:
    """The cells of a campaign (results/campaign_cells.cell_table)."""
    out = []
    for row in json.loads(cells.to_json(orient="records")):
        eps = []
        if row.get("eps_verdict") in vd.VERDICTS:
            # The leading bound (the worst verdict of the cell's bounds): its metric, statistic,
            # observed value with CI and, for a relative bound, the ratio to solo with CI.
            relative = finite_or_none(row.get("eps_relative"))
            ratio = finite_or_none(row.get("eps_ratio"))
            eps.append({"bound": str(row.get("epsilon") or ""), "metric": row.get("eps_metric"),
                        "statistic": row.get("eps_statistic"),
                        "bound_kind": "relative" if relative is not None or ratio is not None else "absolute",
                        "relative": relative, "bound_ms": finite_or_none(row.get("eps_bound_ms")), "verdict": row["eps_verdict"],
                        "observed": {"value": finite_or_none(row.get("eps_observed_ms")), "ci_low": finite_or_none(row.get("eps_observed_lo_ms")),
                                     "ci_high": finite_or_none(row.get("eps_observed_hi_ms")), "unit": "ms"},
                        "ratio": {"value": ratio, "ci_low": finite_or_none(row.get("eps_ratio_lo")),
                                  "ci_high": finite_or_none(row.get("eps_ratio_hi"))} if ratio is not None else None,
                        "level": LEVEL})
        out.append({
            "application": row.get("application"), "configuration": str(row.get("configuration") or ""),
            "scenario": str(row["scenario"]), "group": row.get("group"),
            "runs": {"planned": _int(row.get("runs")), "ok": _int(row.get("runs_ok"))}, "jobs": _int(row.get("jobs")),
            "statistics": _statistics(row), "slowdowns": _slowdowns(row),
            "deadline_misses": {"count": _int(row.get("deadline_misses")), "serious": _int(row.get("serious_misses"))},
            "epsilon": eps, "status": row.get("status"), "warnings": _guards(row)})
    return out


def document(kind: str, name: str, path: Path, cells: list[dict], warnings: list[dict], *,
             environment: dict | None = None, command: list[str] | None = None) -> dict:
    """The verdict document (its fields: the module's docstring and the schema)."""
    verdicts = [e["verdict"] for c in cells for e in c["epsilon"]]
    return {"schema_version": SCHEMA_VERSION, "kind": kind, "name": name, "results": str(path),
            "provenance": provenance(command, environment), "cells": cells,
            "epsilon": {v: verdicts.count(v) for v in vd.VERDICTS},
            "warnings": warnings}


def write(path: Path, doc: dict) -> Path:
    """RESULTS/verdicts.json (no link followed, safepath)."""
    target = Path(path) / FILE
    safepath.write_text(target, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return target


def environment_of(runs) -> dict | None:
    """The first run's environment document (the machine the runs were measured on)."""
    from ..store import run_outcomes

    for meta in run_outcomes(runs) if hasattr(runs, "get") else []:
        if meta is not None and meta.environment is not None:
            return meta.environment.model_dump()
    return None


_UNIT = re.compile(r"^(?P<name>.+)_(?P<unit>ms|us|ns|s)$")


def rows_with_units(table) -> list[dict]:
    """A result table's rows as the document writes numbers: a column ``<name>_<unit>``
    (``resp_p50_ms``, ``p99_us``) becomes ``<name>: {value, unit}``; NaN becomes null."""
    out = []
    for row in json.loads(table.to_json(orient="records")):
        rec = {}
        for k, v in row.items():
            m = _UNIT.match(k)
            if m and (v is None or isinstance(v, (int, float))):
                rec[m["name"]] = {"value": finite_or_none(v), "unit": m["unit"]}
            else:
                rec[k] = v
        out.append(rec)
    return out


def table_document(kind: str, path: Path, table, extra: dict | None = None) -> dict:
    """The `--json` of a result command (`latency`, `tasks`, `overheads`, `containment`): the
    verdict document's header (schema_version, kind, results, provenance) and the command's
    table as ``rows``, numbers with their unit as fields."""
    return {"schema_version": SCHEMA_VERSION, "kind": kind, "results": str(path), "provenance": provenance(),
            "rows": rows_with_units(table), **(extra or {})}
