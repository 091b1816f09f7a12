"""AOCS scenario data: the input and expected-output files the `aocs` victim replays, their
names and header, and a reader for the outputs a run recorded (`aocs-outputs.bin`).

The files are made by the agent (`xtalk-agent aocs-generate`, the same flight-software code
the victim runs) on the machine where the runs happen, when an experiment's `data`
directory does not hold them yet: the target does it (`Target.aocs_data`;
`targets/aocs_data.py` on this machine), so a plan sent to a remote board names files there."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .errors import UsageError

INPUT_FILE, EXPECTED_FILE, OUTPUTS_FILE = "aocs-input.bin", "aocs-expected.bin", "aocs-outputs.bin"
OUTPUT_COLUMNS = ["wheel_x", "wheel_y", "wheel_z", "dump_x", "dump_y", "dump_z", "pointing_error_rad", "mode"]
HEADER_BYTES = 64


@functools.cache
def header_dtype():
    """The files' 64-byte header as a numpy dtype (numpy loads when a file is read, not when
    an experiment that names AOCS files is planned)."""
    import numpy as np

    dtype = np.dtype([("magic", "S8"), ("version", "<u4"), ("record_f64", "<u4"), ("steps", "<u8"), ("seed", "<u8"),
                     ("dt", "<f8"), ("first_step", "<u8"), ("reserved", "S16")])
    assert dtype.itemsize == HEADER_BYTES
    return dtype


def __getattr__(name: str):
    """`HEADER`, the header's dtype, made when first named."""
    if name == "HEADER":
        return header_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def copy_dir(directory: str, tag: str) -> str:
    """Where one instance's copies live (seed 000 §5.3.1 "multiple files": the same bytes
    under other names): `dup/<tag>/` beside the originals."""
    return str(Path(directory) / "dup" / "".join(c if c.isalnum() or c in "-_." else "-" for c in tag))


def data_paths(directory: str, copy: str | None = None) -> tuple[str, str]:
    """The (input, expected) paths of the AOCS files in `directory` (or of the copy tagged
    `copy`), named only: nothing is read or made. Relative directories stay relative: they
    are resolved where the run happens."""
    d = copy_dir(directory, copy) if copy else directory
    return str(Path(d) / INPUT_FILE), str(Path(d) / EXPECTED_FILE)


def read_header(path: Path):
    """The header of an AOCS file (a numpy record: steps, seed, dt, first_step...)."""
    import numpy as np

    raw = Path(path).read_bytes()[:HEADER_BYTES]
    if len(raw) < HEADER_BYTES or raw[:6] != b"XTAOCS":
        raise UsageError(f"{path}: not an AOCS data file")
    return np.frombuffer(raw, header_dtype(), count=1)[0]


def read_outputs(path: Path):
    """Actuator commands per step of an output file (expected or recorded) as a DataFrame
    indexed by scenario step."""
    import numpy as np
    import pandas as pd

    h = read_header(path)
    data = np.frombuffer(Path(path).read_bytes(), "<f8", offset=HEADER_BYTES)
    n = min(int(h["steps"]), len(data) // 8)
    df = pd.DataFrame(data[: n * 8].reshape(n, 8), columns=OUTPUT_COLUMNS)
    df.index = pd.RangeIndex(int(h["first_step"]), int(h["first_step"]) + n, name="step")
    return df


def report(run_dir: Path) -> dict | None:
    """The comparer's verdict of one run (aocs.json), or None for another victim."""
    p = Path(run_dir) / "aocs.json"
    return json.loads(p.read_text()) if p.exists() else None
