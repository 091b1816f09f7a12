"""Shared fixtures: the agent, small plans and experiments, and leftover checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import capabilities
import leftovers
from programs import need_program, pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown  # noqa: F401 - hooks
from xtalk.targets.agent import find_agent, local_facts

ROOT = Path(__file__).resolve().parents[1]
# Every process the tests start inherits this token, so leftover checks see only our own
# processes and not those of another xtalk running on the machine.
TOKEN = f"xtalk-test-{uuid.uuid4()}"
os.environ["XTALK_TEST_TOKEN"] = TOKEN
XTALK = [sys.executable, "-m", "xtalk.cli"]


@pytest.fixture(scope="session")
def agent() -> Path:
    return find_agent()


@pytest.fixture(scope="session")
def facts(agent):
    return local_facts(agent)


@pytest.fixture(scope="session")
def last_cpu(facts) -> int:
    return facts.online_cpus[-1]


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (real-time policies, mlock)")
needs_two_cpus = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs (victim and enemy apart)")


def small_plan(run_id: str = "t", jobs: int = 50, period_ns: int = 2_000_000, enemies: list | None = None,
               cpus: list[int] | None = None, **victim) -> dict:
    """A short plan as a dict: a sum victim over 256 KiB."""
    v = {"body": {"kind": "sum", "bytes": 262144}, "period_ns": period_ns, "jobs": jobs, "warmup_jobs": 2,
         "placement": {"cpus": cpus}}
    v.update(victim)
    return {"version": 1, "run_id": run_id, "timeout_s": 30, "settle_ms": 20, "victim": v,
            "enemies": enemies or [], "labels": {"scenario": "solo"}}


def write_plan(tmp: Path, plan: dict, name: str = "plan.json") -> Path:
    p = tmp / name
    p.write_text(json.dumps(plan))
    return p


def xtalk(*args, cwd=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    """Run the xtalk command line in a subprocess. After `xtalk run`, the verdict document of
    the results it names (its last `results: DIR` line) is checked against the shipped schema:
    every experiment a test runs, the examples among them, validates (report/verdicts.py)."""
    out = subprocess.run([*XTALK, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, **kw)
    if args and str(args[0]) == "run" and out.returncode in (0, 1, 4):
        _check_verdicts(out.stdout, cwd)
    return out


def _check_verdicts(stdout: str, cwd) -> None:
    import json

    import jsonschema

    from xtalk.report.verdicts import FILE, schema

    named = [ln[len("results: "):].strip() for ln in stdout.splitlines() if ln.startswith("results: ")]
    if not named:
        return
    path = Path(cwd or ".") / named[-1]
    if (path / "summary.json").is_file():  # a summary was written: its verdict document beside it
        jsonschema.validate(json.loads((path / FILE).read_text()), schema())


def processes_named(prefixes=("xt-victim", "xt-enemy", "xtalk-agent")) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose name starts with one of `prefixes`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if state != "Z" and comm.startswith(prefixes) and _ours(d):
            out.append((int(d.name), comm))
    return out


def _ours(proc: Path) -> bool:
    try:
        return TOKEN.encode() in (proc / "environ").read_bytes()
    except OSError:
        return False


def wait_for(pred, timeout: float = 10.0, step: float = 0.02):
    """Poll `pred` until it returns something truthy; return it (or None on time-out)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d.name))
    return out


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


# --- capabilities: probed, never assumed (see capabilities.py) ---------------------------------


def _need(why: str) -> None:
    if why:
        pytest.skip(why)


def fifo_or_other(priority: int) -> dict:
    """A victim's sched: SCHED_FIFO at `priority` where this machine lets us take it, else the
    other path (SCHED_OTHER), so the test runs in a container too."""
    return {"policy": "fifo", "priority": priority} if not capabilities.policy("fifo") else {"policy": "other", "nice": 0}


@pytest.fixture
def needs_fifo():
    """Skip unless a child may take SCHED_FIFO here (refused in a cgroup without RT runtime)."""
    _need(capabilities.policy("fifo"))


@pytest.fixture
def needs_rr():
    """Skip unless a child may take SCHED_RR here."""
    _need(capabilities.policy("rr"))


@pytest.fixture
def needs_deadline():
    """Skip unless a child may take SCHED_DEADLINE here."""
    _need(capabilities.policy("deadline"))


@pytest.fixture
def needs_cgroup_v1():
    """Skip unless the v1 cpu and cpuset hierarchies are mounted and take a child group."""
    _need(capabilities.cgroup_v1("cpu") or capabilities.cgroup_v1("cpuset"))


@pytest.fixture
def needs_pids():
    """Skip unless a pids controller (v1, or offered by v2) takes a child group (pids_max)."""
    v1, v2 = capabilities.cgroup_v1("pids"), capabilities.cgroup_v2("pids")
    if v1 and v2:
        pytest.skip(f"needs the pids cgroup controller: {v1}; {v2}")


@pytest.fixture
def needs_rt_group():
    """Skip unless RT group scheduling (v1 cpu.rt_runtime_us) is there."""
    _need(capabilities.rt_group())


@pytest.fixture
def needs_cgroup_v2():
    """Skip unless a cgroup2 hierarchy with the cpu and cpuset controllers takes a child group."""
    _need(capabilities.cgroup_v2("cpu", "cpuset"))


@pytest.fixture
def needs_tracefs():
    """Skip unless tracefs is mounted or mountable by us."""
    _need(capabilities.tracefs())


@pytest.fixture
def needs_pmu():
    """Skip unless a hardware PMU is exposed."""
    _need(capabilities.pmu())


# --- the `agent` marker: exact, and enforced ---------------------------------------------------
#: Fixtures whose use means the test spawns xtalk-agent (facts come from the agent).
AGENT_FIXTURES = {"agent", "facts", "last_cpu"}
#: Modules whose tests drive the agent (`xtalk run`/`plan`/`sysinfo`/`calibrate`, campaigns,
#: the agent itself); the few pure tests among them are marked too, which costs only speed.
AGENT_MODULES = {
    "test_aocs.py", "test_blame_live.py", "test_calibrate_work.py", "test_campaign_examples.py",
    "test_campaign_resume.py", "test_campaign_run.py", "test_enemies.py", "test_enemies_errors.py",
    "test_enemies_external.py", "test_experiment_errors.py", "test_failure_propagation.py", "test_faults.py",
    "test_feasibility.py", "test_guards.py", "test_ci_recipe.py", "test_lab.py", "test_lab_guest.py", "test_input_bounds.py", "test_isolation.py", "test_latency.py",
    "test_preflight.py", "test_run_exit_codes.py", "test_security_host.py", "test_ssh_target.py",
    "test_taskset.py", "test_teardown.py", "test_agent_run.py", "test_trace.py", "test_security.py",
    "test_counters.py", "test_cli.py", "test_dask_cluster.py", "test_fuzz_inputs.py", "test_machine_fixtures.py",
    "test_characterize.py", "test_cgroup_v2.py", "test_feasibility_noise.py", "test_preflight_probes.py",
    "test_sched_bridge_live.py", "test_store_enemies.py", "test_campaign_preflight.py", "test_catalog_toy.py",
    "test_outcome_agent.py", "test_applications_agent.py", "test_applications_live.py", "test_enemies_dos.py",
    "test_worst.py", "test_security_results.py", "test_results_damage.py", "test_cli_startup.py",
    "test_verdicts_run.py", "test_compare_live.py", "test_verdicts_examples.py", "test_evidence_replay.py",
}
#: Single tests that drive the agent without any of the fixtures above.
AGENT_TESTS = {
    "test_aa.py::test_aa_confidence_intervals_cover_one",
    "test_one_pass.py::test_a_real_experiment_says_the_same_everywhere",
    "test_units.py::test_rates_print_with_the_prefix_that_fits",
    "test_report_build.py::test_report_on_a_real_experiment",
    "test_report_campaign.py::test_a_real_campaign_declaring_epsilon_gets_verdicts_and_guards",
    "test_report_sections.py::test_latency_experiment_on_the_agent",
    "test_report_sections.py::test_probe_portfolio_of_a_command_victim_on_the_agent",
    "test_peaks.py::test_peaks_measured_here_are_positive_and_saved",
    "test_installed.py::test_pip_install_gives_the_probe_files_and_an_example_builds_and_runs_with_them",
    "test_jobs_from_config.py::test_bad_declaration_exits_2_and_starts_nothing",
    "test_grammar.py::test_xtalk_plan_says_each_old_spelling_once_and_nothing_for_the_new",
}
TRIPWIRE = Path(__file__).with_name("agent_tripwire.sh")
#: The agent-driven modules run again in hostile environments (tests/hostile/*.sh): those that
#: touch policies, cgroups, tracefs and the journal, where a container or a cgroup-v2-only
#: machine differs; chosen to keep both variants together under 20 minutes on 2 CPUs.
HOSTILE_MODULES = {"test_agent_run.py", "test_aocs.py", "test_blame_live.py", "test_campaign_examples.py",
                   "test_cli.py", "test_enemies.py", "test_failure_propagation.py", "test_isolation.py",
                   "test_latency.py", "test_taskset.py"}


def pytest_collection_modifyitems(config, items):
    """Mark `agent` every test that spawns xtalk-agent: by fixture, by module, or by name."""
    for item in items:
        module = Path(item.fspath).name
        name = item.originalname if hasattr(item, "originalname") else item.name
        if (AGENT_FIXTURES & set(item.fixturenames) or module in AGENT_MODULES
                or f"{module}::{name}" in AGENT_TESTS):
            item.add_marker(pytest.mark.agent)
            if module in HOSTILE_MODULES:
                item.add_marker(pytest.mark.hostile)


@pytest.fixture(autouse=True)
def _agent_tripwire(request, tmp_path_factory, monkeypatch):
    """A test not marked `agent` that spawns the agent fails: $XTALK_AGENT points at a
    tripwire that records the test and refuses to run, so `pytest -m "not agent"` can never
    start an agent and the marking cannot drift from the truth."""
    if request.node.get_closest_marker("agent"):
        yield
        return
    log = tmp_path_factory.getbasetemp() / "agent-tripwire.log"
    log.unlink(missing_ok=True)
    monkeypatch.setenv("XTALK_AGENT", str(TRIPWIRE))
    monkeypatch.setenv("XTALK_TRIPWIRE_LOG", str(log))
    yield
    if log.exists() and log.read_text().strip():
        pytest.fail(f"{request.node.nodeid} spawned xtalk-agent but is not marked `agent` "
                    "(use an agent fixture, or add it to AGENT_MODULES/AGENT_TESTS in conftest.py)")


# --- the machine as found: checked at the end of the session -----------------------------------
def _locked_snapshot(lock: bool = True) -> set[str]:
    """A snapshot taken while holding the machine-wide lock, so no agent (ours or another
    user's) is mid-run; without it (not asked for, not root, or another run held it a minute)
    one that leaves out what live processes own."""
    from xtalk.targets.lock import target_lock
    if not lock:
        return leftovers.snapshot(TOKEN, locked=False)
    try:
        with target_lock(timeout=float(os.environ.get("XTALK_LEFTOVER_LOCK_S", "60")), say=lambda _: None):
            return leftovers.snapshot(TOKEN)
    except Exception:  # noqa: BLE001 - busy or not ours: the check still runs, on what is not live
        return leftovers.snapshot(TOKEN, locked=False)


@pytest.fixture(scope="session", autouse=True)
def machine_as_found(request):
    """Fail the session, listing them, if the tests left anything xtalk makes: processes this
    session started, cgroups, tracefs instances or mount, /dev/shm or /run/xtalk entries,
    or a changed policy/affinity of the test process itself."""
    # Only a session that runs the agent waits for the machine lock (`-m "not agent"` never).
    lock = any(item.get_closest_marker("agent") for item in request.session.items)
    before = _locked_snapshot(lock)
    yield
    left = set()
    # Processes being reaped and runs winding down get a few seconds to finish; a last look
    # is taken under the lock, so another user's run in progress (its staging directory in
    # /dev/shm has a random name) has ended and taken its things with it.
    for attempt in range(11):
        left = _locked_snapshot(lock or attempt == 10) - before
        if not lock:  # `before` could not tell a tracefs mount of xtalk's from the system's
            left = {x for x in left if not x.startswith("tracefs mounted")}
        if not left:
            return
        time.sleep(0.5)
    pytest.fail("the tests left the machine changed:\n  " + "\n  ".join(sorted(left)), pytrace=False)
