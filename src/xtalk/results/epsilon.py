"""ε bounds for the report's verdicts, as people write them.

On the command line (`xtalk report --epsilon`): ``METRIC:STATISTIC:BOUND``, e.g.
``exec:max:1.2x`` (the maximum execution time may grow by at most 20 % over solo) or
``response:p99:12ms`` (the 99th percentile of the response time stays at or under 12 ms).
In a file (`[victim]` or `[[application]]` of an experiment, `[[application]]` of a campaign)
the same three fields as a table, the one ε grammar of config/epsilon.py:
``epsilon = { metric = "exec", statistic = "max", bound = "1.2x" }``.

The verdict itself is :func:`xtalk.analysis.verdict.epsilon_verdict`; this module only reads
the bound and turns every mistake into one line naming the field and the fix.
"""

from __future__ import annotations

from typing import Mapping

from pydantic import ValidationError

from ..analysis.verdict import EpsilonSpec
from ..config.epsilon import STATISTIC, ApplicationEpsilon, CampaignEpsilon, Epsilon, VictimEpsilon
from ..errors import UsageError

FORMAT = 'METRIC:STATISTIC:BOUND, e.g. "exec:max:1.2x" or "response:p99:12ms"'


def _one_line(e: ValidationError, field: str) -> UsageError:
    """The first problem of an ε table, named from `field` (`--epsilon`, `victim.epsilon`)."""
    from ..config.experiment import error_line

    line = error_line(e, Epsilon)
    if line.startswith("(top level): "):  # a check of the whole table
        return UsageError(f"{field}: {line.removeprefix('(top level): ')}")
    return UsageError(f"{field}.{line}")


def _checked(model: type[Epsilon], spec, field: str) -> EpsilonSpec:
    """An ε table (either grammar, silently: a stored copy) → the verdict's EpsilonSpec."""
    if not isinstance(spec, Mapping):
        raise UsageError(f"{field}: expected a table {{ metric, statistic, bound }}, got {spec!r}")
    try:
        return model.model_validate(dict(spec)).spec()
    except ValidationError as e:
        raise _one_line(e, field) from None


def from_mapping(spec: Mapping, field: str = "epsilon") -> EpsilonSpec:
    """An ε from a table ``{ metric, statistic, bound }`` (a `[victim]`'s: the one grammar, or
    an old spelling, whose omitted metric and statistic meant exec and max)."""
    return _checked(VictimEpsilon, spec, field)


def parse(text: str, field: str = "--epsilon") -> EpsilonSpec:
    """An ε from ``METRIC:STATISTIC:BOUND``: the file's three keys, in the same words."""
    parts = [p.strip() for p in str(text).split(":")]
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{field}: cannot read {text!r}; write {FORMAT}")
    metric, statistic, bound = parts
    if metric not in ("exec", "response"):
        raise UsageError(f"{field}: metric {metric!r} is not 'exec' or 'response'; write {FORMAT}")
    if not STATISTIC.match(statistic):
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


def from_campaign_label(text, field: str = "label epsilon") -> EpsilonSpec:
    """An ε from a campaign run's ``epsilon`` label: the application's ε as campaign/grid.py
    stores it (JSON; ``{ metric, statistic, bound }``, or ``{ on, bound | relative, statistic }``
    before the one grammar)."""
    import json

    try:
        spec = json.loads(text) if isinstance(text, str) else dict(text)
    except (TypeError, ValueError):
        raise UsageError(f"{field}: cannot read {text!r}; expected the JSON of a campaign ε "
                         '(e.g. {"metric": "response", "statistic": "p99", "bound": "1.5x"})') from None
    return _checked(CampaignEpsilon, spec, field)


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


def from_application(spec: Mapping, field: str = "application.epsilon") -> EpsilonSpec:
    """An application's ε as the experiment copy keeps it: ``{ metric, statistic, bound }``
    (or, in results written before the one grammar, ``metric = "execution"``, ``relative``)."""
    return _checked(ApplicationEpsilon, spec, field)
