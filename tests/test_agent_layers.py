"""The agent's modules keep the layer order written in docs/architecture.md ("Agent layers"):
an import (`crate::X`) goes to the importer's own layer or a lower one, never up, and the
module graph has no cycle at all, not even among modules of one layer. Pure: reads the
sources, runs nothing."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "agent" / "src"
DOC = ROOT / "docs" / "architecture.md"


def fenced(name: str, text: str) -> list[list[str]]:
    """The lines of the ```name block, each split into module names."""
    m = re.search(rf"^```{name}\n(.*?)^```", text, re.S | re.M)
    assert m, f"docs/architecture.md: no ```{name} block (the agent's layer order)"
    return [line.split() for line in m.group(1).splitlines() if line.strip()]


def layers(text: str) -> dict[str, int]:
    """Module -> layer index (0 at the top)."""
    out: dict[str, int] = {}
    for i, names in enumerate(fenced("agent-layers", text)):
        for n in names:
            assert n not in out, f"docs/architecture.md: agent module {n} is in two layers"
            out[n] = i
    return out


def module_of(path: Path, src: Path = SRC) -> str:
    return path.relative_to(src).parts[0].removesuffix(".rs")


def strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in code.splitlines())


def imports(src: Path = SRC) -> dict[str, dict[str, list[str]]]:
    """Module -> imported module -> where ("file:line"), from every `crate::X` in code
    (use lines and paths written in place alike)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for f in sorted(src.rglob("*.rs")):
        mod = module_of(f, src)
        graph.setdefault(mod, {})
        for n, line in enumerate(strip_comments(f.read_text()).splitlines(), 1):
            names = re.findall(r"\bcrate::(\w+)", line)
            # `use crate::{a, b::c}`: each top-level name in the braces.
            for group in re.findall(r"\bcrate::\{([^}]*)\}", line):
                names += [p.strip().split("::")[0] for p in group.split(",") if p.strip()]
            for other in names:
                if other != mod:
                    graph[mod].setdefault(other, []).append(f"{f.relative_to(src)}:{n}")
    return graph


def declared_modules() -> set[str]:
    """The crate's top-level modules, from main.rs's `mod` lines."""
    return set(re.findall(r"^\s*(?:pub\s+)?mod\s+(\w+)\s*;", (SRC / "main.rs").read_text(), re.M)) | {"main"}


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def violations(graph, order: dict[str, int]) -> list[str]:
    """Every rule broken, one line each."""
    bad = []
    for a, targets in sorted(graph.items()):
        for b, where in sorted(targets.items()):
            if a not in order or b not in order:
                continue  # reported by the module-list check
            if order[b] < order[a]:
                bad.append(f"{a} (layer {order[a]}) imports {b} (layer {order[b]}), a higher layer: {', '.join(where)}")
    for c in cycles(graph):
        bad.append(f"import cycle among {sorted(c)}")
    return bad


def test_every_module_has_a_layer():
    order = layers(DOC.read_text())
    mods = declared_modules()
    assert mods - set(order) == set(), f"agent modules without a layer in docs/architecture.md: {sorted(mods - set(order))}"
    assert set(order) - mods == set(), f"layers name modules main.rs does not declare: {sorted(set(order) - mods)}"
    assert set(imports()) <= mods, "a directory or file under agent/src that main.rs does not declare"


def test_imports_go_down_the_layers_and_have_no_cycles():
    assert violations(imports(), layers(DOC.read_text())) == []


def test_the_check_sees_an_upward_import_and_a_new_cycle(tmp_path):
    """The checker itself: a plumbing module reaching up into run/ breaks both rules."""
    (tmp_path / "main.rs").write_text("mod run;\nmod launch;\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mod.rs").write_text("use crate::launch::journal;\n")
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "mod.rs").write_text("// crate::run in a comment is no import\nfn f() { crate::{run::x, plan}; }\n")
    graph = imports(tmp_path)
    assert graph["launch"] == {"run": ["launch/mod.rs:2"], "plan": ["launch/mod.rs:2"]}
    bad = violations(graph, {"main": 0, "run": 1, "launch": 2, "plan": 3})
    assert any("launch (layer 2) imports run (layer 1)" in b for b in bad), bad
    assert any("cycle among ['launch', 'run']" in b for b in bad), bad
    # Two modules of one line importing each other go up no line: only the cycle rule sees it.
    same = violations({"observe": {"sched": ["a"]}, "sched": {"observe": ["b"]}}, {"observe": 1, "sched": 1})
    assert same == ["import cycle among ['observe', 'sched']"], same
    assert violations({"run": {"launch": ["x"]}, "launch": {}}, {"run": 1, "launch": 2}) == [], "a downward import alone is allowed"
