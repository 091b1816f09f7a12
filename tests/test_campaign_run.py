"""Running campaigns: the plan's estimate against the real duration, status from another
process while it runs, SQL and pandas over the results, post-mortems of failed runs."""

from __future__ import annotations

import json
import re
import subprocess
import time

import xtalk
from campaign_util import campaign_dirs, tiny
from conftest import XTALK, processes_named, wait_for, xtalk as run_xtalk


def _running(base) -> bool:
    """A campaign under `base` has a run under way (its journal says so, and its victim lives)."""
    dirs = campaign_dirs(base)
    return bool(dirs) and '"state":"running"' in (dirs[0] / "journal.jsonl").read_text() and \
        bool(processes_named(("xt-victim",)))


def test_plan_estimate_is_within_20_percent_of_the_real_duration(tmp_path):
    f = tiny(tmp_path, jobs=250)  # 6 runs of about 0.5 s
    plan = run_xtalk("campaign", "plan", f)
    assert plan.returncode == 0, plan.stderr
    estimate = float(re.search(r"\(([0-9.]+) s\)", plan.stdout).group(1))
    assert "6 runs" in plan.stdout
    # The machine is shared: a burst of someone else's load can stretch one campaign, so a
    # second campaign is allowed; the estimate must hold for one of them.
    reals = []
    for k in range(2):
        t0 = time.monotonic()
        out = run_xtalk("campaign", "run", f, "--results", tmp_path / f"res{k}")
        reals.append(time.monotonic() - t0)
        assert out.returncode == 0, out.stderr
        if abs(estimate - reals[-1]) <= 0.2 * reals[-1]:
            break
    assert abs(estimate - reals[-1]) <= 0.2 * reals[-1], f"estimated {estimate:.2f} s, took {reals}"


def test_status_from_another_process_while_it_runs_then_query_and_open(tmp_path):
    f = tiny(tmp_path, jobs=150)
    base = tmp_path / "res"
    p = subprocess.Popen([*XTALK, "campaign", "run", f, "--results", base], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert wait_for(lambda: _running(base), timeout=60)  # past the pre-flight, a run under way
    (store,) = campaign_dirs(base)
    st = run_xtalk("campaign", "status", store)
    assert st.returncode == 0, st.stderr
    assert re.search(r"tiny: \d done, 0 failed, \d remaining of 6 \(0 excluded as infeasible\); driver running \(pid \d+\)",
                     st.stdout), st.stdout
    assert "ETA" in st.stdout
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "6 done, 0 failed, 0 remaining of 6" in out
    # Converted after the last run, not between two: every run has its table by the end.
    assert all((d / "jobs.parquet").exists() for d in (store / "runs").iterdir())
    st = run_xtalk("campaign", "status", store)
    assert "6 done, 0 failed, 0 remaining of 6" in st.stdout and "driver not running" in st.stdout
    # A second driver on the same campaign is refused while one runs; after, resume is a no-op.
    again = run_xtalk("campaign", "resume", store)
    assert again.returncode == 0 and "all 6 runs finished" in again.stdout

    q = run_xtalk("query", store, "SELECT application, criticality, scenario, count(*) AS n FROM jobs "
                  "WHERE NOT warmup GROUP BY ALL ORDER BY scenario", "--csv")
    assert q.returncode == 0, q.stderr
    assert q.stdout.splitlines() == ["application,criticality,scenario,n", "sum,C,pi,450", "sum,C,solo,450"]
    bad = run_xtalk("query", store, "SELECT nope FROM jobs")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    res = xtalk.open(store)
    jobs = res.jobs()
    assert len(jobs) == 900 and {"application", "criticality", "variant", "configuration", "exec_ns"} <= set(jobs.columns)
    assert jobs.groupby("scenario").run_id.nunique().to_dict() == {"pi": 3, "solo": 3}


def test_a_second_driver_is_refused_and_sigterm_stops_cleanly_then_resume_finishes(tmp_path):
    f = tiny(tmp_path, jobs=400)  # 6 runs of 0.8 s: still running when SIGTERM comes
    base = tmp_path / "res"
    p = subprocess.Popen([*XTALK, "campaign", "run", f, "--results", base], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert wait_for(lambda: _running(base), timeout=60)
        out = run_xtalk("campaign", "resume", campaign_dirs(base)[0])
        assert out.returncode == 2 and "being run by another xtalk (pid" in out.stderr, out.stderr
        assert p.poll() is None, "the campaign ended before the interrupt; make its runs longer"
    finally:
        p.terminate()
        _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in err, err
    assert not processes_named()
    (store,) = campaign_dirs(base)
    out = run_xtalk("campaign", "resume", store)
    assert out.returncode == 0, out.stderr
    assert "6 done, 0 failed, 0 remaining of 6" in out.stdout
    assert len(xtalk.open(store).jobs()) == 6 * 400


FAILING = """
name = "pm"
repetitions = 1
settle = "10ms"
timeout = "1.2s"

[[application]]
name = "hog"
criticality = "D"
epsilon = { metric = "response", statistic = "max", bound = "5ms" }
# Each job far exceeds its period: the watchdog ends the run.
body = "pi"
iterations = 200000000
period = "1ms"
jobs = 100
warmup_jobs = 0
cpus = "last"

[[application]]
name = "ok"
criticality = "D"
epsilon = { metric = "response", statistic = "max", bound = "5ms" }
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 20
warmup_jobs = 2
cpus = "last"
"""


def test_a_timed_out_run_keeps_its_post_mortem_and_the_campaign_goes_on(tmp_path):
    f = tmp_path / "pm.toml"
    f.write_text(FAILING)
    # The pre-flight would refuse the overloaded victim: skipped, its run times out.
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--skip-feasibility")
    assert out.returncode == 4, (out.returncode, out.stderr)  # some runs failed (docs/campaigns.md)
    assert "1 done, 1 failed, 0 remaining of 2" in out.stdout
    (store,) = campaign_dirs(tmp_path / "res")
    (run,) = (d for d in (store / "runs").iterdir() if "-hog-" in d.name)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "timeout"
    pm = run / "postmortem"
    assert (pm / "dmesg.txt").exists() and (pm / "agent-log-tail.txt").exists()
    assert json.loads((pm / "why.json").read_text())["status"] == "timeout"
    assert (run / "jobs.bin").exists() and (run / "agent.log").exists()
    st = run_xtalk("campaign", "status", store)
    assert "failed " + run.name + ": timeout" in st.stdout
    # A resume finds nothing to run and still reports the failure; with no run completed, 5.
    again = run_xtalk("campaign", "resume", store)
    assert again.returncode == 4 and "all 2 runs finished" in again.stdout, again.stdout
    hog = tmp_path / "hog.toml"
    hog.write_text(FAILING.split("[[application]]\nname = \"ok\"")[0])
    out = run_xtalk("campaign", "run", hog, "--results", tmp_path / "res5", "--skip-feasibility")
    assert out.returncode == 5 and "0 done, 1 failed, 0 remaining of 1" in out.stdout, (out.returncode, out.stdout)
    assert not processes_named()


def test_two_campaigns_on_one_machine_never_run_at_the_same_time(tmp_path):
    # The local target's lock serializes runs of independent campaigns: their measured
    # windows (CLOCK_MONOTONIC, from the job tables) never overlap. Runs of 0.5 s (250 jobs
    # of 2 ms): with 0.1 s runs, a 16-CPU machine finished one campaign's six runs before
    # the other had started up, so there was nothing to interleave.
    procs = []
    for k in range(2):
        f = tiny(tmp_path, jobs=250, name=f"c{k}.toml")
        procs.append(subprocess.Popen([*XTALK, "campaign", "run", f, "--results", tmp_path / f"res{k}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    spans = []
    for k in range(2):
        (store,) = campaign_dirs(tmp_path / f"res{k}")
        jobs = xtalk.open(store).jobs(measured_only=False)
        spans += [(g.release_ns.min(), g.end_ns.max(), k) for _, g in jobs.groupby("run_id")]
    assert len(spans) == 12
    spans.sort()
    assert all(a_end < b_start for (_, a_end, _), (b_start, _, _) in zip(spans, spans[1:])), spans
    assert len({k for *_, k in spans[:6]}) == 2 or len({k for *_, k in spans[6:]}) == 2, "the campaigns did not interleave"


def test_a_campaign_declaring_a_setting_the_machine_lacks_starts_nothing_and_one_it_holds_is_watched(tmp_path):
    path = "/proc/sys/kernel/sched_rt_period_us"
    have = open(path).read().strip()
    (tmp_path / "settings.toml").write_text(f'[settings."{path}"]\nvalue = "{int(have) + 1}"\n'
                                            'why = "the RT period the budgets were made for"\n')
    f = tiny(tmp_path, jobs=20, **{'name = "tiny"': 'name = "tiny"\nsettings = "settings.toml"'})
    r = run_xtalk("campaign", "run", f, "--results", tmp_path / "res")
    assert r.returncode == 2 and f"{path} is '{have}'" in r.stderr and f"'{int(have) + 1}'" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "res").exists()
    (tmp_path / "settings.toml").write_text(f'[settings."{path}"]\nvalue = "{have}"\nwhy = "the budgets\' RT period"\n')
    r = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", "--skip-feasibility")
    assert r.returncode == 0, r.stdout + r.stderr
    (store,) = campaign_dirs(tmp_path / "res")
    assert json.loads((store / "campaign.json").read_text())["declared_settings"][0]["value"] == have
    runs = list(store.glob("runs/**/run.json"))
    assert len(runs) == 6
    for run in runs:
        snap = json.loads(run.read_text())["settings"]
        assert snap["before"][path] == have and not snap.get("drift"), snap  # each run read it before and after
