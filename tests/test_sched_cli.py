"""``xtalk sched`` commands and their error handling."""

from __future__ import annotations

from typer.testing import CliRunner

from xtalk.sched.cli import app

runner = CliRunner()
T41 = "examples/models/seed001-table41.toml"
T42 = "examples/models/seed001-table42.toml"
T43 = "examples/models/seed001-table43.toml"


def _row(output: str, name: str) -> list[str]:
    for line in output.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name} in\n{output}")


def test_analyze_table41_prints_response_times():
    r = runner.invoke(app, ["analyze", T41])
    assert r.exit_code == 0, r.output
    assert [_row(r.output, t)[4] for t in ("T1", "T2", "T3", "T4")] == ["1.000", "2.000", "7.000", "18.000"]
    assert "verdict: schedulable" in r.output


def test_analyze_edf_and_partitions():
    r = runner.invoke(app, ["analyze", T41, "--scheduler", "edf"])
    assert r.exit_code == 0 and "processor demand: schedulable" in r.output
    r = runner.invoke(app, ["analyze", T43])
    assert r.exit_code == 0 and r.output.count("Lemma 2.1: schedulable") == 2
    assert _row(r.output, "T1")[4] == "420.000"


def test_analyze_reports_unschedulable(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('[system]\noverhead = "385us"\n' + open(T41).read().replace("[system]\nscheduler = \"rm\"\n", ""))
    r = runner.invoke(app, ["analyze", str(f)])
    assert r.exit_code == 0 and _row(r.output, "T4")[5] == "NO" and "NOT schedulable" in r.output
    assert _row(r.output, "T4")[6].startswith("none"), "an unschedulable task has no slack (it printed inf)"
    assert _row(r.output, "T1")[6] not in ("inf", "-inf") and float(_row(r.output, "T1")[6]) >= 0


def test_bad_field_one_line_exit_2(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('[[task]]\nname = "a"\nwcet = 1\nperiodd = 4\n')
    r = runner.invoke(app, ["analyze", str(f)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "task[0].periodd: unknown field" in lines[0] and "fix:" in lines[0]
    r = runner.invoke(app, ["analyze", str(tmp_path / "missing.toml")])
    assert r.exit_code == 2 and "file not found" in r.output


def test_vm_prm_deadline_commands():
    r = runner.invoke(app, ["vm", T42])
    assert r.exit_code == 0 and "Θ = 1.500" in r.output and "η=2" in r.output
    r = runner.invoke(app, ["vm", T43, "--one-per-cpu"])
    assert r.exit_code == 0 and r.output.count("  schedulable") == 2 and "ω=1100" in r.output
    r = runner.invoke(app, ["prm", T43, "--period", "200ms", "--budget", "160ms"])
    assert r.exit_code == 0 and "schedulable" in r.output
    r = runner.invoke(app, ["prm", T41, "--period", "2", "--budget", "3"])
    assert r.exit_code == 2 and "--budget" in r.output
    r = runner.invoke(app, ["deadline", T41])
    assert r.exit_code == 0 and "admitted" in r.output
    r = runner.invoke(app, ["deadline", T41, "--rt-runtime-us", "900000"])
    assert "REFUSED" in r.output


def test_simulate_partitions_use_their_server_kind(tmp_path):
    r = runner.invoke(app, ["simulate", T43, "--duration", "6s"])
    assert r.exit_code == 0 and "ps over 6000 ms" in r.output  # server = "periodic" default
    f = tmp_path / "t.toml"
    f.write_text(open(T43).read().replace('name = "VM2"\n', 'name = "VM2"\nserver = "cbs"\n'))
    r = runner.invoke(app, ["simulate", str(f)])
    assert r.exit_code == 2 and "partition.server" in r.output
    r = runner.invoke(app, ["simulate", str(f), "--policy", "cbs", "--duration", "3s"])
    assert r.exit_code == 0 and "cbs over 3000 ms" in r.output


def test_simulate_and_generate(tmp_path):
    png, csv = tmp_path / "g.png", tmp_path / "j.csv"
    r = runner.invoke(app, ["simulate", T41, "--gantt", str(png), "--csv", str(csv)])
    assert r.exit_code == 0 and "deadline-miss ratio 0.0000" in r.output
    assert png.stat().st_size > 1000 and "response" in csv.read_text().splitlines()[0]
    r = runner.invoke(app, ["simulate", T41, "--policy", "nope"])
    assert r.exit_code == 2 and "--policy" in r.output
    a = runner.invoke(app, ["generate", "--seed", "5", "--k", "4", "--dist", "bimo-light"])
    b = runner.invoke(app, ["generate", "--seed", "5", "--k", "4", "--dist", "bimo-light"])
    assert a.exit_code == 0 and a.output == b.output and a.output.count("[[task]]") == 4
    out = tmp_path / "g.toml"
    r = runner.invoke(app, ["generate", "--seed", "1", "--total", "0.6", "-o", str(out)])
    assert r.exit_code == 0 and "U = 0.600" in r.output
    r = runner.invoke(app, ["analyze", str(out)])
    assert r.exit_code == 0
    r = runner.invoke(app, ["generate", "--seed", "1", "--dist", "heavy"])
    assert r.exit_code == 2 and "--dist" in r.output
