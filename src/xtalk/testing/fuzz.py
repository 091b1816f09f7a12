"""Mutated experiment and campaign files fed to `xtalk plan`: every one must end as a valid
plan (exit 0) or one line naming the field and the fix (exit 2), with no traceback, within
10 s and under 1 GiB of memory. Used by tests/test_fuzz_inputs.py (a sample) and
bench/fuzz_inputs.py (hundreds of mutants per file).

Mutants are made from the parsed file (type swaps, huge, negative and non-finite numbers,
huge strings and lists, deleted keys, deep nesting, huge CPU ranges, the limits' edges) and
from its bytes (non-UTF-8, duplicated lines, truncation, deep brackets), seeded, so a run
is repeatable. `plan` runs in worker processes (the CLI in-process, as `xtalk plan` would),
each under an address-space limit, a per-file alarm and a watchdog that kills a worker
that stops answering.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import resource
import select
import signal
import subprocess
import sys
import time
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from .. import safepath

#: What every mutant must stay under.
TIME_LIMIT_S = 10.0
MEMORY_LIMIT_BYTES = 1 << 30

# ---------------------------------------------------------------------------- TOML writer


def _key(k) -> str:
    return json.dumps(str(k), ensure_ascii=False)


def _string(s: str) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    return _string(str(v))


def dumps(data: dict) -> str:
    """TOML text for `data`: one `key = value` line per top-level key (inline tables)."""
    return "".join(f"{_key(k)} = {_value(v)}\n" for k, v in data.items())


# ------------------------------------------------------------------------------ mutations

_HUGE_INTS = [2**63 - 1, 2**64, 2**63, 10**13, 10**30, 99999999999, -1, -(2**63), 0, 4 * 10**8, 10**9, 10**9 + 1]
_FLOATS = [math.inf, -math.inf, math.nan, 1e308, -0.0, 1e-300, 0.5, 61000.0]
_STRINGS = ["", "x", "A" * 300, "9" * 5000, "1" * 100_000 + "x", "0-99999999999", "99999999999", "1e999s", "1e999",
            "61s", "3600000s", "llc/0", "0*llc", "-5ms", "nan", "inf", "\u00e9t\u00e9", "a\u0000b", "\ud7ff" * 10,
            "99999TiB", "1.5", "others", "all", "0-3,0-3", "0--1", ",,,", "first", "  ", "a/b", "solo"]
_SHAPES = [[], {}, [1, 2], {"a": 1}, [[1]], True, False, 1, 1.5, "s", [0] * 50_000]


def _nested(depth: int, leaf=1):
    v = leaf
    for _ in range(depth):
        v = [v]
    return v


def _paths(node, prefix=()):
    """(container, key) of every value in the tree, the root's keys included."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        out.append((node, k, prefix + (k,)))
        if isinstance(v, (dict, list)) and len(out) < 5000:
            out.extend(_paths(v, prefix + (k,)))
    return out


def _leaf_value(rng: random.Random, old):
    kind = rng.choice(["int", "float", "string", "shape", "nested", "negate", "scale"])
    if kind == "int":
        return rng.choice(_HUGE_INTS)
    if kind == "float":
        return rng.choice(_FLOATS)
    if kind == "string":
        return rng.choice(_STRINGS)
    if kind == "shape":
        return rng.choice(_SHAPES)
    if kind == "nested":
        return _nested(rng.choice([5, 50, 200, 400]))
    if kind == "negate" and isinstance(old, (int, float)) and not isinstance(old, bool):
        return -old
    if kind == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
        return old * rng.choice([10**6, 10**12, 10**18])
    if kind == "scale" and isinstance(old, list):
        return old * rng.choice([100, 10_000])
    return rng.choice(_HUGE_INTS + _STRINGS[:12])


#: Fields the issue's hand-made files hit: set them to the values that crashed before.
_TARGETED = [
    (("victim", "jobs"), [4 * 10**8, 2**63 - 1, 10**9 + 1, 5 * 10**6]),
    (("victim", "warmup_jobs"), [2**63 - 1, 2**64 - 1, 10**9]),
    (("victim", "cpus"), ["0-99999999999", [99999999999], "0-8191", list(range(5000))]),
    (("victim", "period"), ["1e999s", "100000s", math.inf, 1e300]),
    (("repetitions",), [10**9, 10**4, 10**5]),
    (("pids_max",), [10**13, 4194305, 4194304]),
    (("settle",), ["61s", 61000, math.inf, math.nan, "1e9s", 60000]),
    (("timeout",), [math.inf, "1e12s", 1e300]),
    (("name",), ["n" * 300, "n" * 64, "../x", "a b"]),
    (("results",), ["/proc/xtalk", "\u0000", "r" * 5000]),
]


def _targeted(data: dict, rng: random.Random) -> str | None:
    choices = [(p, vals) for p, vals in _TARGETED if _get(data, p) is not _MISSING or p[0] in ("pids_max", "timeout", "settle")]
    if isinstance(data.get("victim"), dict) is False and isinstance(data.get("application"), list):
        # a campaign: the same fields inside its first application's victim
        app = data["application"][0] if data["application"] and isinstance(data["application"][0], dict) else None
        if app is not None and isinstance(app.get("victim"), dict):
            p, vals = rng.choice([x for x in _TARGETED if x[0][0] == "victim"])
            app["victim"][p[1]] = rng.choice(vals)
            return f"application[0].{'.'.join(p)}"
    if not choices:
        return None
    p, vals = rng.choice(choices)
    _set(data, p, rng.choice(vals))
    return ".".join(p)


_MISSING = object()


def _get(data, path):
    for k in path:
        if not isinstance(data, dict) or k not in data:
            return _MISSING
        data = data[k]
    return data


def _set(data, path, value):
    for k in path[:-1]:
        data = data.setdefault(k, {}) if isinstance(data, dict) else data
    if isinstance(data, dict):
        data[path[-1]] = value


def _many_scenarios(data: dict, rng: random.Random) -> str | None:
    sc = data.get("scenario")
    if not (isinstance(sc, list) and sc and isinstance(sc[0], dict)):
        return None
    n = rng.choice([300, 1001, 10_000])
    data["scenario"] = [dict(sc[0], name=f"s{i}") for i in range(n)]
    return f"{n} scenarios"


def _many_enemies(data: dict, rng: random.Random) -> str | None:
    for s in data.get("scenario") or []:
        if isinstance(s, dict) and isinstance(s.get("enemies"), list) and s["enemies"] and isinstance(s["enemies"][0], dict):
            n = rng.choice([257, 300])
            e = {k: v for k, v in s["enemies"][0].items() if k not in ("cpus", "per_cpu", "name")}
            s["enemies"] = [dict(e, name=f"e{i}") for i in range(n)]
            return f"{n} enemies"
    return None


def _big_grid(data: dict, rng: random.Random) -> str | None:
    if "application" not in data:
        return None
    n = rng.choice([100, 10_000])
    data["grid"] = [{"mode": "product", "axes": {"victim.jobs": list(range(5, 5 + n)), "settle": ["10ms", "20ms"]}}]
    return f"grid of {2 * n} points"


def _two_way_counts(data: dict, rng: random.Random) -> str | None:
    tw = data.get("two_way")
    if not (isinstance(tw, list) and tw and isinstance(tw[0], dict)):
        return None
    tw[0]["counts"] = rng.choice([[99999999999], [257], list(range(1, 2000))])
    return "two_way.counts"


def mutate_data(data: dict, rng: random.Random) -> str:
    """Change `data` in place; returns what was done."""
    r = rng.random()
    if r < 0.25:
        for f in rng.sample([_targeted, _many_scenarios, _many_enemies, _big_grid, _two_way_counts], 5):
            what = f(data, rng)
            if what:
                return f"targeted {what}"
    paths = _paths(data)
    if not paths:
        return "nothing to mutate"
    node, key, path = rng.choice(paths)
    where = ".".join(map(str, path))
    op = rng.random()
    if op < 0.15 and isinstance(node, dict):
        del node[key]
        return f"deleted {where}"
    if op < 0.25 and isinstance(node, dict):
        node[f"{key}_copy"] = node[key]
        return f"unknown key beside {where}"
    if op < 0.30 and isinstance(node, list):
        node.extend([node[key]] * rng.choice([1, 300]))
        return f"repeated item {where}"
    node[key] = _leaf_value(rng, node[key])
    return f"value of {where}"


def mutate_text(text: str, rng: random.Random) -> tuple[str, bytes]:
    """Byte-level damage: non-UTF-8, duplicated keys, truncation, deep brackets, garbage."""
    lines = text.splitlines(keepends=True)
    op = rng.choice(["non-utf8", "duplicate", "truncate", "deep", "garbage", "huge"])
    if op == "non-utf8":
        i = rng.randrange(len(text) + 1)
        return op, text[:i].encode() + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80"]) + text[i:].encode()
    if op == "duplicate":
        keyed = [i for i, ln in enumerate(lines) if "=" in ln and not ln.lstrip().startswith("#")]
        if keyed:
            i = rng.choice(keyed)
            lines.insert(i, lines[i])
        return op, "".join(lines).encode()
    if op == "truncate":
        return op, text[:rng.randrange(len(text) + 1)].encode()
    if op == "deep":
        depth = rng.choice([100, 1000, 100_000])
        return op, (text + f"\ndeep = {'[' * depth}1{']' * depth}\n").encode()
    if op == "huge":
        return op, (text + "\n# " + "x" * (2 << 20) + "\n").encode()
    i = rng.randrange(len(text) + 1)
    junk = "".join(rng.choice("[]{}=\"'\\,.#\n0123456789-+eE:") for _ in range(rng.randrange(1, 8)))
    return op, (text[:i] + junk + text[i:]).encode()


def mutants(source: Path, count: int, seed: int) -> list[tuple[str, bytes]]:
    """`count` mutants of `source`: (description, file bytes), the same for the same seed."""
    text = source.read_text()
    base = tomllib.loads(text)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))  # deeply nested mutants, written here
    rng = random.Random(f"{seed}:{source.name}")
    out = []
    for _ in range(count):
        if rng.random() < 0.2:
            what, raw = mutate_text(text, rng)
            out.append((f"text {what}", raw))
            continue
        data = json.loads(json.dumps(base))  # a deep copy (the files hold no dates)
        what = mutate_data(data, rng)
        out.append((what, dumps(data).encode()))
    return out


# -------------------------------------------------------------------------------- worker


class _Hang(BaseException):
    """Raised by the alarm inside a mutant that runs too long."""


def _plan_in_process(path: str) -> dict:
    """`xtalk plan PATH` in this process: exit code, stdout, stderr, and any escaped exception."""
    import click
    import typer

    from .. import cli

    cmd = typer.main.get_command(cli.app)
    out, err = io.StringIO(), io.StringIO()
    result = {"code": 0, "exception": None}

    def on_alarm(signum, frame):
        raise _Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    t0 = time.monotonic()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rv = cmd.main(args=["plan", path], prog_name="xtalk", standalone_mode=False)
        # Without standalone mode click returns an Exit's code instead of calling sys.exit.
        result["code"] = rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        result["code"] = e.exit_code
    except click.ClickException as e:
        result["code"], result["exception"] = e.exit_code, f"click: {e.format_message()}"
    except _Hang:
        result["code"], result["exception"] = -1, f"hang: over {TIME_LIMIT_S:.0f} s"
    except MemoryError:
        result["code"], result["exception"] = -1, "memory: MemoryError (over the address-space limit)"
    except BaseException as e:  # noqa: BLE001 - a traceback is exactly what is looked for
        import traceback

        tb = traceback.extract_tb(e.__traceback__)
        last = tb[-1] if tb else None
        result["code"] = -1
        result["exception"] = f"traceback: {type(e).__name__}: {str(e)[:200]}" + (
            f" at {Path(last.filename).name}:{last.lineno}" if last else "")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    result["seconds"] = time.monotonic() - t0
    result["stdout"] = out.getvalue()[-2000:]
    text = err.getvalue()
    result["stderr"] = text[:2000]
    result["stderr_lines"] = len(text.strip().splitlines())
    result["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["maxrss_children"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return result


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def worker() -> None:
    """Read mutant paths on stdin, one per line; answer one JSON line each."""
    from .. import cli  # import everything `plan` needs before measuring the baseline

    cli._mount_optional()
    import xtalk.campaign.prepare  # noqa: F401
    import xtalk.config.expand  # noqa: F401
    import xtalk.runner  # noqa: F401

    # The address space may grow by the memory limit over what the imports took: a mutant
    # that tries to allocate more meets MemoryError instead of the machine's OOM killer.
    limit = _vm_size() + MEMORY_LIMIT_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        res = _plan_in_process(path)
        sys.__stdout__.write(json.dumps(res) + "\n")
        sys.__stdout__.flush()


# -------------------------------------------------------------------------------- driver


@dataclass
class Outcome:
    """One mutant's fate."""

    source: str
    what: str
    verdict: str  # "plan", "refused" or a failure: "traceback", "hang", "memory", "not one line", "exit N"
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    peak_rss: int = 0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict not in ("plan", "refused")]

    def summary(self) -> str:
        n = len(self.outcomes)
        plans = sum(o.verdict == "plan" for o in self.outcomes)
        refused = sum(o.verdict == "refused" for o in self.outcomes)
        slowest = max((o.seconds for o in self.outcomes), default=0.0)
        return (f"fuzz: {n} mutants of {len({o.source for o in self.outcomes})} files: {plans} valid plans, {refused} one-line "
                f"refusals, {len(self.failures)} failures; slowest {slowest:.1f} s, peak memory {self.peak_rss >> 20} MiB")


def judge(source: str, what: str, res: dict) -> Outcome:
    """The verdict on one worker answer."""
    secs = res.get("seconds", 0.0)
    if res.get("exception"):
        kind = res["exception"].split(":", 1)[0]
        return Outcome(source, what, kind, res["exception"], secs)
    err = res["stderr"].strip()
    if res["code"] == 0:
        if err:
            return Outcome(source, what, "stderr on success", err[:300], secs)
        return Outcome(source, what, "plan", "", secs)
    if res["code"] != 2:
        return Outcome(source, what, f"exit {res['code']}", err[:300], secs)
    lines = err.splitlines()
    if res.get("stderr_lines", len(lines)) != 1 or len(lines) != 1 or not lines[0].startswith("xtalk: ") or "Traceback" in err:
        return Outcome(source, what, "not one line", err[:300], secs)
    return Outcome(source, what, "refused", lines[0][:300], secs)


class _Worker:
    def __init__(self, cwd: Path):
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-c", "from xtalk.testing.fuzz import worker; worker()"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd, env=env)

    def ask(self, path: Path, timeout: float) -> dict | None:
        """The worker's answer for `path`, or None when it gave none in `timeout` (killed)."""
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            return None
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run(sources: list[Path], per_file: int, seed: int, workdir: Path, progress=None) -> Report:
    """Plan `per_file` mutants of every source in `workdir` (their relative paths, e.g.
    AOCS data, land there); one worker at a time, restarted after a hang or a crash."""
    safepath.makedirs(workdir)
    report = Report()
    w = _Worker(workdir)
    try:
        for src in sources:
            for i, (what, raw) in enumerate(mutants(src, per_file, seed)):
                f = workdir / f"{src.stem}-{i}.toml"
                safepath.write_bytes(f, raw)
                # The worker's own alarm ends a slow mutant at TIME_LIMIT_S; this catches
                # one stuck where the alarm cannot reach (C code) or a worker that died.
                res = w.ask(f, TIME_LIMIT_S + 20)
                if res is None:
                    dead = w.proc.returncode
                    report.outcomes.append(Outcome(src.name, what, "hang" if dead in (-9, None) else "crash",
                                                   f"worker gave no answer (exit {dead})", TIME_LIMIT_S + 20))
                    w = _Worker(workdir)
                else:
                    report.outcomes.append(judge(src.name, what, res))
                    report.peak_rss = max(report.peak_rss, res["maxrss"])
                    if res["maxrss"] > MEMORY_LIMIT_BYTES:
                        report.outcomes[-1] = Outcome(src.name, what, "memory", f"peak RSS {res['maxrss'] >> 20} MiB")
                f.unlink(missing_ok=True)
                if progress:
                    progress(report)
    finally:
        w.close()
    return report


def example_files(root: Path) -> list[Path]:
    """The example experiment and campaign files (examples/*.toml; models are not plans)."""
    return sorted(p for p in (root / "examples").glob("*.toml"))


if __name__ == "__main__":  # python -m xtalk.testing.fuzz N: N mutants per example file
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory() as d:
        rep = run(example_files(Path(__file__).resolve().parents[2]), n, 0, Path(d))
    for o in rep.failures:
        print(f"{o.source}: {o.what}: {o.verdict}: {o.detail}")
    print(rep.summary())
    sys.exit(1 if rep.failures else 0)
