"""The host's layers: no import cycle in src/xtalk (between modules, nor between the units of
the layer list), and no import from a lower layer to a higher one. The order is the fenced
`layers` block of docs/architecture.md; every import counts, function-local ones included
(they still make the importer depend on the imported). And who reads run.json: only the units
of the fenced `run-json` block (results, store, and outcome that defines the reader), every
other module through them, but for the few named in STILL_READING. Pure and fast: reads
source only."""

from __future__ import annotations

import ast
import functools
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"


# -- the graph --------------------------------------------------------------------------------
def modules(src: Path, package: str = "xtalk") -> dict[str, Path]:
    """Every module of `package` under `src`, by dotted name (a package by its own name)."""
    out = {}
    for p in (src / package).rglob("*.py"):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def module_edges(module: str, path: Path, mods: dict[str, Path]) -> dict[str, int]:
    """{module of the package that `module` imports: line of the first such import}."""
    is_package = path.name == "__init__.py"
    edges: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _target(module, is_package, node)
            # `from pkg import mod` depends on the module; `from mod import name` on mod.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        for name in names:
            while name and name not in mods and "." in name:  # `import xtalk.a.b` -> xtalk.a.b
                name = name.rpartition(".")[0]
            if name in mods and name != module:
                edges.setdefault(name, node.lineno)
    return edges


def import_graph(src: Path, package: str = "xtalk") -> dict[str, dict[str, int]]:
    """module -> {imported module of the package: line of the first such import}."""
    mods = modules(src, package)
    return {m: module_edges(m, path, mods) for m, path in mods.items()}


@functools.lru_cache(maxsize=1)
def real_graph() -> dict[str, dict[str, int]]:
    return import_graph(SRC)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


# -- the layers -------------------------------------------------------------------------------
def layers_from(text: str) -> list[list[str]]:
    """The layers of the first ```layers block, bottom first: one layer a line, its units
    (packages or modules, relative to xtalk; `xtalk` is the package's own door) by commas."""
    block = re.search(r"^```layers\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/architecture.md has no ```layers block"
    out = []
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append([n.strip() for n in line.split(",") if n.strip()])
    return out


def unit_of(module: str, units: set[str], package: str = "xtalk") -> str | None:
    """The most specific unit that holds `module` (xtalk.campaign.cli -> campaign)."""
    rel = module.split(".")[1:]
    for k in range(len(rel), 0, -1):
        if ".".join(rel[:k]) in units:
            return ".".join(rel[:k])
    return package if not rel and package in units else None


def problems(graph: dict[str, dict[str, int]], layers: list[list[str]], package: str = "xtalk") -> list[str]:
    """Every module cycle, unit cycle, module outside the layers and import from a lower layer
    to a higher one, one line each (empty: the layering holds)."""
    level = {u: i for i, layer in enumerate(layers) for u in layer}
    out = [f"listed twice in the layers: {u}" for layer in layers for u in layer if sum(x.count(u) for x in layers) > 1]
    out += [f"import cycle between modules: {' <-> '.join(c)}" for c in cycles({m: set(e) for m, e in graph.items()})]
    unit = {m: unit_of(m, set(level), package) for m in graph}
    out += [f"{m}: in no layer; add its package or module to the ```layers block of docs/architecture.md"
            for m, u in sorted(unit.items()) if u is None]
    unit_edges: dict[str, set[str]] = {}
    for m, edges in sorted(graph.items()):
        for o, line in sorted(edges.items()):
            a, b = unit[m], unit[o]
            if a is None or b is None or a == b:
                continue
            unit_edges.setdefault(a, set()).add(b)
            if level[b] > level[a]:
                out.append(f"{m}:{line} imports {o}: {a} (layer {level[a]}) may not import {b} (layer {level[b]}), a higher layer")
    out += [f"import cycle between layer units: {' <-> '.join(c)}" for c in cycles(unit_edges)]
    return out


# -- the tests --------------------------------------------------------------------------------
def test_the_host_has_no_import_cycle_and_no_import_runs_up_the_layers():
    found = problems(real_graph(), layers_from(DOC.read_text()))
    assert not found, "\n".join(found)


def test_the_layer_list_names_the_real_packages():
    layers = layers_from(DOC.read_text())
    names = {u for layer in layers for u in layer}
    assert "errors" in layers[0], "the errors are the bottom layer"
    for core in ("plan", "targets", "store", "config", "campaign", "runner", "report", "analysis"):
        assert core in names, f"{core} is missing from the layer list"
    level = {u: i for i, layer in enumerate(layers) for u in layer}
    assert level["targets"] < level["config"] < level["campaign"] < level["cli"]


def test_the_checker_finds_cycles_upward_imports_and_strays_on_a_small_graph():
    layers = [["low"], ["mid"], ["high"]]
    graph = {"xtalk.low": {}, "xtalk.mid.a": {"xtalk.low": 1}, "xtalk.high": {"xtalk.mid.a": 2}}
    assert problems(graph, layers) == []
    inside = {**graph, "xtalk.mid.a": {"xtalk.low": 1, "xtalk.mid.b": 4}, "xtalk.mid.b": {"xtalk.mid.a": 3}}
    assert problems(inside, layers) == ["import cycle between modules: xtalk.mid.a <-> xtalk.mid.b"]
    graph["xtalk.low"] = {"xtalk.high": 7}  # upward, and so a cycle of three units
    graph["xtalk.stray"] = {}
    found = problems(graph, layers)
    assert any(p.startswith("xtalk.low:7 imports xtalk.high: low (layer 0)") and "higher layer" in p for p in found), found
    assert "import cycle between modules: xtalk.high <-> xtalk.low <-> xtalk.mid.a" in found
    assert "import cycle between layer units: high <-> low <-> mid" in found
    assert any(p.startswith("xtalk.stray: in no layer") for p in found)


@pytest.mark.parametrize("planted, needle", [
    # A function-local import back up (the shape of the fault this layering removed).
    ("\n\ndef _planted():\n    from ..campaign.execute import attempt\n    return attempt\n",
     "xtalk.targets.base:"),
    ("\n\ndef _planted():\n    import xtalk.cli\n    return xtalk.cli\n", "xtalk.targets.base:"),
])
def test_a_planted_upward_import_in_a_copy_of_the_package_fails_the_check(tmp_path, planted, needle):
    shutil.copytree(SRC / "xtalk", tmp_path / "xtalk", ignore=shutil.ignore_patterns("__pycache__"))
    base = tmp_path / "xtalk" / "targets" / "base.py"
    base.write_text(base.read_text() + planted)
    # The copy's graph: the real one with the planted file read again (the rest is unchanged).
    graph = {**real_graph(), "xtalk.targets.base": module_edges("xtalk.targets.base", base, modules(tmp_path))}
    assert problems(real_graph(), layers_from(DOC.read_text())) == []
    found = problems(graph, layers_from(DOC.read_text()))
    assert any(p.startswith(needle) and "a higher layer" in p for p in found), found
    assert any(p.startswith("import cycle between layer units:") and "targets" in p for p in found), found


def test_relative_imports_resolve_to_modules_not_names():
    g = real_graph()
    # `from ..store.jobs import convert_run` names the module; `from .. import units` too.
    assert "xtalk.store.jobs" in g["xtalk.targets.local"]
    assert "xtalk.units" in g["xtalk.config.expand"]
    assert "xtalk" not in g["xtalk.runner"]  # the version lives in xtalk.version, below everything


# -- who reads run.json -----------------------------------------------------------------------
#: The functions that read a run.json file (xtalk.outcome); `parse_outcome` validates a
#: document already in memory and is not one of them.
OUTCOME_READERS = {"load_outcome", "read_outcome"}
#: Modules outside the readers of the ```run-json block that still read run.json themselves,
#: each with why it is left: the rule fails for any other module, and for a listed one that
#: no longer reads it (then strike it from here).
STILL_READING = {
    "xtalk.cli": "`xtalk trace`/`export-trace` check one run directory themselves (cli.py is shared this round)",
    "xtalk.evidence.bundle": "copies each run's run.json into the bundle byte for byte (a file list; never parses it)",
    "xtalk.evidence.manifest": "lists runs/*/run.json among the bundle's input files (a glob; never parses it)",
}


def run_json_owners(text: str) -> list[str]:
    """The units allowed to read run.json: the ```run-json block of docs/architecture.md."""
    block = re.search(r"^```run-json\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/architecture.md has no ```run-json block"
    return [n.strip() for line in block.group(1).splitlines() for n in line.split("#", 1)[0].split(",") if n.strip()]


def reads_run_json(module: str, path: Path) -> int | None:
    """The line where `module` reads run.json itself (imports or calls a reader of
    xtalk.outcome, or names the file "run.json" in code), or None."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and _target(module, is_package, node) == "xtalk.outcome" \
                and any(a.name in OUTCOME_READERS for a in node.names):
            return node.lineno
        if isinstance(node, ast.Attribute) and node.attr in OUTCOME_READERS:
            return node.lineno
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in OUTCOME_READERS:
            return node.lineno
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                (node.value == "run.json" or node.value.endswith("/run.json")):
            return node.lineno
    return None


@functools.lru_cache(maxsize=1)
def real_run_json_lines() -> dict[str, int | None]:
    """Module of src/xtalk -> where it reads run.json (None: it does not)."""
    return {m: reads_run_json(m, path) for m, path in modules(SRC).items()}


def run_json_problems(lines: dict[str, int | None], owners: list[str], allowed: dict[str, str]) -> list[str]:
    """Every module outside `owners` that reads run.json (``lines``: module -> where, or
    None) and is not in `allowed`, and every module of `allowed` that no longer does, one line
    each (empty: the rule holds)."""
    units = set(owners)
    out = []
    for m, line in sorted(lines.items()):
        if unit_of(m, units) is not None:
            continue
        if line is not None and m not in allowed:
            out.append(f"{m}:{line} reads run.json; only {', '.join(owners)} may: take the outcome from "
                       "xtalk.results (Results.outcomes, ReportData.outcome) or xtalk.store (run_outcome)")
        if line is None and m in allowed:
            out.append(f"{m} no longer reads run.json: strike it from STILL_READING in tests/test_layers.py")
    return out


def test_only_results_and_store_read_run_json():
    owners = run_json_owners(DOC.read_text())
    assert {"results", "store"} <= set(owners), owners
    found = run_json_problems(real_run_json_lines(), owners, STILL_READING)
    assert not found, "\n".join(found)
    # The report renders: not one of its modules reads run.json, listed or not.
    assert not [m for m in STILL_READING if m.startswith("xtalk.report")]


@pytest.mark.parametrize("planted", [
    "\n\ndef _planted(d):\n    from ..outcome import read_outcome\n    return read_outcome(d)\n",
    "\n\ndef _planted(d):\n    import json\n    return json.loads((d / \"run.json\").read_text())\n",
    "\n\ndef _planted(d):\n    from .. import outcome\n    return outcome.load_outcome(d)\n",
])
def test_a_planted_run_json_reader_in_the_report_fails_the_rule_and_a_stale_listing_too(tmp_path, planted):
    victim = tmp_path / "markdown.py"  # the report's module with a reader planted; the rest as it is
    victim.write_text((SRC / "xtalk" / "report" / "markdown.py").read_text() + planted)
    owners = run_json_owners(DOC.read_text())
    lines = {**real_run_json_lines(), "xtalk.report.markdown": reads_run_json("xtalk.report.markdown", victim)}
    found = run_json_problems(lines, owners, STILL_READING)
    assert len(found) == 1 and found[0].startswith("xtalk.report.markdown:") and "reads run.json" in found[0], found
    # A module listed though it reads nothing is named too (the list only shrinks).
    stale = run_json_problems(real_run_json_lines(), owners, {**STILL_READING, "xtalk.report.markdown": "planted"})
    assert stale == ["xtalk.report.markdown no longer reads run.json: strike it from STILL_READING in tests/test_layers.py"]


# -- who reads a run's job table and AOCS verdict -----------------------------------------------
#: Files of a run directory the report takes from results/ (its tables) instead of reading them.
RUN_FILES = {"jobs.parquet", "aocs.json"}
#: Report modules that still name one, each with why.
STILL_NAMING = {"xtalk.report.export": "the CSV export streams each run's jobs.parquet to csv/jobs.csv as it is"}


def names_run_file(path: Path) -> int | None:
    """The line where a module names one of RUN_FILES in code (a path built from it), or None."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in RUN_FILES:
            return node.lineno
    return None


def test_the_report_reads_no_job_table_nor_aocs_verdict_by_directory(tmp_path):
    found = {m: line for m, p in modules(SRC).items() if m.startswith("xtalk.report")
             and (line := names_run_file(p)) is not None}
    assert set(found) == set(STILL_NAMING), found
    # A planted reader is found.
    victim = tmp_path / "victim_kinds.py"
    victim.write_text((SRC / "xtalk" / "report" / "victim_kinds.py").read_text()
                      + '\n\ndef _planted(d):\n    return (d / "aocs.json").read_text()\n')
    assert names_run_file(victim) is not None
