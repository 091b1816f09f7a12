"""Errors the command line turns into one clear line and an exit code."""


class UsageError(Exception):
    """Bad input: printed as one line naming the field and the fix; exit code 2."""

    exit_code = 2


class AgentError(Exception):
    """The agent could not be found or failed outside a run; exit code 3."""

    exit_code = 3


class Damaged(UserWarning):
    """Damage a reader worked around (the message names the file and what it did without);
    the command line says each as one `xtalk: warning:` line. Here, not in store/check.py
    where it is raised, so that the command line sets up its display without the store."""


#: Exit codes of `xtalk run` besides 2 and 3 above: every run completed (0); some runs
#: failed, timed out or were not started (4); no run completed (5); interrupted (130).
#: docs/experiments.md documents them.
EXIT_OK = 0
EXIT_SOME_RUNS_FAILED = 4
EXIT_ALL_RUNS_FAILED = 5
EXIT_INTERRUPTED = 130


def runs_exit_code(completed: int, planned: int) -> int:
    """The exit code for `completed` of `planned` runs."""
    if completed >= planned:
        return EXIT_OK
    return EXIT_SOME_RUNS_FAILED if completed > 0 else EXIT_ALL_RUNS_FAILED
