"""The denial-of-service-class enemies (write-back buffers, miss-handling registers, DRAM
bank conflicts, LLC set conflicts, bus locks) and the write-class enemies' store-method choice, driven
through the agent: each runs, reports a non-zero rate read from its own counter, says in
run.json's notes what it chose, and leaves no process or shared-memory entry behind; bad
parameters are refused naming the field."""

import json

import pytest

from conftest import needs_two_cpus, processes_named, xtalk

# kind -> (TOML enemy table, unit, the count must be a multiple of this (whole chunks),
# words the enemy's note must hold).
CASES = {
    "wbpressure": ('kind = "wbpressure", bytes = "2*llc"', "lines", 4096, None),
    "wbpressure-scattered": ('kind = "wbpressure", bytes = "2*llc", order = "scattered"', "lines", 4096, None),
    "mshr": ('kind = "mshr", bytes = "2*llc"', "lines", 4096, None),
    "mshr-chains": ('kind = "mshr", bytes = "2*llc", chains = 16', "lines", 4096, None),
    "bank": ('kind = "bank", bytes = "32MiB"', "accesses", 1024, ("bank conflicts found", "no bank mapping found")),
    "llcsets": ('kind = "llcsets", bytes = "4*llc", sets = 64', "lines", 4096, ("lines selected by",)),
    "buslock": ('kind = "buslock"', "locks", 256, ("every lock reaches the bus", "the kernel traps them")),
    "buslock-aligned": ('kind = "buslock", split = false', "locks", 256, ("no bus lock",)),
    "write": ('kind = "write", bytes = "2*llc"', "bytes", 256 << 10, ("chosen by measurement",)),
    "ntstore": ('kind = "ntstore", bytes = "2*llc"', "bytes", 256 << 10, ("chosen by measurement",)),
    "write-nt64": ('kind = "write", bytes = "2*llc", method = "nt64"', "bytes", 256 << 10, ("store method nt64 (as planned)",)),
}

EXPERIMENT = """
name = "dos"
repetitions = 1
settle = "20ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "5ms"
jobs = 200
warmup_jobs = 2
cpus = "last"
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One run (about 1 s of measuring): every case an enemy of its own, all on the CPUs
    other than the victim's, sharing them (one run waits for the machine lock once). Per
    case: the run.json, that enemy's entry, its notes."""
    tmp = tmp_path_factory.mktemp("dos")
    tables = ", ".join(f'{{ name = "{n}", {t}, cpus = "others" }}' for n, (t, *_) in CASES.items())
    (tmp / "exp.toml").write_text(EXPERIMENT + f'[[scenario]]\nname = "all"\nenemies = [{tables}]\n')
    # Feasibility, noise and enemies-alone passes are not what this file checks: skipped.
    out = xtalk("run", tmp / "exp.toml", "--results", tmp / "res", "--skip-feasibility")
    assert out.returncode == 0, out.stderr + out.stdout
    (res,) = (tmp / "res").iterdir()
    docs = [json.loads((d / "run.json").read_text()) for d in (res / "runs").iterdir()]
    (run,) = [r for r in docs if r["plan"]["labels"]["scenario"] == "all"]  # besides the solo run
    # With several enemies in a scenario, each is named "<name>.<index>".
    by_name = {e["name"].rsplit(".", 1)[0]: e for e in run["enemies"]}
    assert sorted(by_name) == sorted(CASES), list(by_name)
    return {n: (run, e, [x for x in run["notes"] if x.startswith(f"enemy {e['name']}: ")]) for n, e in by_name.items()}, None, run


@needs_two_cpus
@pytest.mark.parametrize("case", list(CASES))
def test_enemy_runs_reports_its_rate_and_says_what_it_chose(runs, case):
    table, unit, chunk, words = CASES[case]
    run, e, notes = runs[0][case]
    assert run["status"] == "completed", run["reason"]
    assert e["unit"] == unit and e["setup_error"] is None and e["ended_early"] is None, e
    # The rate is the enemy's own counter over its life: whole chunks of work, not zero.
    assert e["ops"] > 0 and e["ops"] % chunk == 0, (e["ops"], chunk)
    assert e["rate"] == pytest.approx(e["ops"] / e["seconds"])
    assert e["rate"] > 0 and 0 < e["window_ops"] <= e["ops"]
    if words:
        assert len(notes) == 1 and any(w in notes[0] for w in words), notes
    else:
        assert not notes, notes
    assert run["configuration"]["restored"] is True, run["configuration"].get("restore_errors")


@needs_two_cpus
def test_the_run_notes_only_what_the_enemies_chose(runs):
    run = runs[2]
    assert all(any(n.startswith(f"enemy {e['name']}: ") for e in run["enemies"]) for n in run["notes"]), run["notes"]


@needs_two_cpus
def test_the_auto_choice_names_a_method_it_measured(runs):
    """`auto` reports every method it timed with its MB/s and keeps the fastest of them."""
    for case in ("write", "ntstore"):
        (note,) = runs[0][case][2]
        chosen = note.split("store method ")[1].split()[0]
        rates = dict(p.rsplit(" ", 1) for p in note.split("(MB/s: ")[1].rstrip(")").split(", "))
        assert chosen in rates and float(rates[chosen]) == max(float(v) for v in rates.values()), note
        if case == "ntstore":
            assert all(m.startswith(("nt", "stnp")) for m in rates), note


@needs_two_cpus
def test_nothing_is_left_behind(runs):
    """No enemy process is left and none outlived the run; the run undid every change. (The
    session's machine_as_found fixture also compares /dev/shm, cgroups and tracefs under the
    machine lock: other users' live runs make a bare comparison here unreliable.)"""
    run = runs[2]
    assert not processes_named()
    assert run["configuration"]["restored"] is True, run["configuration"]
    assert run["configuration"]["run_group"].get("killed") in ([], None), run["configuration"]["run_group"]


@pytest.mark.parametrize("enemy,needle", [
    ('kind = "write", bytes = "1MiB", method = "fast"', "method"),
    ('kind = "ntstore", bytes = "1MiB", method = "store64"', "method"),
    ('kind = "wbpressure", order = "backwards"', "order"),
    ('kind = "mshr", bytes = "1MiB", chains = 999', "chains"),
    ('kind = "bank", bytes = "1MiB", candidates = 20000', "enemies[0].load.candidates"),
    ('kind = "bank", lines = 1', "lines"),
    ('kind = "llcsets", way_bytes = "64KiB", first_set = 1000, sets = 64', "enemies[0].load.sets"),
    ('kind = "llcsets", bytes = "64KiB", way_bytes = "64KiB"', "enemies[0].load.bytes"),
    ('kind = "buslock", bytes = 64', "enemies[0].bytes"),
    ('kind = "buslock", split = "yes"', "split"),
])
def test_bad_parameters_are_refused_naming_the_field(tmp_path, enemy, needle):
    text = EXPERIMENT.replace("jobs = 200", "jobs = 5") + f'[[scenario]]\nname = "x"\nenemies = [{{ {enemy}, cpus = "others" }}]\n'
    (tmp_path / "exp.toml").write_text(text)
    out = xtalk("run", tmp_path / "exp.toml", "--results", tmp_path / "res")
    assert out.returncode == 2, out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "res").exists(), "nothing may start on bad input"
