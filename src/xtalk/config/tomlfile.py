"""Reading an experiment or campaign file: bounded in size, UTF-8, TOML, one line on error.

Experiment and campaign files are both read here, so that a file too large, not UTF-8, not
TOML or nested too deeply for the parser ends as `FILE: problem; fix` (exit code 2) wherever
it is given.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from ..errors import UsageError
from ..limits import MAX_FILE_BYTES


def read_text(p: Path) -> str:
    """The file's text; UsageError when it cannot be read, is too large or is not UTF-8."""
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{p}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"{p}: larger than {MAX_FILE_BYTES >> 20} MiB; an experiment file is a few KiB, check the path")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise UsageError(f"{p}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}); "
                         f"save the file as UTF-8") from None


def parse_toml(text: str, source: str) -> dict:
    """`text` parsed as TOML; UsageError naming the line on a syntax error."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # tomllib ends its message with "(at line N, column M)": lead with the line instead.
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", str(e))
        where = f"{source}:{m.group(1)}" if m else source
        what = str(e)[:m.start()] if m else str(e)
        raise UsageError(f"{where}: not valid TOML: {what}"
                         f"{f' (column {m.group(2)})' if m else ''}; fix the syntax (quotes, brackets, commas)") from None
    except RecursionError:
        raise UsageError(f"{source}: not valid TOML here: arrays or tables nested too deeply; "
                         f"flatten them (a few levels are enough)") from None


def read_toml(p: Path) -> tuple[str, dict]:
    """The file's text and its TOML data, or UsageError with one line."""
    text = read_text(p)
    return text, parse_toml(text, str(p))
