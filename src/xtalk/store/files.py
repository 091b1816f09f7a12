"""What every log reader of the store shares: the error of a malformed log, and the atomic
Parquet write (readers see the whole file or none of it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from .. import safepath


class JobLogError(Exception):
    """A job, counter or probe log the store cannot read (wrong magic, record size)."""


def write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    """Write Parquet so that readers see the whole file or none of it."""
    safepath.write_parquet(pa.Table.from_pandas(df, preserve_index=False), path, fsync=True)
