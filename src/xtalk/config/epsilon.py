"""The one ε grammar: the interference a measured process may show, written the same way in
an experiment's `[victim]`, an experiment's or a campaign's `[[application]]` and on the
command line (`xtalk report --epsilon METRIC:STATISTIC:BOUND`):

    epsilon = { metric = "exec" | "response", statistic = "max" | "p99" | ..., bound = "12ms" | "1.2x" }

`bound` is a duration (absolute) or a factor of the same statistic alone ("1.2x"). The three
keys are the command line's three fields, in its words, and all three are written.

Older files spelled it three ways; each old spelling still loads to the same model and, when
the caller passes a collector (config/deprecations.py) as the validation context, is said once
per file (docs/experiments.md, "ε"): `on` (campaigns) is `metric`; `metric = "execution"` is
`"exec"`; `relative = 1.2` is `bound = "1.2x"`; `statistic = "p999"` is `"p99.9"`; a table
without `metric` or `statistic` took a default that depended on where it was written.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from . import deprecations

#: The statistics an ε may bound (analysis/stats.py reads the same names).
STATISTIC = re.compile(r"^(max|median|mean|p(100|\d{1,2}(\.\d+)?))$")


def factor_text(factor: float) -> str:
    """A relative bound in its one spelling (`1.5x`, `2x`)."""
    return f"{float(factor):.12g}x"


def read_factor(bound) -> float | None:
    """The factor of a relative bound ("1.2x"), None for an absolute one; ValueError when unreadable."""
    if isinstance(bound, str) and bound.strip().lower().endswith("x"):
        try:
            factor = float(bound.strip()[:-1])
        except ValueError:
            raise ValueError(f"bound: cannot read the factor {bound!r}; write e.g. \"1.2x\"") from None
        if not factor > 0:  # also refuses nan
            raise ValueError(f"bound: the factor must be positive, got {bound!r}; write e.g. \"1.2x\"")
        if factor > 1000:
            raise ValueError(f"bound: the factor {bound!r} is above 1000; write e.g. \"1.2x\"")
        return factor
    return None


class Epsilon(BaseModel):
    """`epsilon = { metric, statistic, bound }` (the module's docstring). Subclasses differ
    only in what an old table that omitted `metric` or `statistic` meant where it was written."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: The defaults the old grammar of this place gave an omitted `metric` and `statistic`.
    LEGACY_DEFAULTS: ClassVar[dict] = {"metric": "exec", "statistic": "max"}
    #: Where this ε is written, for the deprecation lines.
    PLACE: ClassVar[str] = "[victim]"

    metric: Literal["exec", "response"] = Field(description="exec (end − start) or response (end − release)")
    statistic: str = Field(description="max, median, mean or pNN (e.g. p99, p99.9)")
    bound: Union[float, str] = Field(description="a duration (\"12ms\") or a factor of the same statistic alone (\"1.2x\")")

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data, info: ValidationInfo):
        if not isinstance(data, dict):
            return data
        seen = deprecations.of(info)
        # A stored copy of the old models holds the unused one of bound/relative as None (TOML has no None).
        data = {k: v for k, v in data.items() if v is not None}

        def old(kind, line):
            if seen is not None:
                seen.add(kind, line)

        if "on" in data and "metric" not in data:
            old("epsilon.on", f'epsilon: on = "{data["on"]}" is now metric = "{data["on"]}" (one ε grammar)')
            data["metric"] = data.pop("on")
        if data.get("metric") == "execution":
            old("epsilon.execution", 'epsilon: metric = "execution" is now metric = "exec" (as on the command line)')
            data["metric"] = "exec"
        if "relative" in data and "bound" in data:
            raise ValueError("give exactly one of 'bound' (e.g. \"12ms\" or \"1.2x\") and the old 'relative'; "
                             "write the factor as bound = \"1.2x\"")
        if "relative" in data:
            r = data.pop("relative")
            if isinstance(r, (int, float)) and not isinstance(r, bool):
                old("epsilon.relative", f'epsilon: relative = {r} is now bound = "{factor_text(r)}" (a factor of alone)')
                data["bound"] = factor_text(r)
            else:
                raise ValueError(f"relative: {r!r} is not a number; write bound = \"1.2x\" (a factor of alone)")
        if data.get("statistic") == "p999":
            old("epsilon.p999", 'epsilon: statistic = "p999" is now statistic = "p99.9"')
            data["statistic"] = "p99.9"
        for key in ("metric", "statistic"):
            if key not in data:
                value = cls.LEGACY_DEFAULTS[key]
                old(f"epsilon.no-{key}", f"epsilon: a table without '{key}' meant {key} = \"{value}\" in {cls.PLACE}; "
                                        f"write {key} = \"{value}\" (every ε now gives metric, statistic and bound)")
                data[key] = value
        return data

    @field_validator("statistic")
    @classmethod
    def _statistic(cls, v: str) -> str:
        if not STATISTIC.match(v):
            raise ValueError(f"{v!r} is not max, median, mean or pNN (e.g. \"p99\", \"p99.9\"); write e.g. statistic = \"max\"")
        return v

    @field_validator("bound")
    @classmethod
    def _bound(cls, v):
        if isinstance(v, bool):
            raise ValueError(f"{v!r} is not a bound; write a duration (\"12ms\") or a factor of alone (\"1.2x\")")
        try:
            factor = read_factor(v)
        except ValueError as e:
            raise ValueError(str(e).removeprefix("bound: ")) from None
        if factor is not None:
            return factor_text(factor)
        from ..units import duration_ns

        try:
            duration_ns(v, "bound")
        except ValueError as e:
            raise ValueError(f"{str(e).removeprefix('bound: ')}; or a factor of alone such as \"1.2x\"") from None
        return v

    def relative(self) -> float | None:
        """The factor of a relative bound, None for an absolute one."""
        return read_factor(self.bound)

    def spec(self):
        """The verdict's `analysis.verdict.EpsilonSpec` of this bound."""
        from ..analysis.verdict import EpsilonSpec
        from ..units import duration_ns

        factor = self.relative()
        kw = {"relative": factor} if factor is not None else {"bound_ns": float(duration_ns(self.bound, "bound"))}
        return EpsilonSpec(metric=self.metric, statistic=self.statistic, **kw)


class VictimEpsilon(Epsilon):
    """An experiment `[victim]`'s ε."""


class ApplicationEpsilon(Epsilon):
    """An experiment `[[application]]`'s ε (its old tables meant response p99 when silent)."""

    LEGACY_DEFAULTS: ClassVar[dict] = {"metric": "response", "statistic": "p99"}
    PLACE: ClassVar[str] = "an experiment's [[application]]"


class CampaignEpsilon(Epsilon):
    """A campaign `[[application]]`'s ε (its old tables meant response max when silent)."""

    LEGACY_DEFAULTS: ClassVar[dict] = {"metric": "response", "statistic": "max"}
    PLACE: ClassVar[str] = "a campaign's [[application]]"
