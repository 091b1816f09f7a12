"""A target from its command-line form (`--target`, `$XTALK_TARGET`): the one place that knows
every kind of target, above them all."""

from __future__ import annotations

from ..errors import UsageError
from .base import LocalTarget, Target
from .ssh import SshTarget


def from_spec(spec: str) -> Target:
    """A target from its command-line form: `local`, or
    `ssh://[user@]host[:port][?identity=KEY&known_hosts=FILE&agent=REMOTE_PATH&name=NAME]`, or
    `labgrid://PLACE?env=FILE[&coordinator=HOST:PORT...]` (targets/labgrid.py)."""
    if spec in ("", "local"):
        return LocalTarget()
    if spec.startswith("ssh://"):
        return SshTarget.from_url(spec)
    if spec.startswith("labgrid://"):
        from .labgrid import LabgridBoard  # labgrid itself is loaded only when a board is made ready

        return LabgridBoard.from_url(spec)
    raise UsageError(f"--target {spec!r}: unknown target; write `local`, `ssh://user@host:port` or "
                     "`labgrid://PLACE?env=FILE`")
