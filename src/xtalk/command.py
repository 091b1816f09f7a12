"""How every command of the command line fails: one line and a documented exit code (2 bad
input, 3 agent problem, 130 interrupted). Shared by `xtalk.cli` and the sub-apps it mounts
(`campaign/cli.py`), which sit below it and so cannot import it."""

from __future__ import annotations

import functools
import sys
import warnings

import typer

from .errors import AgentError, Damaged, UsageError


def command_wrapper(fn):
    """`fn` with the failure handling of `command` (sub-apps register it themselves)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with warnings.catch_warnings():  # each command says each left-out run once
                say_left_out_runs()
                return fn(*args, **kwargs)
        except UsageError as e:
            print(f"xtalk: {e}", file=sys.stderr)
            raise typer.Exit(UsageError.exit_code) from None
        except AgentError as e:
            print(f"xtalk: {e}", file=sys.stderr)
            raise typer.Exit(AgentError.exit_code) from None
        except FileNotFoundError as e:  # a path gone under the command (its owner moved it mid-run): one line
            print(f"xtalk: {e.filename}: {e.strerror} (it went away while xtalk was using it; nothing was written "
                  f"elsewhere in its place)", file=sys.stderr)
            raise typer.Exit(UsageError.exit_code) from None
        except Exception as e:
            if not _validation_error(e):
                raise
            from .config.experiment import error_line  # a model check no caller turned into its own line

            print(f"xtalk: {error_line(e)}", file=sys.stderr)
            raise typer.Exit(UsageError.exit_code) from None
        except KeyboardInterrupt:
            print("xtalk: interrupted; every process stopped, partial results kept", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper


def _validation_error(e: Exception) -> bool:
    """Whether `e` is pydantic's ValidationError, without importing pydantic for commands
    that never load it (`xtalk --help`): if it is not loaded, `e` cannot be one."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(e, pydantic.ValidationError)


def say_left_out_runs() -> None:
    """Show each damage a reader worked around (store/check.py: `Damaged`, a run left out
    among them) as one line on stderr, once each; other warnings as Python shows them. Set for the whole process by
    `xtalk.cli` (sub-apps without `command_wrapper` included), again in each wrapped command."""
    warnings.simplefilter("default", Damaged)
    shown = warnings.showwarning
    if getattr(shown, "says_left_out", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, Damaged):
            print(f"xtalk: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    show.says_left_out = True
    warnings.showwarning = show
