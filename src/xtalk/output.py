"""How much a command says on standard output: the `-q` / `-v` levels of the command line.

`xtalk -q` prints only what a script or a CI log needs: the results path, the verdict lines,
warnings and errors; the default adds tables, progress and what each step does; `xtalk -v`
adds each run's detail as it ends. Errors go to standard error as one line whatever the level
(command.py). The level is the process's (set once by the command line); `Output` wraps a Rich
console and drops what the level leaves out, so a module that prints says what each line is
(`print` for the default's lines, `result`, `verdict`, `warning`, `detail`) and never reads
the level itself. The Rich console for standard output is made on first use: a command that
prints plain lines only (`xtalk plan`) never loads Rich's console.
"""

from __future__ import annotations

import sys

QUIET, NORMAL, VERBOSE = -1, 0, 1
_level = NORMAL
_stdout = None


def set_level(level: int) -> None:
    """The process's level: QUIET, NORMAL or VERBOSE (the command line's -q / -v)."""
    global _level
    _level = max(QUIET, min(VERBOSE, level))


def level() -> int:
    """The process's level."""
    return _level


def stdout_console():
    """The Rich console of standard output, made once: tables stay readable when the output
    goes to a file or a CI log (160 columns there)."""
    global _stdout
    if _stdout is None:
        from rich.console import Console

        _stdout = Console() if sys.stdout.isatty() else Console(width=160)
    return _stdout


class Output:
    """A Rich console (standard output's by default) that honours the level: `print` and
    tables at the default level and above, `detail` with -v only, `result`, `verdict` and
    `warning` always. Code that takes a `console` keeps calling `print`; `console` is the
    Rich console itself (a progress bar needs it)."""

    def __init__(self, console=None):
        self._console = console

    @property
    def console(self):
        """The Rich console lines go to."""
        if self._console is None:
            self._console = stdout_console()
        return self._console

    @property
    def quiet(self) -> bool:
        return _level <= QUIET

    @property
    def verbose(self) -> bool:
        return _level >= VERBOSE

    def print(self, *objects, **kwargs) -> None:
        """A line or a table of the default level (left out with -q)."""
        if _level >= NORMAL:
            self.console.print(*objects, **kwargs)

    def detail(self, *objects, **kwargs) -> None:
        """Per-run detail: printed with -v only."""
        if _level >= VERBOSE:
            self.console.print(*objects, **kwargs)

    def result(self, *objects, **kwargs) -> None:
        """Where the results are: printed at every level."""
        self.console.print(*objects, **kwargs)

    def verdict(self, *objects, **kwargs) -> None:
        """A verdict line: printed at every level."""
        self.console.print(*objects, **kwargs)

    def warning(self, *objects, **kwargs) -> None:
        """A warning: printed at every level."""
        self.console.print(*objects, **kwargs)


def of(console) -> Output | None:
    """`console` as an Output (itself if it is one; a Rich console wrapped; None stays None)."""
    if console is None or isinstance(console, Output):
        return console
    return Output(console)
