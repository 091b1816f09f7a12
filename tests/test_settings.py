"""Configuration settings: the snapshot and its drift (targets/settings.py), a run whose settings
drift marked invalid and left out, and a declared-settings file refusing an experiment."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from conftest import is_root, small_plan, wait_for, xtalk
from xtalk.errors import UsageError
from xtalk.plan import Plan
from xtalk.targets import settings as st

RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"


def _grep(files: list[Path]) -> bytes:
    """What the reader prints for these files: its own grep, on fixture files."""
    return subprocess.run(["sh", "-c", "LC_ALL=C grep -sHZ '' " + " ".join(map(str, files)) + "; exit 0"],
                          capture_output=True, check=True).stdout


def test_snapshot_of_fixture_files_and_its_diff(tmp_path):
    gov, thp, cmd, empty = (tmp_path / n for n in ("scaling_governor", "enabled", "cmdline", "empty"))
    gov.write_text("performance\n")
    thp.write_text("always madvise [never]\n")
    cmd.write_text("quiet isolcpus=1\n")
    empty.write_text("")
    before = st.parse(_grep([gov, thp, cmd, empty, tmp_path / "absent"]))
    assert before == {str(gov): "performance", str(thp): "always madvise [never]", str(cmd): "quiet isolcpus=1"}
    assert st.diff(before, dict(before)) == []
    gov.write_text("powersave\n")
    cmd.unlink()
    after = st.parse(_grep([gov, thp, cmd]))
    assert st.diff(before, after) == [f"{cmd}: 'quiet isolcpus=1' → (absent)", f"{gov}: 'performance' → 'powersave'"]
    assert st.drift_reason(st.diff(before, after)).startswith("settings drifted during the run: ")


def test_snapshot_of_this_machine_reads_the_defaults():
    snap = st.snapshot_local([RT_RUNTIME])
    assert snap["/proc/cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert snap[RT_RUNTIME] == Path(RT_RUNTIME).read_text().strip()  # listed twice, read once
    irqs = sorted(Path("/proc/irq").glob("*/smp_affinity_list"))
    assert [p for p in snap if p.startswith("/proc/irq/")] == sorted(str(p) for p in irqs if p.read_text().strip())


@pytest.mark.parametrize("path", ["/etc/passwd", "/sys/$(reboot)", "/proc/../etc/shadow", "/sys/a b"])
def test_a_user_path_outside_sys_and_proc_or_with_shell_characters_is_refused(path):
    with pytest.raises(UsageError, match="not a file under /sys or /proc"):
        st.reader_script([path])


def _declared(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "settings.toml"
    p.write_text(text)
    return p


def test_declared_values_are_checked_against_a_snapshot(tmp_path):
    f = st.load_declared(_declared(tmp_path, '''watch = ["/proc/sys/vm/swappiness"]
[settings."/sys/kernel/mm/transparent_hugepage/enabled"]
value = "never"
why = "no khugepaged collapse during the measured window"
[settings."/proc/sys/kernel/sched_rt_runtime_us"]
value = -1
why = "no RT throttling of the victim"
'''))
    assert f.paths() == ["/proc/sys/vm/swappiness", "/sys/kernel/mm/transparent_hugepage/enabled", RT_RUNTIME]
    held = {"/sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]", RT_RUNTIME: "-1"}
    assert st.violations(f, held) == []
    wrong = st.violations(f, {**held, RT_RUNTIME: "950000"})
    assert wrong == [f"settings: {RT_RUNTIME} is '950000', the settings file requires '-1' (no RT throttling of the "
                     "victim); set it on the machine or change the settings file"]
    assert "cannot be read on this machine" in st.violations(f, {RT_RUNTIME: "-1"})[0]


@pytest.mark.parametrize("text, field", [
    ('[settings."/proc/cmdline"]\nvalue = "x"\n', 'settings."/proc/cmdline".why'),
    ('[settings."/proc/cmdline"]\nwhy = "y"\n', 'settings."/proc/cmdline".value'),
    ('[settings."/etc/hosts"]\nvalue = "x"\nwhy = "y"\n', "not a file under /sys or /proc"),
    ('[settings."/proc/irq/*/smp_affinity_list"]\nvalue = "0"\nwhy = "y"\n', "not a glob"),
    ('[settings."/proc/cmdline"]\nvalue = "x"\nwhy = "y"\nwhen = 1\n', "value = \"...\" and why"),
    ('setting = 1\n', "unknown key 'setting'"),
    ('watch = "/proc/cmdline"\n', "watch must be a list"),
    ('[settings\n', "not TOML"),
])
def test_a_bad_settings_file_names_the_field(tmp_path, text, field):
    with pytest.raises(UsageError, match=field.replace("*", r"\*").replace(".", r"\.").replace('"', '"')):
        st.load_declared(_declared(tmp_path, text))


def _experiment(tmp_path: Path, extra: str = "") -> Path:
    exp = tmp_path / "exp.toml"
    exp.write_text(f'name = "held"\nresults = "{tmp_path / "results"}"\nrepetitions = 1\n{extra}'
                   '[victim]\nbody = "sum"\nbytes = "64KiB"\nperiod = "2ms"\njobs = 20\n[[scenario]]\nname = "read"\nenemies = [{ kind = "read", bytes = "64KiB", cpus = "others" }]\n')
    return exp


@pytest.mark.parametrize("how", ["option", "experiment", "plan", "plan-option"])
def test_a_declared_value_the_machine_does_not_have_refuses_the_experiment_before_it_starts(tmp_path, how):
    have = Path("/proc/sys/kernel/sched_rt_period_us").read_text().strip()
    declared = _declared(tmp_path, '[settings."/proc/sys/kernel/sched_rt_period_us"]\n'
                         f'value = "{int(have) + 1}"\nwhy = "the period the budgets were derived for"\n')
    exp = _experiment(tmp_path, 'settings = "settings.toml"\n' if how in ("experiment", "plan") else "")
    out = xtalk("plan" if how.startswith("plan") else "run", exp, *(["--settings", declared] if "option" in how else []))
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "/proc/sys/kernel/sched_rt_period_us is " in lines[0] and f"'{int(have) + 1}'" in lines[0], lines
    assert not (tmp_path / "results").exists()  # nothing started, nothing written


def test_plan_says_the_declared_settings_hold(agent, tmp_path):
    have = Path("/proc/sys/kernel/sched_rt_period_us").read_text().strip()
    _declared(tmp_path, f'[settings."/proc/sys/kernel/sched_rt_period_us"]\nvalue = "{have}"\nwhy = "the budgets\' period"\n')
    out = xtalk("plan", _experiment(tmp_path, 'settings = "settings.toml"\n'))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"declared settings: the 1 in {tmp_path / 'settings.toml'} hold on this machine" in out.stdout, out.stdout


@pytest.mark.skipif(not is_root(), reason="needs root (writes /proc/sys/kernel/sched_rt_runtime_us)")
def test_a_setting_changed_during_a_run_marks_it_invalid_with_the_diff(agent, tmp_path):
    from xtalk.store import open as open_results
    from xtalk.targets.local import agents_writing, run_plan

    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    held = run_plan(Plan.model_validate(small_plan("held", jobs=30)), runs / "held", agent)
    assert held.invalid is None and held.settings.drift == [] and RT_RUNTIME in held.settings.before

    old = Path(RT_RUNTIME).read_text().strip()
    new = str(int(old) + 1000) if int(old) >= 0 else "950000"
    changed: list[str] = []

    def change_while_running():  # a real change, while the agent runs, by another process
        if wait_for(lambda: agents_writing(runs / "drift"), timeout=20):
            r = subprocess.run(["sh", "-c", f"echo {new} > {RT_RUNTIME}"], capture_output=True, text=True)
            changed.append(r.stderr or "ok")

    t = threading.Thread(target=change_while_running)
    try:
        t.start()
        drift = run_plan(Plan.model_validate(small_plan("drift", jobs=150)), runs / "drift", agent)
        t.join()
    finally:
        Path(RT_RUNTIME).write_text(old)
    if changed != ["ok"]:
        pytest.skip(f"could not change {RT_RUNTIME} during the run: {changed}")
    line = f"{RT_RUNTIME}: '{old}' → '{new}'"
    assert drift.settings.drift == [line] and drift.invalid == st.drift_reason([line])
    results = open_results(tmp_path / "results")
    with pytest.warns(Warning, match="left out run drift: invalid: settings drifted"):
        table = results.runs()
    assert list(table.run_id) == ["held"] and results.left_out == {"drift": f"invalid: {st.drift_reason([line])}"}


def test_declared_settings_go_to_a_labgrid_board_unread_and_a_target_without_a_reader_is_refused(tmp_path):
    # A board's settings exist only once it has booted: handed over, read after each boot
    # (targets/labgrid.py; tests/test_lab.py marks a differing board's runs); a target with no
    # reader at all would be read here, on this machine, and a wrong one would pass.
    from xtalk.campaign.settings import hold
    from xtalk.targets.base import LocalTarget
    from xtalk.targets.labgrid import LabgridBoard

    declared = st.SettingsFile((st.Declared("/proc/sys/kernel/sched_rt_runtime_us", "-7", "no throttling"),), ())
    board = LabgridBoard("emu-1")
    hold(declared, [board], "lab.toml")  # -7 holds nowhere: not read here, so not refused
    assert board.declared is declared and "/proc/sys/kernel/sched_rt_runtime_us" in board.watch

    class NoReader:
        watch = ()

        def describe(self):
            return "fixture board-x"

    with pytest.raises(UsageError, match=r"^lab\.toml: target fixture board-x: declared settings cannot be read on "
                                         r"it \(it has no settings reader\); use ssh:// or labgrid:// targets, or "
                                         r"remove settings$"):
        hold(declared, [LocalTarget(), board, NoReader()], "lab.toml")
