"""`xtalk query` as a read-only SQL sandbox.

xtalk runs as root, so SQL typed at `xtalk query` would otherwise be a root shell: DuckDB reads
any file (`read_csv('/etc/shadow')`), writes any path (`COPY ... TO`), attaches databases and
installs extensions. Two locks, each enough for what it covers:

1. Only reading statements run (SELECT and what parses as one — DESCRIBE, SUMMARIZE, SHOW,
   FROM-first —, EXPLAIN, CALL of a table function); COPY, ATTACH, EXPORT, INSTALL, LOAD, SET,
   CREATE... are refused by their parsed type before anything runs. This also keeps COPY off
   the results' own Parquet files, which DuckDB's file lock below must let it read.
2. DuckDB's own file lock: `allowed_paths` lists the results' Parquet files, then
   `enable_external_access=false` closes every other path (and extension loading), and
   `lock_configuration=true` refuses the SET that would reopen it.

`--allow-writes` (off by default) skips both, for a user who needs DuckDB's full power on
results they own.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..errors import UsageError

#: Statement types that only read (DESCRIBE, SUMMARIZE, SHOW and FROM-first parse as SELECT).
READING = {"SELECT", "EXPLAIN", "CALL"}


def check_reading(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """UsageError (one line) unless every statement of `sql` only reads."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise UsageError(f"query: {str(e).splitlines()[0]}") from None
    for s in statements:
        if s.type.name not in READING:
            words = s.query.split()
            kind = words[0].upper() if words else s.type.name  # as written: INSTALL parses as a LOAD
            raise UsageError(f"query: {kind} statements are refused (xtalk query reads only: SELECT, EXPLAIN, "
                             "DESCRIBE, SUMMARIZE); add --allow-writes to run any SQL, on results you own")


def lock(con: duckdb.DuckDBPyConnection, files: list[Path]) -> None:
    """Close `con` to every file but `files` (the views' own Parquet files), for good."""
    paths = sorted({str(f) for f in files} | {str(Path(f).resolve()) for f in files})
    allowed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
    con.execute(f"SET allowed_paths = {allowed}")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET python_enable_replacements = false")  # no Python variable read as a table
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
