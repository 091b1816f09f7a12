"""The campaign file (TOML): applications, configurations, enemy scenarios, parameter grids,
two-way variations, repetitions, interleaving and exclusions. See docs/campaigns.md.

Parsing is strict, like experiment files, and every problem is one line
`FILE:LINE: field: problem; fix` (exit code 2 on the command line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from .. import limits
from ..config.experiment import Duration, EnemySpec, Name, Reservation, ScenarioSpec, TraceSpec, VictimSpec, _is_tag, _path, error_line
from ..config import deprecations
from ..config.epsilon import CampaignEpsilon
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


#: A campaign application's ε: the one ε grammar (config/epsilon.py).
Epsilon = CampaignEpsilon


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
    """A victim with its criticality level and its ε specification. The file writes it as an
    experiment's `[[application]]`: the victim's keys in the table itself; the old nested
    `victim = { ... }` table is still read (a deprecation line)."""

    #: The application's own keys; every other key of the table is its victim's.
    OWN: ClassVar[tuple[str, ...]] = ("name", "description", "criticality", "epsilon")

    name: Name
    description: str = ""
    criticality: Literal["A", "B", "C", "D"]
    epsilon: CampaignEpsilon
    victim: CampaignVictim

    @model_validator(mode="before")
    @classmethod
    def _one_grammar(cls, data, info: ValidationInfo):
        if not isinstance(data, dict):
            return data
        rest = [k for k in data if k not in cls.OWN and k != "victim"]
        if "victim" in data:
            if rest:
                raise ValueError(f"{rest[0]}: the victim's keys go in the [[application]] table itself; "
                                 "remove the 'victim' table and write its keys beside this one")
            found = deprecations.of(info)
            if found is not None:
                found.add("application.victim", "[[application]]: victim = { ... } is now the victim's keys in the "
                                                "[[application]] table itself (as in experiment files)")
            return data
        return {**{k: data[k] for k in data if k in cls.OWN}, "victim": {k: data[k] for k in rest}}


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
    # The file's grammar, not the model's: an application's victim keys sit in its own table.
    defs = schema["$defs"]
    app, victim = defs["Application"], defs.pop("CampaignVictim")
    own = {k: v for k, v in app["properties"].items() if k != "victim"}
    app["properties"] = {**own, **{k: v for k, v in victim["properties"].items() if k not in own}}
    app["required"] = [k for k in app["required"] if k != "victim"] + victim.get("required", [])
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
    found = deprecations.Deprecations()
    try:
        campaign = Campaign.model_validate(data, context=found)
    except ValidationError as e:
        where = _flat_victims(data)
        err = e.errors()[0]
        line = line_of(text, where(tuple(p for p in err["loc"] if not _is_tag(p))))
        raise UsageError(f"{f'{source}:{line}' if line else source}: {error_line(e, Campaign, where)}") from None
    deprecations.say(source, found)
    return campaign


def _flat_victims(data) -> Callable[[tuple], tuple]:
    """Where an error in `application[i].victim.KEY` is in the file: `application[i].KEY`
    when that application writes its victim's keys in its own table (the one grammar)."""
    apps = data.get("application") if isinstance(data, dict) else None
    flat = {i for i, a in enumerate(apps) if isinstance(a, dict) and "victim" not in a} if isinstance(apps, list) else set()

    def where(loc: tuple) -> tuple:
        if len(loc) > 2 and loc[0] == "application" and loc[1] in flat and loc[2] == "victim":
            return loc[:2] + loc[3:]
        return loc
    return where


def load(path: Union[str, Path]) -> tuple[Campaign, str]:
    """Read and validate a campaign file; returns the campaign and its text."""
    p = Path(path)
    text = read_text(p)
    return parse(text, str(p)), text


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2)
