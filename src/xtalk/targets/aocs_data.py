"""AOCS data files made on this machine by its agent (`xtalk-agent aocs-generate`), for
`LocalTarget.aocs_data`: generated when the directory does not hold them, their seed checked
when it does, and the per-instance copies of `files = "duplicated"`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import safepath
from ..aocs import EXPECTED_FILE, INPUT_FILE, copy_dir, read_header
from ..errors import AgentError, UsageError


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
    # Generated beside the final names, then renamed over them (expected first): a plan made
    # at the same time never reads a half-written file, and a second generator with the same
    # seed writes the same bytes.
    safepath.makedirs(directory)
    work = Path(tempfile.mkdtemp(prefix=".aocs-generate-", dir=directory))
    try:
        out = subprocess.run([str(agent), "aocs-generate", "--out", str(work), "--seed", str(seed)], capture_output=True, text=True)
        if out.returncode != 0:
            raise AgentError(f"aocs-generate: {out.stderr.strip()}")
        safepath.rename(work / EXPECTED_FILE, exp)
        safepath.rename(work / INPUT_FILE, inp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return inp, exp


def duplicate(inp: str, expected: str, tag: str) -> dict[str, str]:
    """Copies of the AOCS files for one instance in `copy_dir`, on this machine; made once."""
    src_in, src_exp = Path(inp), Path(expected)
    d = Path(copy_dir(str(src_in.parent), tag))
    safepath.makedirs(d)
    out = {}
    for key, src in (("input", src_in), ("expected", src_exp)):
        dst = d / src.name
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            with open(src, "rb") as fin, safepath.replace(dst, "wb") as fout:  # whole or absent for a concurrent reader
                shutil.copyfileobj(fin, fout)
        out[key] = str(dst)
    return out
