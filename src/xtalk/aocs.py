"""AOCS scenario data: the input and expected-output files the `aocs` victim replays, their
names and header, and a reader for the outputs a run recorded (`aocs-outputs.bin`).

The files are made by the agent (`xtalk-agent aocs-generate`, the same flight-software code
the victim runs) on the machine where the runs happen, when an experiment's `data`
directory does not hold them yet: the target does it (`Target.aocs_data`; `ensure_data`
here for this machine), so a plan sent to a remote board names files on that board."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from .errors import AgentError, UsageError

INPUT_FILE, EXPECTED_FILE, OUTPUTS_FILE = "aocs-input.bin", "aocs-expected.bin", "aocs-outputs.bin"
OUTPUT_COLUMNS = ["wheel_x", "wheel_y", "wheel_z", "dump_x", "dump_y", "dump_z", "pointing_error_rad", "mode"]
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("record_f64", "<u4"), ("steps", "<u8"), ("seed", "<u8"),
                   ("dt", "<f8"), ("first_step", "<u8"), ("reserved", "S16")])
assert HEADER.itemsize == 64


def ensure_data(directory: Path, seed: int, agent: Path, field: str = "victim.data") -> tuple[Path, Path]:
    """The (input, expected) files in `directory`, generated there first when both are absent."""
    try:
        return _ensure_data(Path(directory), seed, agent, field)
    except OSError as e:  # a name too long, a component that is a file, no permission
        raise UsageError(f"{field}: {str(directory)[:60]!r}: {e.strerror}; name a directory for the AOCS files") from None


def _ensure_data(directory: Path, seed: int, agent: Path, field: str) -> tuple[Path, Path]:
    directory = directory.resolve()
    inp, exp = directory / INPUT_FILE, directory / EXPECTED_FILE
    if inp.exists() and exp.exists():
        header = read_header(inp)
        if header["seed"] != seed:
            raise UsageError(f"{field}: {inp} was generated with seed {header['seed']}, not data_seed = {seed}; "
                             "use another directory or remove its files")
        return inp, exp
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{field}: {directory} is not a directory; name a directory for the AOCS files")
    out = subprocess.run([str(agent), "aocs-generate", "--out", str(directory), "--seed", str(seed)], capture_output=True, text=True)
    if out.returncode != 0:
        raise AgentError(f"aocs-generate: {out.stderr.strip()}")
    return inp, exp


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


def duplicate(inp: str, expected: str, tag: str) -> dict[str, str]:
    """Copies of the AOCS files for one instance in `copy_dir`, on this machine; made once."""
    import shutil

    src_in, src_exp = Path(inp), Path(expected)
    d = Path(copy_dir(str(src_in.parent), tag))
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for key, src in (("input", src_in), ("expected", src_exp)):
        dst = d / src.name
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
        out[key] = str(dst)
    return out


def read_header(path: Path) -> np.void:
    raw = Path(path).read_bytes()[:HEADER.itemsize]
    if len(raw) < HEADER.itemsize or raw[:6] != b"XTAOCS":
        raise UsageError(f"{path}: not an AOCS data file")
    return np.frombuffer(raw, HEADER, count=1)[0]


def read_outputs(path: Path):
    """Actuator commands per step of an output file (expected or recorded) as a DataFrame
    indexed by scenario step."""
    import pandas as pd

    h = read_header(path)
    data = np.frombuffer(Path(path).read_bytes(), "<f8", offset=HEADER.itemsize)
    n = min(int(h["steps"]), len(data) // 8)
    df = pd.DataFrame(data[: n * 8].reshape(n, 8), columns=OUTPUT_COLUMNS)
    df.index = pd.RangeIndex(int(h["first_step"]), int(h["first_step"]) + n, name="step")
    return df


def report(run_dir: Path) -> dict | None:
    """The comparer's verdict of one run (aocs.json), or None for another victim."""
    p = Path(run_dir) / "aocs.json"
    return json.loads(p.read_text()) if p.exists() else None
