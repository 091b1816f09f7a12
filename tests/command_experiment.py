"""The smallest experiment around an unmodified program: a `command` victim that `xtalk run`
starts once a second, repeated `reps` times, with a 1.5 s timeout (a program that sleeps past it
plants a timed-out run). Shared by the tests of exit codes and of the verdict document."""

from __future__ import annotations

import json
from pathlib import Path

TEMPLATE = """
name = "{name}"
repetitions = {reps}
settle = "10ms"
timeout = "1.5s"
[victim]
body = "command"
argv = {argv}
period = "1s"
"""


def command_experiment(path: Path, name: str, argv: list[str], reps: int = 1,
                       epsilon_bound: str | None = None) -> Path:
    """Write the experiment to `path` (an ε bound on the median execution time if given)."""
    text = TEMPLATE.format(name=name, reps=reps, argv=json.dumps(argv))
    if epsilon_bound is not None:
        text += f'epsilon = {{ metric = "exec", statistic = "median", bound = "{epsilon_bound}" }}\n'
    path.write_text(text)
    return path
