"""What every log reader of the store shares: the error of a malformed log, and the atomic
Parquet write (readers see the whole file or none of it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .. import safepath
from ..errors import UsageError

if TYPE_CHECKING:  # pandas and pyarrow load when a file is read, not when the command line starts
    import pandas as pd


class JobLogError(UsageError):
    """A job, counter or probe log the store cannot read (wrong magic, record size, cut
    short): damaged input, one line naming the file, exit code 2 where no reader handles it."""


#: How a run's job table (jobs.parquet) is written: uncompressed (dictionary pages kept).
#: Every report, summary and query decodes it whole, and Snappy's decompression was half of
#: that (10^7 jobs, the report's columns: 1.3 s CPU with Snappy, 0.6 s without) for files a
#: third smaller (490 against 640 MB). Tables written otherwise read the same.
JOB_TABLE_WRITE = {"compression": "none"}


def write_parquet_atomic(df: pd.DataFrame, path: Path, **kw) -> None:
    """Write Parquet so that readers see the whole file or none of it (``kw``: pyarrow's
    ``write_table`` options, e.g. JOB_TABLE_WRITE)."""
    import pyarrow as pa

    safepath.write_parquet(pa.Table.from_pandas(df, preserve_index=False), path, fsync=True, **kw)


def parquet_damage(path: Path) -> str | None:
    """What is wrong with the Parquet file at `path` (its footer does not read: cut short,
    emptied, corrupted), or None."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except (pa.ArrowException, OSError) as e:
        return f"{Path(path).name}: not a readable Parquet file ({str(e).splitlines()[0]})"
    return None


def read_parquet(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """A Parquet file of the store as a DataFrame; JobLogError naming the file when it is damaged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=columns).to_pandas()
    except (pa.ArrowException, OSError) as e:
        raise JobLogError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
