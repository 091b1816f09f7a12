"""Errors the command line turns into one clear line and an exit code."""


class UsageError(Exception):
    """Bad input: printed as one line naming the field and the fix; exit code 2."""

    exit_code = 2


class AgentError(Exception):
    """The agent could not be found or failed outside a run; exit code 3."""

    exit_code = 3
