"""The number and kinds of enemies are columns of the job table (issue 15, defect 4): the main
axis of an interference experiment, grouped on in `xtalk query` SQL and in pandas. They were
once dropped as a clash between a campaign's `enemies` label and run.json's enemy list."""

import io

import duckdb
import pandas as pd
import pytest

import xtalk
from conftest import needs_root, needs_two_cpus, processes_named, xtalk as run_xtalk
from xtalk import store
from xtalk.outcome import parse_outcome, write_outcome
from xtalk.testing.synthetic import outcome
from xtalk.store.jobs import write_parquet_atomic

# Three scenarios of 0, 1 and 2 enemies; tiny so that the three runs take about a second.
EXPERIMENT = """
name = "nenemies"
repetitions = 1
settle = "10ms"
[victim]
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 30
warmup_jobs = 2
cpus = "last"
[[scenario]]
name = "one"
enemies = [{ kind = "pi", cpus = "others" }]
[[scenario]]
name = "two"
enemies = [{ kind = "pi", cpus = "others" }, { kind = "read", bytes = "64KiB", cpus = "others" }]
"""

# A campaign whose two-way cells carry the label `enemies` (their count) beside run.json's
# own `enemies` list: the clash that dropped both.
CAMPAIGN = """
name = "nenemies-campaign"
repetitions = 1
settle = "10ms"
[[application]]
name = "sum"
criticality = "C"
epsilon = { metric = "exec", statistic = "max", bound = "1.5x" }
body = "sum"
bytes = "64KiB"
period = "2ms"
jobs = 30
warmup_jobs = 2
cpus = "last"
[[two_way]]
name = "duty"
enemy = { kind = "pi", cpus = "others" }
share = "intensity"
counts = [1, 2]
totals = ["1ms"]
"""


def _only_dir(base):
    (d,) = [p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return d


def _query(results, sql):
    out = run_xtalk("query", results, sql, "--csv")
    assert out.returncode == 0, out.stderr
    return pd.read_csv(io.StringIO(out.stdout), keep_default_na=False)


@needs_root
@needs_two_cpus
def test_experiment_groups_by_number_of_enemies(tmp_path):
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT)
    out = run_xtalk("run", f, "--results", tmp_path / "res", timeout=240)
    assert out.returncode == 0, out.stderr + out.stdout
    res = _only_dir(tmp_path / "res")

    q = _query(res, "SELECT n_enemies, enemy_kinds, scenario, count(*) AS jobs FROM jobs WHERE NOT warmup "
                    "GROUP BY ALL ORDER BY n_enemies")
    assert q["n_enemies"].tolist() == [0, 1, 2]
    assert q["enemy_kinds"].tolist() == ["", "pi", "pi+read"]
    assert q["scenario"].tolist() == ["solo", "one", "two"]
    assert (q["jobs"] == 30).all()

    jobs = store.open(res).jobs()
    per = jobs.groupby("n_enemies")["exec_ns"].size()
    assert per.to_dict() == {0: 30, 1: 30, 2: 30}
    assert pd.api.types.is_integer_dtype(jobs["n_enemies"])
    runs = store.open(res).runs().set_index("scenario")
    # The per-enemy achieved work is still there for Python (one entry per enemy).
    assert [len(e) for e in runs.loc[["solo", "one", "two"], "enemies"]] == [0, 1, 2]
    assert not processes_named()


@needs_root
@needs_two_cpus
def test_campaign_label_does_not_hide_the_count(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(CAMPAIGN)
    out = run_xtalk("campaign", "run", f, "--results", tmp_path / "res", timeout=240)
    assert out.returncode == 0, out.stderr + out.stdout
    res = _only_dir(tmp_path / "res")

    q = _query(res, "SELECT two_way, n_enemies, enemy_kinds, total, count(DISTINCT run_id) AS runs FROM jobs "
                    "GROUP BY ALL ORDER BY n_enemies")
    assert q["n_enemies"].tolist() == [0, 1, 2]
    assert q["two_way"].tolist() == ["", "duty", "duty"]
    assert q["enemy_kinds"].tolist() == ["", "pi", "pi"]
    assert q["total"].tolist() == ["", "1ms", "1ms"]
    jobs = xtalk.open(res).jobs()
    assert sorted(jobs["n_enemies"].unique()) == [0, 1, 2]
    assert "enemies" not in jobs.columns  # no second, string-typed column beside n_enemies
    assert not processes_named()


def test_counts_come_from_the_plan_whatever_the_labels_say(tmp_path):
    """Without an agent: run.json as the agent writes it (plan enemies with their load kinds,
    the achieved-work list), a label `enemies` that must not overwrite either, and a run.json
    without a plan (counted from the achieved-work list)."""
    rows = pd.DataFrame({"job": range(3), "warmup": False, "exec_ns": [5, 6, 7]})

    def achieved(kind):
        return {"name": kind, "kind": kind, "unit": "ops", "ops": 1, "target_intensity": 100.0}

    chase, write = {"kind": "chase", "elements": 64}, {"kind": "write", "bytes": 4096}
    for rid, plan_enemies, done, labels in [
        ("0-solo", [], [], {}),
        ("1-x", [{"name": "e0", "load": chase}, {"name": "e1", "load": chase}, {"name": "e2", "load": write}],
         [achieved("chase")] * 2 + [achieved("write")], {"enemies": "3"}),
        ("2-old", None, [achieved("tlb")], {}),
    ]:
        d = tmp_path / "runs" / rid
        d.mkdir(parents=True)
        doc = outcome(rid, {"scenario": rid.split("-")[1], "repetition": 0, **labels}).to_dict()
        if plan_enemies is None:
            del doc["plan"]
        else:
            doc["plan"]["enemies"] = plan_enemies
        write_outcome(d, parse_outcome({**doc, "enemies": done}))
        write_parquet_atomic(rows, d / "jobs.parquet")
    res = store.open(tmp_path)
    runs = res.runs().set_index("run_id")
    assert runs["n_enemies"].to_dict() == {"0-solo": 0, "1-x": 3, "2-old": 1}
    assert runs["enemy_kinds"].to_dict() == {"0-solo": "", "1-x": "chase+write", "2-old": "tlb"}
    assert [e["kind"] for e in runs.loc["1-x", "enemies"]] == ["chase", "chase", "write"]
    got = res.connect().execute("SELECT n_enemies, sum(exec_ns) AS s FROM jobs GROUP BY 1 ORDER BY 1").fetchall()
    assert got == [(0, 18), (1, 18), (3, 18)]
    with pytest.raises(duckdb.BinderException):
        res.connect().execute("SELECT enemies FROM jobs").fetchall()  # the list is Python-only
