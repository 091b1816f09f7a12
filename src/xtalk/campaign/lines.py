"""Key path -> line number in a TOML text.

tomllib gives no positions, so errors about a field would otherwise name no line. This is a
small scanner, not a parser: it follows table headers (`[a.b]`, `[[a]]` with their array
index), `key = value` lines, keys inside inline tables on the same line, and the elements of
multi-line arrays of inline tables. A path it cannot place falls back to its longest known
prefix, which is the right neighbourhood for a fix.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEYVAL = re.compile(r"^\s*([A-Za-z0-9_.\"'-]+(?:\s*\.\s*[A-Za-z0-9_\"'-]+)*)\s*=")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\"'-]+)\s*=")


def _split_key(key: str) -> tuple:
    return tuple(p.strip().strip("\"'") for p in key.split("."))


def key_lines(text: str) -> dict[tuple, int]:
    """Map every key path found in `text` to its 1-based line number."""
    out: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    table: tuple = ()
    array_key: tuple | None = None  # inside a multi-line array value
    array_index = -1
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.split("#", 1)[0].strip() if '"' not in line else line.strip()
        if array_key is not None:
            if stripped.startswith("{"):
                array_index += 1
                elem = array_key + (array_index,)
                out.setdefault(elem, n)
                for k in _INLINE_KEY.findall(stripped):
                    out.setdefault(elem + (k.strip("\"'"),), n)
            if stripped.startswith("]") or stripped.endswith("]") and not stripped.startswith("{"):
                array_key = None
            continue
        m = _HEADER.match(line)
        if m and not _KEYVAL.match(line):
            path = _split_key(m.group(2))
            if m.group(1) == "[[":
                idx = counts.get(path, -1) + 1
                counts[path] = idx
                # Headers below an array element address its latest element.
                table = _resolve(path, counts) + (idx,)
            else:
                table = _resolve(path, counts)
            out.setdefault(table, n)
            continue
        m = _KEYVAL.match(line)
        if not m:
            continue
        path = table + _split_key(m.group(1))
        out.setdefault(path, n)
        rest = line[m.end():].strip()
        if rest.startswith("{"):
            for k in _INLINE_KEY.findall(rest):
                out.setdefault(path + (k.strip("\"'"),), n)
        elif rest.startswith("["):
            body = rest.split("#", 1)[0].rstrip()
            if body.count("[") > body.count("]"):
                array_key, array_index = path, -1
            elif "{" in body:
                # A one-line array of inline tables: every element sits on this line.
                for i, _ in enumerate(re.findall(r"\{", body)):
                    out.setdefault(path + (i,), n)
    return out


def _resolve(path: tuple, counts: dict[tuple, int]) -> tuple:
    """Insert the current index of every array-of-tables prefix of `path`."""
    out: tuple = ()
    for i, part in enumerate(path):
        out += (part,)
        prefix = path[: i + 1]
        if prefix in counts and i < len(path) - 1:
            out += (counts[prefix],)
    return out


def line_of(text: str, path: tuple) -> int | None:
    """The line of `path` (or of its longest known prefix); None when nothing matches."""
    lines = key_lines(text)
    p = tuple(path)
    while p:
        if p in lines:
            return lines[p]
        p = p[:-1]
    return None
