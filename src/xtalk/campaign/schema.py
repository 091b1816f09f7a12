"""The campaign file (TOML): applications, configurations, enemy scenarios, parameter grids,
two-way variations, repetitions, interleaving and exclusions. See docs/campaigns.md.

Parsing is strict, like experiment files, and every problem is one line
`FILE:LINE: field: problem; fix` (exit code 2 on the command line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import limits
from ..config.experiment import Duration, EnemySpec, Name, Reservation, ScenarioSpec, TraceSpec, VictimSpec, _is_tag, _path, error_line
from ..config.tomlfile import parse_toml, read_text
from ..errors import UsageError
from .detect import is_campaign_file  # noqa: F401 (where it was first defined)
from .lines import line_of

NAME = r"^[A-Za-z0-9_.+-]+$"
#: Where a grid axis may point: a victim field, a field of every enemy, or the settle time.
AXIS_PREFIXES = ("victim.", "enemy.")
AXIS_TOP = ("settle",)
#: Enemy fields that receive a two-way cell's per-enemy share of the total.
SHARE_FIELDS = ("intensity", "reservation.runtime", "bytes", "elements")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Epsilon(_Strict):
    """The acceptable interference: a bound on execution or response time, absolute
    (`bound`) or relative to the same application running solo (`relative` × solo)."""

    on: Literal["exec", "response"] = "response"
    bound: Optional[Duration] = None
    relative: Optional[float] = Field(default=None, gt=1.0, le=1000.0)
    statistic: Literal["max", "p99", "p999", "mean"] = "max"

    @model_validator(mode="after")
    def _one_bound(self):
        if (self.bound is None) == (self.relative is None):
            raise ValueError("give exactly one of 'bound' (e.g. \"2ms\") or 'relative' (e.g. 1.2 × solo)")
        if self.bound is not None:  # read as the summary will read it, at plan time (as an experiment's ε)
            from ..units import duration_ns

            duration_ns(self.bound, "bound")
        return self


class CampaignVictim(VictimSpec):
    """A campaign application's victim: a command keeps a long placeholder period (no pilot
    run measures it in a campaign; pilot.py)."""

    COMMAND_PERIOD: ClassVar[str] = "60s"

    @model_validator(mode="after")
    def _no_victim_epsilon(self):
        if self.epsilon is not None:
            raise ValueError("epsilon: a campaign gives ε on the application (its 'epsilon'), not its victim; move it")
        return self


class Application(_Strict):
    """A victim with its criticality level and its ε specification."""

    name: Name
    description: str = ""
    criticality: Literal["A", "B", "C", "D"]
    epsilon: Epsilon
    victim: CampaignVictim


class Configuration(_Strict):
    """A named placement/policy variant applied to every application's victim."""

    name: Name
    description: str = ""
    cpus: Optional[Union[int, str, list[int]]] = None
    policy: Optional[Literal["other", "fifo", "rr", "deadline"]] = None
    priority: Optional[int] = Field(default=None, ge=1, le=99)
    nice: Optional[int] = Field(default=None, ge=-20, le=19)
    reservation: Optional[Reservation] = None
    lock_memory: Optional[bool] = None
    huge_pages: Optional[bool] = None

    def overrides(self) -> dict:
        """The victim fields this configuration sets."""
        return self.model_dump(exclude_unset=True, exclude={"name", "description"})


class Grid(_Strict):
    """Parameter variants: `product` of the axes, `zip` of equally long axes, or an explicit
    `list` of points. Axis keys: `victim.<field>`, `enemy.<field>` (every enemy), `settle`."""

    name: Optional[str] = Field(default=None, max_length=limits.MAX_NAME, pattern=NAME)
    mode: Literal["product", "zip", "list"] = "product"
    axes: dict[str, list[Any]] = {}
    points: list[dict[str, Any]] = Field(default=[], max_length=limits.MAX_GRID_POINTS)

    @model_validator(mode="after")
    def _shape(self):
        keys = list(self.axes) + [k for p in self.points for k in p]
        for k in keys:
            if not (k.startswith(AXIS_PREFIXES) or k in AXIS_TOP):
                raise ValueError(f"axis '{k}' is not a victim or enemy field; write e.g. \"victim.bytes\" or \"enemy.order\"")
        if self.mode == "list":
            if self.axes or not self.points:
                raise ValueError("mode 'list' takes 'points' (a list of tables), not 'axes'")
        else:
            if self.points or not self.axes:
                raise ValueError(f"mode '{self.mode}' takes 'axes' (field = [values]), not 'points'")
            if any(len(v) == 0 for v in self.axes.values()):
                raise ValueError("an axis has no values; give at least one")
            if self.mode == "zip" and len({len(v) for v in self.axes.values()}) > 1:
                raise ValueError("mode 'zip' needs axes of equal length; use 'product' to combine them")
        if self.size() > limits.MAX_GRID_POINTS:
            raise ValueError(f"the grid has {self.size()} points, above the limit of {limits.MAX_GRID_POINTS}; "
                             f"use fewer values per axis or split the campaign")
        return self

    def size(self) -> int:
        """Number of points, counted without building them."""
        if self.mode == "list":
            return len(self.points)
        if self.mode == "zip":
            return min(len(v) for v in self.axes.values())
        return math.prod(len(v) for v in self.axes.values())


class TwoWay(_Strict):
    """Seed 000 §6.5.1: (number of enemies) × (total resource, split evenly among them).

    `share` names the enemy field that receives total / count: `intensity` (CPU time per
    victim period, as the enemy's duty cycle), `reservation.runtime` (CPU time per period
    through SCHED_DEADLINE, the seed's pi benchmarks), `bytes` or `elements` (memory
    footprint). Infeasible cells are excluded and listed by `plan`."""

    name: Name
    description: str = ""
    enemy: EnemySpec
    share: Literal["intensity", "reservation.runtime", "bytes", "elements"]
    counts: list[Annotated[int, Field(ge=1, le=limits.MAX_ENEMIES)]] = Field(min_length=1, max_length=limits.MAX_SCENARIOS)
    totals: list[Duration] = Field(min_length=1, max_length=limits.MAX_SCENARIOS)

    @model_validator(mode="before")
    @classmethod
    def _placeholder_share(cls, data):
        # The share field is filled per cell; a placeholder lets the enemy template validate.
        if isinstance(data, dict) and isinstance(data.get("enemy"), dict):
            enemy, share = dict(data["enemy"]), data.get("share")
            if share in ("bytes", "elements") and share not in enemy:
                enemy[share] = 4096 if share == "bytes" else 2
            if share == "reservation.runtime" and enemy.get("policy") == "deadline" and "reservation" not in enemy:
                enemy["reservation"] = {"runtime": "1ms"}
            data = {**data, "enemy": enemy}
        return data

    @model_validator(mode="after")
    def _share_fits(self):
        if any(c < 1 for c in self.counts):
            raise ValueError("counts are numbers of enemies (1 or more)")
        if self.share == "reservation.runtime" and self.enemy.policy != "deadline":
            raise ValueError("share 'reservation.runtime' needs enemy policy \"deadline\" (CPU time per period)")
        # A `bytes` or `elements` share on a kind without that parameter is refused by the
        # enemy's own catalog check (the placeholder above puts the key there).
        return self


class Campaign(_Strict):
    """A whole campaign; `expand_campaign` turns it into an ordered list of runs."""

    name: Name
    description: str = ""
    repetitions: int = Field(default=3, ge=1, le=limits.MAX_REPETITIONS)
    seed: int = Field(default=0, ge=0, description="seed of the interleaving order")
    interleave: Literal["random", "ordered"] = Field(
        default="random", description="random: every repetition runs all cells in a shuffled order; ordered: cell by cell")
    settle: Duration = "200ms"
    timeout: Optional[Duration] = None
    results: str = "results"
    settings: Optional[str] = Field(default=None, description="a declared-settings file (TOML, relative to this file): "
                                    "values every target must hold, with a rationale each (docs/settings.md)")
    application: list[Application] = Field(min_length=1, max_length=limits.MAX_SCENARIOS)
    configuration: list[Configuration] = Field(default=[], max_length=limits.MAX_CONFIGURATIONS)
    scenario: list[ScenarioSpec] = Field(default=[], max_length=limits.MAX_SCENARIOS)
    two_way: list[TwoWay] = Field(default=[], max_length=limits.MAX_SCENARIOS)
    grid: list[Grid] = Field(default=[], max_length=limits.MAX_GRID_POINTS)
    exclude: list[dict[str, Union[str, int]]] = Field(
        default=[], description="tables of labels; a run whose labels match every key of one table is not run")
    trace: Optional[TraceSpec] = None
    kernels: list[Name] = Field(
        default=[], max_length=16,
        description="a lab campaign's kernel axis: every run once per kernel, labelled `kernel`; a labgrid board boots "
                    "it (LG_KERNEL in its environment file, docs/lab.md)")

    @model_validator(mode="after")
    def _size(self):
        # Counted before anything is built: cells × scenarios × repetitions.
        points = max(1, sum(g.size() for g in self.grid))
        if points > limits.MAX_GRID_POINTS:
            raise ValueError(f"grid: the grids have {points} points together, above the limit of {limits.MAX_GRID_POINTS}; "
                             f"use fewer values or split the campaign")
        scenarios = 1 + len(self.scenario) + sum(len(t.counts) * len(t.totals) for t in self.two_way)
        plans = len(self.application) * max(1, len(self.configuration)) * points * scenarios
        if plans > limits.MAX_PLANS:
            raise ValueError(f"grid: applications × configurations × grid points × scenarios make {plans} distinct runs to "
                             f"check, above the limit of {limits.MAX_PLANS}; use fewer grid points or split the campaign")
        runs = plans * self.repetitions
        if runs > limits.MAX_RUNS:
            raise ValueError(f"repetitions: applications × configurations × grid points × scenarios × repetitions make "
                             f"{runs} runs, above the limit of {limits.MAX_RUNS}; lower them or split the campaign")
        return self

    @model_validator(mode="after")
    def _unique(self):
        for what, items in (("application", self.application), ("configuration", self.configuration),
                            ("scenario", self.scenario), ("two_way", self.two_way)):
            names = [i.name for i in items]
            for n in names:
                if names.count(n) > 1:
                    raise ValueError(f"{what} name '{n}' is used twice; give each its own name")
        return self

    def configurations(self) -> list[Configuration]:
        """The configurations, or one named `default` that changes nothing."""
        return self.configuration or [Configuration(name="default")]


def json_schema() -> dict:
    """JSON Schema of campaign files, for editors (e.g. Taplo / Even Better TOML)."""
    schema = Campaign.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://xtalk.dev/schema/campaign-v1.json"
    schema["title"] = "xtalk campaign"
    return schema


def locate(source: str, text: str, loc: tuple, message: str) -> str:
    """`SOURCE:LINE: field: message` with the line of `loc` in `text` when it is found."""
    line = line_of(text, tuple(p for p in loc if not str(p).startswith("function-")))
    where = f"{source}:{line}" if line else source
    return f"{where}: {_path(loc)}: {message}"


def parse(text: str, source: str) -> Campaign:
    """Validate a campaign text; UsageError with one line naming file, line, field, fix."""
    data = parse_toml(text, source)
    try:
        return Campaign.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        line = line_of(text, tuple(p for p in err["loc"] if not _is_tag(p)))
        raise UsageError(f"{f'{source}:{line}' if line else source}: {error_line(e, Campaign)}") from None


def load(path: Union[str, Path]) -> tuple[Campaign, str]:
    """Read and validate a campaign file; returns the campaign and its text."""
    p = Path(path)
    text = read_text(p)
    return parse(text, str(p)), text


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2)
