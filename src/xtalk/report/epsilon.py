"""ε bounds for the report's verdicts, as people write them.

On the command line (`xtalk report --epsilon`): ``METRIC:STATISTIC:BOUND``, e.g.
``exec:max:1.2x`` (the maximum execution time may grow by at most 20 % over solo) or
``response:p99:12ms`` (the 99th percentile of the response time stays at or under 12 ms).
In a file (experiment.json's victim, once the experiment schema carries it) the same three
fields as a table: ``{ metric = "exec", statistic = "max", bound = "1.2x" }``.

The verdict itself is :func:`xtalk.analysis.verdict.epsilon_verdict`; this module only reads
the bound and turns every mistake into one line naming the field and the fix.
"""

from __future__ import annotations

from typing import Mapping

from ..analysis.verdict import EpsilonSpec
from ..units import duration_ns
from ..errors import UsageError

FORMAT = 'METRIC:STATISTIC:BOUND, e.g. "exec:max:1.2x" or "response:p99:12ms"'


def parse_bound(bound, field: str) -> dict:
    """``"1.2x"`` → relative factor 1.2; ``"12ms"`` (or a number of ms) → absolute ns."""
    if isinstance(bound, str) and bound.strip().lower().endswith("x"):
        try:
            factor = float(bound.strip()[:-1])
        except ValueError:
            raise UsageError(f'{field}: cannot read the factor {bound!r}; write e.g. "1.2x"') from None
        if not factor > 0:
            raise UsageError(f"{field}: the factor must be positive, got {bound!r}")
        return {"relative": factor}
    try:
        return {"bound_ns": float(duration_ns(bound, field))}
    except ValueError as e:
        raise UsageError(f'{e}; or a factor of solo such as "1.2x"') from None


def from_mapping(spec: Mapping, field: str = "epsilon") -> EpsilonSpec:
    """An ε from a table with ``metric``, ``statistic`` and ``bound``."""
    if not isinstance(spec, Mapping):
        raise UsageError(f"{field}: expected a table {{ metric, statistic, bound }}, got {spec!r}")
    unknown = set(spec) - {"metric", "statistic", "bound"}
    if unknown:
        raise UsageError(f"{field}.{sorted(unknown)[0]}: unknown field; use metric, statistic and bound")
    if "bound" not in spec:
        raise UsageError(f'{field}.bound: missing; write e.g. bound = "1.2x" or bound = "12ms"')
    kw = {"metric": spec.get("metric", "exec"), "statistic": spec.get("statistic", "max")}
    kw.update(parse_bound(spec["bound"], f"{field}.bound"))
    try:
        return EpsilonSpec(**kw)
    except ValueError as e:
        # EpsilonSpec names its own field (EpsilonSpec.metric: ...); say where it came from.
        raise UsageError(f"{field}: {e}") from None


def parse(text: str, field: str = "--epsilon") -> EpsilonSpec:
    """An ε from ``METRIC:STATISTIC:BOUND``."""
    parts = [p.strip() for p in str(text).split(":")]
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{field}: cannot read {text!r}; write {FORMAT}")
    metric, statistic, bound = parts
    if metric not in ("exec", "response"):
        raise UsageError(f"{field}: metric {metric!r} is not 'exec' or 'response'; write {FORMAT}")
    if statistic not in ("max", "median", "mean") and not (statistic.startswith("p") and _is_number(statistic[1:])):
        raise UsageError(f"{field}: statistic {statistic!r} is not max, median, mean or pNN (e.g. p99); write {FORMAT}")
    return from_mapping({"metric": metric, "statistic": statistic, "bound": bound}, field)


def _is_number(s: str) -> bool:
    try:
        return 0 <= float(s) <= 100
    except ValueError:
        return False


def from_experiment(meta: dict) -> list[EpsilonSpec]:
    """ε bounds stored with the experiment (``experiment.victim.epsilon``: a table or a list)."""
    victim = ((meta or {}).get("experiment") or {}).get("victim") or {}
    eps = victim.get("epsilon")
    if eps is None:
        return []
    items = eps if isinstance(eps, list) else [eps]
    return [from_mapping(e, f"victim.epsilon[{i}]" if isinstance(eps, list) else "victim.epsilon")
            for i, e in enumerate(items)]


def describe(spec: EpsilonSpec) -> str:
    """``exec max ≤ 1.2× solo`` / ``response p99 ≤ 12 ms``."""
    bound = f"{spec.relative:g}× solo" if spec.relative is not None else f"{spec.bound_ns / 1e6:g} ms"
    return f"{spec.metric} {spec.statistic} ≤ {bound}"


#: Campaign statistics (campaign/schema.py `Epsilon.statistic`) in the verdict's own names.
_CAMPAIGN_STATISTIC = {"p999": "p99.9"}


def from_campaign_label(text, field: str = "label epsilon") -> EpsilonSpec:
    """An ε from a campaign run's ``epsilon`` label: the application's
    ``{ on, bound | relative, statistic }`` table as campaign/grid.py stores it (JSON)."""
    import json

    try:
        spec = json.loads(text) if isinstance(text, str) else dict(text)
    except (TypeError, ValueError):
        raise UsageError(f"{field}: cannot read {text!r}; expected the JSON of a campaign ε "
                         '(e.g. {"on": "response", "relative": 1.5, "statistic": "p99"})') from None
    statistic = str(spec.get("statistic", "max"))
    kw = {"metric": spec.get("on", "response"), "statistic": _CAMPAIGN_STATISTIC.get(statistic, statistic)}
    if spec.get("relative") is not None:
        kw["relative"] = float(spec["relative"])
    elif spec.get("bound") is not None:
        try:
            kw["bound_ns"] = float(duration_ns(spec["bound"], f"{field}.bound"))
        except ValueError as e:
            raise UsageError(str(e)) from None
    try:
        return EpsilonSpec(**kw)
    except ValueError as e:
        raise UsageError(f"{field}: {e}") from None


def from_labels(parameters, run_ids=None) -> list[EpsilonSpec]:
    """The distinct ε of the runs (all, or those in ``run_ids``) whose labels carry one: a
    campaign stores its application's ε on every run (label ``epsilon``)."""
    if parameters is None or len(parameters) == 0 or "epsilon" not in parameters.columns:
        return []
    p = parameters if run_ids is None else parameters[parameters["run_id"].isin(set(run_ids))]
    out: list[EpsilonSpec] = []
    for text in dict.fromkeys(t for t in p["epsilon"] if isinstance(t, str) and t):
        spec = from_campaign_label(text)
        if spec not in out:
            out.append(spec)
    return out


#: `[[application]]` ε fields (docs/experiments.md) in the verdict's own names.
_APPLICATION_METRIC = {"execution": "exec", "exec": "exec", "response": "response"}


def from_application(spec: Mapping, field: str = "application.epsilon") -> EpsilonSpec:
    """An application's ε as the experiment copy keeps it: ``{ metric = "response" |
    "execution", statistic = "p99" | "p999" | "max" | "median", bound = "12ms" }`` or
    ``{ ..., relative = 1.2 }`` (relative to the application alone)."""
    if not isinstance(spec, Mapping):
        raise UsageError(f"{field}: expected a table {{ metric, statistic, bound | relative }}, got {spec!r}")
    unknown = set(spec) - {"metric", "statistic", "bound", "relative"}
    if unknown:
        raise UsageError(f"{field}.{sorted(unknown)[0]}: unknown field; use metric, statistic and bound or relative")
    metric = _APPLICATION_METRIC.get(str(spec.get("metric", "response")))
    if metric is None:
        raise UsageError(f'{field}.metric: {spec.get("metric")!r} is not "response" or "execution"')
    statistic = str(spec.get("statistic", "max"))
    kw = {"metric": metric, "statistic": _CAMPAIGN_STATISTIC.get(statistic, statistic)}
    if (spec.get("bound") is None) == (spec.get("relative") is None):
        raise UsageError(f'{field}: give exactly one of bound (e.g. "12ms") and relative (e.g. 1.2)')
    if spec.get("relative") is not None:
        try:
            kw["relative"] = float(spec["relative"])
        except (TypeError, ValueError):
            raise UsageError(f"{field}.relative: {spec['relative']!r} is not a number; write e.g. relative = 1.2") from None
    else:
        kw.update(parse_bound(spec["bound"], f"{field}.bound"))
    try:
        return EpsilonSpec(**kw)
    except ValueError as e:
        raise UsageError(f"{field}: {e}") from None
