"""Old spellings of experiment and campaign files: still read, each said once per file.

A file is validated with a `Deprecations` collector as pydantic's validation context; the
models that accept an old spelling record one line per kind of old spelling (the first
example of it), and `say` prints them on stderr, `FILE: deprecated: OLD is now NEW`, once
per file and process (a command that loads a file twice says it once). Stored copies
(experiment.json, a campaign run's labels) are validated without a collector: silently.
"""

from __future__ import annotations

import sys

from pydantic import ValidationInfo

#: (file, kind) pairs already said by this process.
_SAID: set[tuple[str, str]] = set()


class Deprecations(dict):
    """Old spellings met while validating one file: kind → one line naming the old and the
    new spelling (the first example of each kind: one line per kind, however often used)."""

    def add(self, kind: str, line: str) -> None:
        """Record an old spelling (the first line of each kind is kept)."""
        self.setdefault(kind, line)


def of(info: ValidationInfo | None) -> Deprecations | None:
    """The collector passed as validation context, if any."""
    ctx = getattr(info, "context", None)
    return ctx if isinstance(ctx, Deprecations) else None


def say(source: str, found: Deprecations, stream=None) -> list[str]:
    """Print each old spelling of `source` not yet said by this process; returns the lines."""
    lines = []
    for kind, line in found.items():
        if (source, kind) in _SAID:
            continue
        _SAID.add((source, kind))
        lines.append(f"{source}: deprecated: {line}")
    for line in lines:
        print(line, file=stream or sys.stderr)
    return lines
