"""The command line starts at once: `xtalk --help`, `--version`, `plan` and `run` up to its first
run load none of the analysis stack (pandas, DuckDB, SciPy, Matplotlib), checked with
`python -X importtime` in a fresh interpreter; help texts read as written; completion and
`--version` work. The CPU cost itself is measured by bench/cli_startup.py, not here."""

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import ROOT

HEAVY = ("pandas", "duckdb", "scipy", "matplotlib")
QUICKSTART = str(ROOT / "examples" / "quickstart.toml")


def _xtalk(args: list[str], prelude: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    """`xtalk ARGS` in a fresh interpreter under -X importtime (`prelude` runs first)."""
    code = f"import sys\n{prelude}\nsys.argv = ['xtalk', *{args!r}]\nfrom xtalk.cli import main\nmain()\n"
    return subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, **(env or {})})


def _modules(stderr: str) -> set[str]:
    """The modules an -X importtime report names."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def _imported(stderr: str) -> set[str]:
    """The top-level packages an -X importtime report names."""
    return {m.split(".")[0] for m in _modules(stderr)}


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["plan", QUICKSTART], ["sched", "--help"]],
                         ids=["help", "version", "plan", "sched-help"])
def test_light_commands_load_no_analysis_stack(args, request):
    if args[0] == "plan":
        request.getfixturevalue("needs_fifo")  # the quickstart's victim is FIFO: the agent's check says so
    r = _xtalk(args)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = _imported(r.stderr)
    assert "typer" in loaded  # the report is there: an empty one would pass anything
    assert not loaded & {*HEAVY, "numpy"}, f"xtalk {' '.join(args)} imported {sorted(loaded & {*HEAVY, 'numpy'})}"
    mine = _modules(r.stderr)
    if args[0] == "plan":  # an experiment's plan builds neither a campaign's models nor a run outcome's, nor the
        # peaks' (a file without `load`), and prints plain lines (no Rich console)
        assert "xtalk.config.experiment" in mine
        unneeded = {"xtalk.campaign.schema", "xtalk.outcome", "xtalk.peaks", "rich.console"}
        assert not mine & unneeded, sorted(mine & unneeded)
    elif args[0] in ("--help", "--version"):  # no command runs: typer coerces no value, no model is built
        assert "pydantic" not in loaded and "xtalk.plan" not in mine, sorted(loaded)


# `xtalk run` is stopped where its first run would take the machine lock (targets/lock.py),
# before any agent run: what it loaded up to there is what every run pays before it starts.
STOP_AT_FIRST_RUN = f"""
import os
def _hook(event, args):
    if event == "fcntl.flock":
        print("first run; loaded:", sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr, flush=True)
        os._exit(0)
sys.addaudithook(_hook)
"""


def test_run_loads_no_analysis_stack_before_its_first_run(tmp_path, needs_fifo):
    r = _xtalk(["run", QUICKSTART, "--results", str(tmp_path)], prelude=STOP_AT_FIRST_RUN)
    assert "first run; loaded: []" in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0
    assert not _imported(r.stderr) & set(HEAVY)


def test_help_lists_every_group_as_its_own_app_says():
    from xtalk import cli

    for name, module, help_text in cli.GROUPS:
        assert __import__(module, fromlist=["app"]).app.info.help == help_text, name
    out = _xtalk(["--help"]).stdout
    for name, _, help_text in cli.GROUPS:
        assert f"  {name} " in out and help_text.split(":")[0] in out, name


def _helps():
    """(command, help output) of every top-level command, in this process."""
    from xtalk import cli

    cli._mount_optional([])
    runner = CliRunner()
    names = sorted(cli.app_commands())
    return [(n, runner.invoke(cli.app, [n, "--help"], terminal_width=100).output) for n in names]


def test_help_texts_read_as_written():
    # Rich markup once ate "[trace]" (the table the user must add) and showed flags as `<bool>`.
    from xtalk import cli

    helps = dict(_helps())
    assert len(helps) == len(cli.app_commands()) >= 15
    for name in ("blame", "perfetto", "summary", "overheads"):  # summary: --view overheads
        assert "[trace]" in helps[name], helps[name]
    for name, text in helps.items():
        assert "<bool>" not in text, name
    assert "--csv / --no-csv" in helps["report"]


def test_version_names_xtalk_its_commit_and_the_agent(agent):
    from xtalk.version import __version__

    r = _xtalk(["--version"], env={"XTALK_AGENT": str(agent)})
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = r.stdout.splitlines()
    assert first.startswith(f"xtalk {__version__}")
    assert second.startswith("xtalk-agent ") and str(agent) in second
    r = _xtalk(["--version"], env={"XTALK_AGENT": str(ROOT / "no-such-agent")})
    assert r.returncode == 0 and "xtalk-agent: XTALK_AGENT=" in r.stdout and "not an executable" in r.stdout


def test_shell_completion_reaches_the_groups():
    def complete(words: str, cword: int) -> list[str]:
        r = _xtalk([], env={"_XTALK_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
        return r.stdout.split()

    assert complete("xtalk sch", 1) == ["sched"]
    assert {"analyze", "simulate"} <= set(complete("xtalk sched ", 2))
    assert complete("xtalk report --no-c", 2) == ["--no-csv"]


def test_summary_draws_nothing_and_loads_no_matplotlib(tmp_path):
    # The summary computes (pandas, SciPy's intervals) but draws no figure: Matplotlib is the
    # report's (report/figures.py), once loaded through report/html.py's type hint.
    from xtalk.testing.synthetic import Scenario, write_results

    out = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2, jobs=50)
    r = _xtalk(["summary", str(out)])
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = _imported(r.stderr)
    assert "pandas" in loaded  # the summary did its work (an early exit would load nothing)
    assert "matplotlib" not in loaded
    # The guards read each enemy's recorded rate alone (enemy_alone.recorded) and the run
    # outcomes' plans, not the experiment file's models or its expansion (25 ms of the report).
    mine = _modules(r.stderr)
    assert "xtalk.enemy_alone" in mine and "xtalk.plan" in mine, sorted(m for m in mine if m.startswith("xtalk"))
    assert not mine & {"xtalk.config.experiment", "xtalk.config.expand"}, sorted(mine & {"xtalk.config.experiment", "xtalk.config.expand"})


def test_report_imports_run_without_collections_and_are_frozen():
    # `xtalk report`'s imports (cli._imports_frozen): no full collection walks the objects
    # loaded so far while they load, and afterwards they are frozen, out of every later walk
    # (the forked child's included); collection is back on for what the report makes.
    code = """
import gc, json
from xtalk import cli
before = gc.get_stats()[2]["collections"]
with cli._imports_frozen():
    import xtalk.report.build
got = {"full": gc.get_stats()[2]["collections"] - before, "enabled": gc.isenabled(),
       "frozen": gc.get_freeze_count(), "objects": len(gc.get_objects())}
with cli._imports_frozen():  # the stack loaded already (a caller in-process): nothing frozen again
    import xtalk.report.html
got["again"] = gc.get_freeze_count() - got["frozen"]
print(json.dumps(got))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    got = json.loads(r.stdout)
    assert got["full"] == 0 and got["enabled"], got
    assert got["frozen"] > 50_000 and got["objects"] < got["frozen"] / 10, got  # the stack loaded, then frozen
    assert got["again"] == 0, got
