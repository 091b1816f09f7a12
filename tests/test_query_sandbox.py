"""`xtalk query` is a read-only SQL sandbox (store/sandbox.py): no statement but reading ones,
no file but the results' own Parquet files, configuration locked; `--allow-writes` opens it."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from conftest import xtalk
from xtalk.testing.synthetic import Scenario, write_results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write_results(tmp_path_factory.mktemp("q") / "res", [Scenario("solo"), Scenario("pi", slowdown=1.3)],
                         repetitions=2, jobs=50)


def _refused(out, *words):
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("xtalk: query: "), out.stderr
    assert "Traceback" not in out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


@pytest.mark.parametrize("sql,words", [
    ("COPY (SELECT 1) TO '{tmp}/x.csv'", ["COPY statements are refused", "--allow-writes"]),
    ("SELECT 1; COPY (SELECT 1) TO '{tmp}/x.csv'", ["COPY"]),
    ("COPY jobs TO '{res}/runs/0-solo-r0/jobs.parquet' (USE_TMP_FILE false)", ["COPY"]),  # the results' own file
    ("ATTACH '{tmp}/x.db' AS x", ["ATTACH"]),
    ("EXPORT DATABASE '{tmp}/x'", ["EXPORT"]),
    ("INSTALL httpfs", ["INSTALL"]),
    ("LOAD httpfs", ["LOAD"]),
    ("SET enable_external_access = true", ["SET"]),
    ("CREATE TABLE t AS SELECT 1", ["CREATE"]),
    ("SELECT * FROM read_csv('/etc/shadow')", ["/etc/shadow", "disabled"]),
    ("SELECT * FROM read_text('/etc/passwd')", ["/etc/passwd"]),
    ("SELECT * FROM glob('/etc/*')", ["/etc/*"]),
    ("SELECT * FROM read_parquet('{tmp}/*.parquet')", ["disabled"]),
])
def test_hostile_sql_is_refused_in_one_line_and_creates_nothing(results, tmp_path, sql, words):
    (tmp_path / "decoy.parquet").write_bytes(b"")
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*")}
    out = xtalk("query", results, sql.format(tmp=tmp_path, res=results))
    _refused(out, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoy.parquet"]
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*")} == before  # nothing written, nothing replaced


def test_reading_queries_still_work(results):
    out = xtalk("query", results, "SELECT scenario, count(*) AS n FROM jobs WHERE NOT warmup GROUP BY ALL ORDER BY ALL",
                "--csv")
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(io.StringIO(out.stdout))
    assert list(df.scenario) == ["pi", "solo"] and (df.n > 0).all()
    out = xtalk("query", results, "SELECT count(*) AS runs FROM runs", "--csv")
    assert out.returncode == 0 and out.stdout.split() == ["runs", "4"], out.stderr
    out = xtalk("query", results, "SELECT scenario FROM cells ORDER BY scenario", "--csv")
    assert out.returncode == 0 and out.stdout.split() == ["scenario", "pi", "solo"], out.stderr
    for sql in ("DESCRIBE jobs", "SUMMARIZE SELECT exec_ns FROM jobs", "EXPLAIN SELECT * FROM jobs", "FROM runs LIMIT 1"):
        out = xtalk("query", results, sql)
        assert out.returncode == 0, (sql, out.stderr)


def test_allow_writes_opens_the_sandbox(results, tmp_path):
    target = tmp_path / "x.csv"
    out = xtalk("query", results, f"COPY (SELECT count(*) AS n FROM jobs) TO '{target}'", "--allow-writes")
    assert out.returncode == 0, out.stderr
    assert target.read_text().split() == ["n", str(4 * 50)]
