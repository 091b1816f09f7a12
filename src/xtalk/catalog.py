"""The agent's catalog: every enemy kind and every victim body with its parameters (type,
bounds, default, unit, doc) and the plan's limits, as `xtalk-agent catalog --json` prints it.

The agent is its one source (agent/src/enemies/<kind>.rs, agent/src/victims/<body>.rs); `src/xtalk/schema/catalog.json`
is that output checked in (`make catalog` rewrites it, a test keeps it current), so a host
driving boards over SSH validates without a local agent. `XTALK_CATALOG=FILE` names another
catalog (an agent built with more enemies). The plan's load models (plan.py), the experiment
file's enemy keys (config/experiment.py, config/expand.py) and docs/enemies.md's parameter
tables are all made from it: the host holds no per-kind code. The plan's body models, the
work knob calibration sets (calibrate_work.py) and the report sections a body shows
(report/victim_kinds.py) are made from the bodies' entries; an enemy's `class` (timing or
fault) says which enemies break something rather than slow the victim.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Optional

#: The catalog layout this host reads (the agent's CATALOG_VERSION).
CATALOG_VERSION = 1
#: Names another catalog file (the output of `xtalk-agent catalog --json`).
ENV_VAR = "XTALK_CATALOG"


@dataclass(frozen=True)
class Param:
    """One parameter of an enemy kind, as the agent declares it."""

    name: str
    type: str  # u64, bool, str, strings, choice, json (a structured value of `shape`)
    doc: str
    required: bool
    default: Any = None
    choices: Optional[tuple[str, ...]] = None
    min: Optional[int] = None
    max: Optional[int] = None
    multiple_of: Optional[int] = None
    unit: str = ""
    #: What an experiment file gets when it leaves the parameter out (an expression).
    file_default: Optional[str] = None
    #: A count the file may give as `bytes` instead: bytes / this parameter.
    per_bytes: Optional[str] = None
    #: Another count this one may not exceed (chase's `chains`: one walker per node at most).
    at_most: Optional[str] = None
    #: Choice -> the architectures it exists on (`uname -m` names), for choices that exist
    #: on some only (the store methods); a choice not listed exists everywhere.
    choice_arch: Optional[dict] = None
    #: A `json` parameter's shape ("map", "tasks", "jobs_from"): the plan models it (plan.py).
    shape: Optional[str] = None

    def choices_on(self, arch: Optional[str]) -> Optional[tuple[str, ...]]:
        """The choices that exist on ``arch`` (every choice when it is None: unknown)."""
        if self.choices is None or not arch or not self.choice_arch:
            return self.choices
        return tuple(c for c in self.choices if arch in self.choice_arch.get(c, (arch,)))

    @property
    def file_key(self) -> str:
        """Its key in an experiment file: a duration `X_ns` is written `X` ("50us")."""
        return self.name.removesuffix("_ns") if self.unit == "ns" else self.name

    def bounds(self) -> str:
        """The declared range in words, e.g. `1..64`, `>= 4096`."""
        if self.min is not None and self.max is not None:
            text = f"{self.min}..{self.max}"
        elif self.min is not None:
            text = f">= {self.min}"
        elif self.max is not None:
            text = f"<= {self.max}"
        else:
            text = ""
        if self.multiple_of:
            text = f"{text}, multiple of {self.multiple_of}" if text else f"multiple of {self.multiple_of}"
        return text


@dataclass(frozen=True)
class Kind:
    """One enemy kind: its parameters, counter unit and memory footprint."""

    name: str
    doc: str
    unit: str
    params: tuple[Param, ...]
    footprint_factor: int
    footprint_params: tuple[str, ...]
    small_pages: bool
    #: The machine resource its work loads (None: none named); peaks.py sets its rate against it.
    channel: Optional[str] = None
    #: "timing" (slows the victim) or "fault" (breaks something it needs: memory,
    #: descriptors, the process table, a file system): a fault's counter is not a rate.
    klass: str = "timing"

    @property
    def fault(self) -> bool:
        return self.klass == "fault"

    def param(self, name: str) -> Optional[Param]:
        return next((p for p in self.params if p.name == name), None)

    def file_keys(self) -> dict[str, Param]:
        """The keys an experiment file may give for this kind, and the parameter of each
        (`bytes` for a count given as a size: that count's parameter)."""
        keys = {p.file_key: p for p in self.params}
        for p in self.params:
            if p.per_bytes and "bytes" not in keys:
                keys["bytes"] = p
        return keys

    def footprint(self, params: dict) -> int:
        """Bytes of memory the enemy allocates with these (complete) parameters."""
        n = self.footprint_factor
        for name in self.footprint_params:
            n *= int(params[name])
        return n


#: The report sections of a body's execution times (agent/src/victims/body.rs EXECUTION).
EXECUTION = ("slowdown", "distributions", "series", "spikes", "pwcet", "wakeup")


@dataclass(frozen=True)
class Body:
    """One victim body: its parameters, work knob, footprint and report sections."""

    name: str
    doc: str
    params: tuple[Param, ...]
    #: The parameter that sets one job's work, calibrated to a target utilization (None: not calibrated).
    work: Optional[str]
    footprint_factor: int
    footprint_params: tuple[str, ...]
    #: The report sections that apply ("slowdown", "distributions", ..., and its own view:
    #: "latency", "tasks", "aocs", "probes"); the others are hidden for it.
    sections: tuple[str, ...]
    #: How its process runs: "jobs" (periodic jobs the agent times), "own" (the body runs the
    #: process: a command's exec, a task set's threads) or "watch" (a process already running).
    run: str
    #: The parameter giving the capacity of probes.bin (a program writing probes), if any.
    probes: Optional[str] = None

    def param(self, name: str) -> Optional[Param]:
        return next((p for p in self.params if p.name == name), None)

    @property
    def periodic(self) -> bool:
        """Its jobs are computations the agent releases and times (not a program run once,
        a task set or a watched process)."""
        return self.run == "jobs"

    @property
    def plain(self) -> bool:
        """Periodic jobs and nothing but their execution times to report (no view of its
        own: not latency's empty jobs, not AOCS's comparer)."""
        return self.periodic and set(self.sections) <= set(EXECUTION)


@dataclass(frozen=True)
class Catalog:
    version: int
    limits: dict[str, Any]
    kinds: dict[str, Kind]
    raw: dict
    #: Victim bodies (empty in a catalog from an agent that declared none).
    bodies: dict[str, Body] = field(default_factory=dict)


def _param(d: dict) -> Param:
    return Param(name=d["name"], type=d["type"], doc=d["doc"], required=d["required"], default=d.get("default"),
                 choices=tuple(d["choices"]) if d.get("choices") else None, min=d.get("min"), max=d.get("max"),
                 multiple_of=d.get("multiple_of"), unit=d.get("unit", ""), file_default=d.get("file_default"),
                 per_bytes=d.get("per_bytes"), at_most=d.get("at_most"),
                 choice_arch={c: tuple(a) for c, a in d["choice_arch"].items()} if d.get("choice_arch") else None,
                 shape=d.get("shape"))


def parse(doc: dict, source: str = "catalog") -> Catalog:
    """A catalog document (the agent's JSON) as objects; ValueError when its layout is not
    one this host reads."""
    if doc.get("version") != CATALOG_VERSION:
        raise ValueError(f"{source}: catalog version {doc.get('version')!r}; this host reads version {CATALOG_VERSION}")
    kinds = {}
    for k in doc["enemies"]:
        kinds[k["kind"]] = Kind(name=k["kind"], doc=k["doc"], unit=k["unit"], params=tuple(_param(p) for p in k["params"]),
                                footprint_factor=k["footprint"]["factor"], footprint_params=tuple(k["footprint"]["params"]),
                                small_pages=k.get("small_pages", False), channel=k.get("channel"),
                                klass=k.get("class", "timing"))
    bodies = {}
    for b in doc.get("bodies", []):
        bodies[b["body"]] = Body(name=b["body"], doc=b["doc"], params=tuple(_param(p) for p in b["params"]), work=b.get("work"),
                                 footprint_factor=b["footprint"]["factor"], footprint_params=tuple(b["footprint"]["params"]),
                                 sections=tuple(b["sections"]), run=b["run"], probes=b.get("probes"))
    return Catalog(version=doc["version"], limits=dict(doc["limits"]), kinds=kinds, raw=doc, bodies=bodies)


def checked_in_text() -> str:
    """The catalog shipped in the package (src/xtalk/schema/catalog.json)."""
    return resources.files("xtalk").joinpath("schema/catalog.json").read_text()


@lru_cache(maxsize=None)
def _load(path: Optional[str]) -> Catalog:
    if path:
        try:
            with open(path) as f:
                return parse(json.load(f), path)
        except (OSError, ValueError, KeyError) as e:
            # Read at import time by the models: one line and exit code 2 (bad input), here.
            print(f"xtalk: {ENV_VAR}={path}: not an agent catalog ({e}); write it with `xtalk-agent catalog --json`",
                  file=sys.stderr)
            raise SystemExit(2) from None
    return parse(json.loads(checked_in_text()), "src/xtalk/schema/catalog.json")


def current() -> Catalog:
    """The catalog in use: $XTALK_CATALOG, else the checked-in one."""
    return _load(os.environ.get(ENV_VAR) or None)


def kind(name: str) -> Kind:
    """The kind named `name` (KeyError when the catalog has none)."""
    return current().kinds[name]


def kind_names() -> list[str]:
    return list(current().kinds)


def fault_kinds() -> frozenset[str]:
    """The enemy kinds of class `fault` (they break something the victim needs)."""
    return frozenset(k.name for k in current().kinds.values() if k.fault)


def body(name: str) -> Body:
    """The victim body named `name` (KeyError when the catalog has none)."""
    return current().bodies[name]


def body_names() -> list[str]:
    return list(current().bodies)


def limit(name: str):
    """One of the plan's limits the agent exports (max_jobs, max_enemies, ...)."""
    return current().limits[name]


# docs/enemies.md: the parameter tables between these markers are made from the catalog.
DOC_BEGIN = "<!-- catalog:begin (generated by `make docs` from `xtalk-agent catalog --json`; do not edit) -->"
DOC_END = "<!-- catalog:end -->"


def _default_words(p: Param) -> str:
    if p.file_default is not None:
        return f"`{p.file_default}`" + (" bytes" if p.per_bytes else "")
    if p.required:
        return "required"
    if p.default is None:
        return "unset"
    return f"`{json.dumps(p.default)}`"


def _choice_words(p: Param, choice: str) -> str:
    """`stnp` (aarch64): a choice with the architectures it exists on, where not all."""
    arch = (p.choice_arch or {}).get(choice)
    return f"`{choice}` ({', '.join(arch)})" if arch else f"`{choice}`"


def parameter_tables(cat: Optional[Catalog] = None) -> str:
    """Markdown: one table per kind of its parameters, in the experiment file's terms."""
    cat = cat or current()
    out = [DOC_BEGIN, ""]
    for k in cat.kinds.values():
        out.append(f"#### `{k.name}`: {k.doc} (counts {k.unit}{'; class fault' if k.fault else ''})")
        out.append("")
        if not k.params:
            out += ["No parameters.", ""]
            continue
        out += ["| key | type | default | range | unit | meaning |", "|---|---|---|---|---|---|"]
        for p in k.params:
            key = f"`{p.file_key}`" + (" or `bytes`" if p.per_bytes else "")
            typ = "one of " + ", ".join(_choice_words(p, c) for c in p.choices) if p.type == "choice" else {
                "u64": "size" if p.unit == "bytes" else "duration" if p.unit == "ns" else "integer",
                "bool": "true / false", "str": "string", "strings": "list of strings"}[p.type]
            rng = p.bounds()
            if p.unit == "ns" and rng:
                rng += " ns"
            out.append(f"| {key} | {typ} | {_default_words(p)} | {rng} | {p.unit} | {p.doc} |")
        out.append("")
    out.append(DOC_END)
    return "\n".join(out)


def render_doc(text: str, cat: Optional[Catalog] = None) -> str:
    """`text` (docs/enemies.md) with its generated block made anew from the catalog."""
    start, end = text.index(DOC_BEGIN), text.index(DOC_END) + len(DOC_END)
    return text[:start] + parameter_tables(cat) + text[end:]


if __name__ == "__main__":  # python -m xtalk.catalog --docs docs/enemies.md (make docs)
    if sys.argv[1:2] != ["--docs"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m xtalk.catalog --docs docs/enemies.md")
    path = sys.argv[2]
    with open(path) as f:
        old = f.read()
    new = render_doc(old)
    if new != old:
        with open(path, "w") as f:  # not a results path: the docs of a checkout (make docs)
            f.write(new)
