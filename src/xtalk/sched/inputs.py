"""Input helpers shared by the model and sched packages.

Reading TOML, parsing durations with units, and turning validation failures into one
clear message that names the offending field and says how to fix it (the CLIs print that
line and exit with code 2).
"""

from __future__ import annotations

import math

import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the package declares tomli for Python 3.10
    import tomli as tomllib

__all__ = ["InputError", "parse_duration_ms", "load_toml", "from_validation_error"]


class InputError(ValueError):
    """Bad user input: ``field`` names the offending field, ``fix`` says what to do."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        msg = f"{field}: {problem}"
        if fix:
            msg += f" (fix: {fix})"
        super().__init__(msg)


_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")


def parse_duration_ms(value: Any, field: str = "duration") -> float:
    """Parse a duration into milliseconds.

    Numbers are taken as milliseconds; strings may carry a unit: ``"250us"``, ``"2ms"``,
    ``"1.5s"``, ``"800ns"``. Negative values and unknown units raise :class:`InputError`.
    """
    if isinstance(value, bool):
        raise InputError(field, f"expected a duration, got {value!r}", 'write e.g. 2 or "2ms"')
    if isinstance(value, (int, float)):
        if value < 0:
            raise InputError(field, f"negative duration {value}", "use a value >= 0")
        if not math.isfinite(value):
            raise InputError(field, f"{value} is not a finite duration", 'write e.g. 2 or "2ms"')
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if not m:
            raise InputError(
                field, f"cannot read duration {value!r}", 'use a number with a unit: "250us", "2ms", "1.5s"'
            )
        ms = float(m.group(1)) * _UNITS_MS[m.group(2) or "ms"]
        if not math.isfinite(ms):
            raise InputError(field, f"{value!r} is not a finite duration", 'write e.g. "2ms"')
        return ms
    raise InputError(field, f"expected a duration, got {type(value).__name__}", 'write e.g. 2 or "2ms"')


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; a missing file or a syntax error becomes an :class:`InputError`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "file not found", "give the path of an existing TOML file")
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(p), f"invalid TOML: {exc}", "fix the TOML syntax at the reported line") from exc


def _loc_to_field(loc: tuple[Any, ...], prefix: str) -> str:
    parts: list[str] = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            if parts:
                parts[-1] = f"{parts[-1]}[{item}]"
            else:
                parts.append(f"[{item}]")
        else:
            parts.append(str(item))
    return ".".join(parts)


def from_validation_error(exc: ValidationError, prefix: str = "") -> InputError:
    """Convert the first pydantic error into an :class:`InputError` naming the field."""
    err = exc.errors()[0]
    field = _loc_to_field(tuple(err.get("loc", ())), prefix)
    kind = err.get("type", "")
    msg = err.get("msg", "invalid value")
    if kind == "extra_forbidden":
        fix = "remove it or check its spelling"
        msg = "unknown field"
    elif kind == "missing":
        fix = "add this field"
    else:
        fix = "correct the value"
    return InputError(field or prefix or "input", msg, fix)
