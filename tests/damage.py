"""A corruption fuzzer for results directories: kinds of damage (every results file truncated,
emptied, bit-flipped, deleted, given wrong JSON types; a run directory deleted) applied to a
copy of a real results directory, then every command that reads results run on it in this
process (typer's runner, an alarm for hangs). Shared by tests/test_results_damage.py (a
subset) and bench/results_fuzz.py (all kinds × all commands).

A verdict is `ok` (exit 0 or 2, no traceback, and a damage that loses runs or jobs is said:
the output names the damaged file or run), `traceback`, `hang`, `exit <n>` (another code) or
`silent` (exit 0 and nothing said about a damage that lost data).
"""

from __future__ import annotations

import json
import shutil
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: How a command may end on damaged results: 0 (read what is usable, said what was left out)
#: or 2 (the damage named in one line).
EXIT_CODES = {0, 2}


@dataclass
class Kind:
    name: str
    apply: Callable[[Path], str]  # damages the results directory; returns the file or run named
    lossy: bool = True  # loses runs or jobs: a command that exits 0 must say so
    #: Commands that do not read what the damage hits (`blame` reads one run: not the
    #: experiment's files, nor the other runs).
    unread: tuple = ()


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "runs").iterdir() if p.is_dir())


def _victim_run(root: Path) -> Path:
    return _run_dirs(root)[-1]  # the last run: the enemy scenario's


def _file(name: str, root: Path) -> Path:
    if name in ("experiment.json", "summary.json", "summary.md", "verdicts.json"):
        return root / name
    run = _victim_run(root)
    if name == "trace":
        found = sorted(p for p in run.iterdir() if p.name.startswith("trace"))
        return found[0] if found else run / "trace.txt"
    return run / name


def truncate(name: str, keep: float = 0.5, also: tuple = ()):
    def f(root: Path) -> str:
        p = _file(name, root)
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * keep)])
        for other in also:
            _file(other, root).unlink(missing_ok=True)
        return p.name
    return f


def bitflip(name: str, offset: int, also: tuple = ()):
    """Flip one bit at `offset` (negative: from the end)."""
    def f(root: Path) -> str:
        p = _file(name, root)
        data = bytearray(p.read_bytes())
        data[offset] ^= 0x10
        p.write_bytes(bytes(data))
        for other in also:
            _file(other, root).unlink(missing_ok=True)
        return p.name
    return f


def put(name: str, offset: int, raw: bytes, also: tuple = ()):
    def f(root: Path) -> str:
        p = _file(name, root)
        data = bytearray(p.read_bytes())
        data[offset:offset + len(raw)] = raw
        p.write_bytes(bytes(data))
        for other in also:
            _file(other, root).unlink(missing_ok=True)
        return p.name
    return f


def delete(*names: str):
    def f(root: Path) -> str:
        for n in names:
            _file(n, root).unlink(missing_ok=True)
        return _file(names[0], root).name
    return f


def json_edit(name: str, edit: Callable):
    def f(root: Path) -> str:
        p = _file(name, root)
        doc = json.loads(p.read_text())
        doc = edit(doc)
        p.write_text(json.dumps(doc))
        return p.name
    return f


def _set(key, value):
    def e(doc):
        doc[key] = value
        return doc
    return e


def delete_run(root: Path) -> str:
    d = _run_dirs(root)[0]
    shutil.rmtree(d)
    return d.name


def delete_all_runs(root: Path) -> str:
    for d in _run_dirs(root):
        shutil.rmtree(d)
    return "runs"


def stray_run(root: Path) -> str:
    (root / "runs" / "999-stray-r0").mkdir()
    return "999-stray-r0"


def _count(n: int) -> bytes:
    return n.to_bytes(8, "little")


NOPQ = ("jobs.parquet",)  # the damaged log must be read again: no table converted before
KINDS = [
    Kind("jobs.bin truncated to half", truncate("jobs.bin", 0.5, NOPQ)),
    Kind("jobs.bin cut inside its header", truncate("jobs.bin", 0.0005, NOPQ)),
    Kind("jobs.bin emptied", truncate("jobs.bin", 0.0, NOPQ)),
    Kind("jobs.bin magic bit-flipped", bitflip("jobs.bin", 2, NOPQ)),
    Kind("jobs.bin record size bit-flipped", bitflip("jobs.bin", 12, NOPQ)),
    Kind("jobs.bin count beyond its records", put("jobs.bin", 24, _count(10 ** 6), NOPQ)),
    Kind("jobs.bin count below run.json's", put("jobs.bin", 24, _count(7), NOPQ)),
    Kind("jobs.bin record bit-flipped", bitflip("jobs.bin", 64 + 80 * 3 + 20, NOPQ), lossy=False),
    Kind("jobs.bin deleted (table kept)", delete("jobs.bin"), lossy=False),
    Kind("jobs.bin and jobs.parquet deleted", delete("jobs.bin", "jobs.parquet")),
    Kind("jobs.parquet truncated to half", truncate("jobs.parquet", 0.5)),
    Kind("jobs.parquet emptied", truncate("jobs.parquet", 0.0)),
    Kind("jobs.parquet footer bit-flipped", bitflip("jobs.parquet", -6)),
    Kind("jobs.parquet deleted (log kept)", delete("jobs.parquet"), lossy=False),
    Kind("counters.bin truncated to half", truncate("counters.bin", 0.5, NOPQ)),
    Kind("counters.bin emptied", truncate("counters.bin", 0.0, NOPQ)),
    Kind("counters.bin counter count bit-flipped", bitflip("counters.bin", 32, NOPQ)),
    Kind("run.json truncated", truncate("run.json", 0.5)),
    Kind("run.json emptied", truncate("run.json", 0.0)),
    Kind("run.json deleted", delete("run.json")),
    Kind("run.json a list", json_edit("run.json", lambda d: [d])),
    Kind("run.json status a number", json_edit("run.json", _set("status", 5))),
    Kind("run.json jobs_recorded a string", json_edit("run.json", _set("jobs_recorded", "many"))),
    Kind("run.json plan a string", json_edit("run.json", _set("plan", "x"))),
    Kind("run.json labels a list", json_edit("run.json", lambda d: {**d, "plan": {**d["plan"], "labels": [1]}})),
    Kind("run.json jobs_recorded above the log's", json_edit("run.json", lambda d: {**d, "jobs_recorded": d["jobs_recorded"] * 3}),
         ),
    Kind("plan.json deleted", delete("plan.json"), lossy=False),
    Kind("experiment.json deleted", delete("experiment.json"), lossy=False),  # read as hand-made results are
    Kind("experiment.json truncated", truncate("experiment.json", 0.5), unread=("blame",)),
    Kind("experiment.json a list", json_edit("experiment.json", lambda d: [d]), unread=("blame",)),
    Kind("experiment.json order a string", json_edit("experiment.json", _set("order", "x")), unread=("blame",)),
    Kind("experiment.json order without run ids", json_edit("experiment.json", _set("order", [{"x": 1}])), unread=("blame",)),
    Kind("experiment.json experiment a number", json_edit("experiment.json", _set("experiment", 3)), unread=("blame",)),
    Kind("summary.json truncated", truncate("summary.json", 0.5), lossy=False),
    Kind("summary.json wrong types", json_edit("summary.json", lambda d: 7), lossy=False),
    Kind("verdicts.json truncated", truncate("verdicts.json", 0.5), lossy=False),
    Kind("verdicts.json wrong types", json_edit("verdicts.json", lambda d: [d]), lossy=False),
    Kind("culprits.parquet truncated", truncate("culprits.parquet", 0.5)),
    Kind("culprits.parquet deleted", delete("culprits.parquet"), lossy=False),
    Kind("trace truncated", truncate("trace", 0.5, NOPQ + ("culprits.parquet",)), lossy=False),
    Kind("trace emptied", truncate("trace", 0.0, NOPQ + ("culprits.parquet",)), lossy=False),
    Kind("trace deleted", delete("trace", "jobs.parquet", "culprits.parquet"), lossy=False),
    Kind("a run directory deleted", delete_run, unread=("blame",)),
    Kind("every run directory deleted", delete_all_runs),
    Kind("an empty run directory", stray_run, unread=("blame",)),
]


def commands(root: Path, peer: Path, tasks: Path, scenario: str) -> dict[str, list[str]]:
    """Every command that reads a results directory, with its arguments on `root` (`blame`:
    on the run the damage hits, named as in the undamaged `peer`)."""
    run = root / "runs" / _victim_run(peer).name
    return {
        "report": ["report", str(root), "--no-csv"],
        "query": ["query", str(root), "SELECT count(*) AS n, count(DISTINCT run_id) AS runs FROM jobs"],
        "summary": ["summary", str(root)],
        "sched analyze": ["sched", "analyze", str(tasks), "--wcet-from", f"{root}:{scenario}"],
        "overheads": ["summary", str(root), "--view", "overheads"],
        "latency": ["summary", str(root), "--view", "latency"],
        "compare": ["compare", str(peer), str(root), "-o", str(root.parent / "compare")],
        "blame": ["blame", str(run)],
    }


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@dataclass
class Outcome:
    kind: str
    command: str
    verdict: str
    code: int | None
    output: str


def run_command(args: list[str], timeout: int = 60) -> tuple[int | None, str, str | None]:
    """(exit code, stdout + stderr, traceback text or "hang") of `xtalk ARGS` in this process."""
    from typer.testing import CliRunner

    from xtalk import cli

    cli._mount_optional()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        r = CliRunner().invoke(cli.app, args, catch_exceptions=True)
    except _Hang:
        return None, "", "hang"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out = r.stdout + (r.stderr if r.stderr_bytes is not None else "")
    if isinstance(r.exception, _Hang):
        return None, out, "hang"
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return r.exit_code, out, "".join(traceback.format_exception(r.exception))
    return r.exit_code, out, None


def judge(kind: Kind, command: str, named: str, code, out: str, tb) -> str:
    if tb == "hang":
        return "hang"
    if tb:
        return "traceback"
    if code not in EXIT_CODES:
        return f"exit {code}"
    if code == 0 and kind.lossy and command not in kind.unread and named not in out:
        return "silent"
    if code == 2:  # one line, beside the warnings said before it
        lines = [x for x in out.splitlines() if x.strip() and not x.startswith("xtalk: warning:")]
        if len(lines) != 1:
            return "multi-line error"
    return "ok"


def fuzz(base: Path, work: Path, tasks: Path, scenario: str, kinds=None, names=None, timeout: int = 60,
         progress=None) -> list[Outcome]:
    """Every kind × every command (or those named) on fresh copies of `base` under `work`."""
    peer = work / "peer"
    if not peer.exists():
        shutil.copytree(base, peer)
    outcomes = []
    for kind in kinds or KINDS:
        for name in names or list(commands(peer, peer, tasks, scenario)):
            # A fresh path per case: a line said once per process (a warning) is said again.
            root = work / "damaged" / f"r{len(outcomes)}"
            if root.parent.exists():
                shutil.rmtree(root.parent)
            shutil.copytree(base, root)
            named = kind.apply(root)
            args = commands(root, peer, tasks, scenario)[name]
            code, out, tb = run_command(args, timeout)
            verdict = judge(kind, name, named, code, out, tb)
            outcomes.append(Outcome(kind.name, name, verdict, code, out if tb is None or tb == "hang" else tb))
            if progress:
                progress(outcomes[-1])
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    kinds = len({o.kind for o in outcomes})
    cmds = len({o.command for o in outcomes})
    count = {v: sum(o.verdict == v for o in outcomes) for v in ("traceback", "hang", "silent")}
    other = sum(o.verdict not in ("ok", "traceback", "hang", "silent") for o in outcomes)
    return (f"{kinds} kinds × {cmds} commands = {len(outcomes)} cases: {count['traceback']} tracebacks, "
            f"{count['hang']} hangs, {count['silent']} silent partial reads, {other} other failures")
