"""`xtalk -q` prints only the results path, verdict lines, warnings and errors; `xtalk -v` adds
each run's detail (src/xtalk/output.py). Errors print at every level."""

import json

from command_experiment import command_experiment
from conftest import xtalk

TABLE = ("┃", "━", "│", "─")


def _synthetic(tmp_path):
    """Results with a planted 30 % slowdown and an ε it violates (verdict lines to print)."""
    from xtalk.testing.synthetic import Scenario, write_results

    out = write_results(tmp_path / "r", [Scenario("solo"), Scenario("read", slowdown=1.3)], repetitions=2, jobs=50)
    doc = json.loads((out / "experiment.json").read_text())
    doc["experiment"]["victim"]["epsilon"] = [{"metric": "exec", "statistic": "p99", "bound": "1.1x"}]
    (out / "experiment.json").write_text(json.dumps(doc))
    return out


def _lines(text: str) -> list[str]:
    """Output lines, a wrapped line joined back to its start (Rich wraps at 160 columns)."""
    out: list[str] = []
    for line in text.splitlines():
        if out and line[:1] not in ("", " ") and not line.startswith(("ok", "ε", "warning:", "results:", "run ", "xtalk")):
            out[-1] += " " + line
        else:
            out.append(line)
    return out


def test_quiet_summary_prints_verdicts_warnings_and_the_path(tmp_path):
    res = _synthetic(tmp_path)
    full = xtalk("summary", res)
    quiet = xtalk("-q", "summary", res)
    assert full.returncode == quiet.returncode == 0, full.stderr + quiet.stderr
    assert any(c in full.stdout for c in TABLE)  # the default prints the table
    assert not any(c in quiet.stdout for c in TABLE), quiet.stdout
    lines = _lines(quiet.stdout)
    assert lines[-1] == f"results: {res}"
    assert any(line.startswith("ε VIOLATED: ") and "read" in line for line in lines), lines
    assert any(line.startswith("warning: ") for line in lines), lines
    assert all(line.startswith(("ok: ", "ε VIOLATED: ", "warning: ", "results: ")) for line in lines), lines
    assert set(lines) <= set(_lines(full.stdout))  # the same lines, fewer of them


def test_errors_print_when_quiet(tmp_path):
    r = xtalk("-q", "summary", tmp_path / "nothing")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"xtalk: {tmp_path / 'nothing'}: not an xtalk results directory (no runs/); "
                                "give the directory `xtalk run` printed, RESULTS/<experiment>-<date>")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[victim]\nbody = "sum"\nbytes = "1MiB"\nperiod = "1ms"\njobs = 10\n[[scenario]]\nname = "r"\n'
                   'enemies = [{ kind = "reed" }]\n')
    r = xtalk("-q", "run", bad, "--results", tmp_path / "res")
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "did you mean 'read'?" in r.stderr, r.stderr
    assert not (tmp_path / "res").exists()


def test_quiet_and_verbose_together_are_refused(tmp_path):
    r = xtalk("-q", "-v", "summary", tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "-q" in r.stderr, r.stderr


def test_a_quiet_run_says_where_and_a_verbose_one_each_run(tmp_path, agent):
    f = command_experiment(tmp_path / "exp.toml", "levels", ["true"], reps=2)
    quiet = xtalk("-q", "run", f, "--results", tmp_path / "q", "--skip-feasibility", timeout=120)
    assert quiet.returncode == 0, quiet.stderr + quiet.stdout
    (res,) = (tmp_path / "q").iterdir()
    lines = _lines(quiet.stdout)
    assert lines[-1] == f"results: {res}", quiet.stdout
    assert all(line.startswith(("ok: ", "warning: ", "results: ")) for line in lines), quiet.stdout
    assert not any(c in quiet.stdout for c in TABLE) and "about" not in quiet.stdout  # no table, no start line
    verbose = xtalk("-v", "run", f, "--results", tmp_path / "v", "--skip-feasibility", timeout=120)
    assert verbose.returncode == 0, verbose.stderr + verbose.stdout
    done = [line for line in _lines(verbose.stdout) if line.startswith("run ") and ": completed" in line]
    assert len(done) == 2 and "(default / solo, rep 0): completed" in done[0], verbose.stdout
    assert any(c in verbose.stdout for c in TABLE)  # and everything the default prints
