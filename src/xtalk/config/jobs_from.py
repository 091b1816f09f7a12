"""`jobs_from`: where a command application's jobs come from (docs/your-application.md).

    [victim]
    body = "command"
    argv = ["./build/periodic", "200"]
    probes = { 1 = "step", 2 = "wake" }          # names of the program's probe ids
    jobs_from = { probe = "step", release = "wake" }
    period = "5ms"                               # optional: releases every 5 ms

Exactly one source:
- `probe = "NAME"`: each span of that probe is a job (begin to end on one thread); with
  `end = "OTHER"`, a job runs from a begin of NAME to the next end of OTHER. `release = "WAKE"`
  names a probe the program marks at its periodic wake-up: each job's wake-up is the last
  WAKE before it. With a declared `period`, releases follow from it (response time, lateness,
  deadline misses); with neither, the jobs are execution only and every output says so.
- `trace = "main"` or `trace = "THREAD-NAME"`: jobs are the wake-up → run → block cycles of
  that thread in the kernel's scheduler trace (no code change).

A NAME is a name from `probes`, a name the program registers (XTALK_PROBE_NAME), or a
probe id as digits ("1"). The file model here checks the declaration; `plan_jobs_from` turns it
into the plan's `JobsFrom`, which run.json carries to the conversion (store/jobs.py).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import limits
from ..plan import JobsFrom

#: Whether the conversion derives jobs from the scheduler trace yet (store/jobs.py): until it
#: does, a `trace` declaration is refused when the plan is made, before anything runs.
TRACE_JOBS_IMPLEMENTED = True
#: The bodies whose jobs may be declared (the built-in bodies make their own jobs).
JOBS_FROM_BODIES = ("command", "attach")


class JobsFromSpec(BaseModel):
    """The `jobs_from` table of a `[victim]` or an `[[application]]`."""

    model_config = ConfigDict(extra="forbid")

    probe: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME, pattern=r"^[A-Za-z0-9_.+-]+$",
                                 description="jobs are the spans of this probe (a name or an id)")
    end: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME, pattern=r"^[A-Za-z0-9_.+-]+$",
                               description="with probe: a job ends at the next end of this probe instead")
    release: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME, pattern=r"^[A-Za-z0-9_.+-]+$",
                                   description="with probe: the probe the program marks at its periodic wake-up")
    trace: Optional[str] = Field(default=None, min_length=1, max_length=limits.MAX_NAME,
                                 description="jobs from the scheduler trace of this thread: \"main\" or a thread name")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.probe is None) == (self.trace is None):
            raise ValueError("give exactly one of 'probe' (jobs are a probe's spans) or 'trace' (jobs from the "
                             "scheduler trace), e.g. { probe = \"step\" } or { trace = \"main\" }")
        if self.trace is not None and (self.end is not None or self.release is not None):
            which = "end" if self.end is not None else "release"
            raise ValueError(f"'{which}' names a probe and goes with 'probe', not 'trace'; remove it")
        return self


def check_probe_names(names: dict[str, str]) -> dict[str, str]:
    """The `probes` table (id -> name): ids are integers 0..2^32-1, names are unique. Returns
    it with the ids written canonically. ValueError `probes.KEY: problem; fix`."""
    out: dict[str, str] = {}
    for key, name in names.items():
        if not key.isdigit() or int(key) >= 1 << 32:
            raise ValueError(f"probes.{key}: a probe id is an integer 0..4294967295, e.g. probes = {{ 1 = \"step\" }}")
        if not name or len(name) > limits.MAX_NAME or not all(c.isalnum() or c in "_.+-" for c in name) or name.isdigit():
            raise ValueError(f"probes.{key}: {name!r} is not a probe name; use letters, digits and . _ + - (not only digits)")
        if name in out.values():
            raise ValueError(f"probes.{key}: the name {name!r} is given twice; give each probe its own name")
        out[str(int(key))] = name
    return out


def check_jobs_from(spec: JobsFromSpec, body: str, names: dict[str, str]) -> None:
    """The declaration against its application: a command body, and each probe named either
    in `probes`, as digits, or (with no `probes` table) left to the program's own names.
    ValueError `jobs_from.FIELD: problem; fix`."""
    if body not in JOBS_FROM_BODIES:
        raise ValueError(f"jobs_from: body '{body}' makes its own jobs; jobs_from is for body 'command' (your program)")
    if body == "attach" and spec.trace is None:
        raise ValueError("jobs_from: an attached process's jobs come from the trace (xtalk did not start it, so its probes "
                         "have nowhere to write); write jobs_from = { trace = \"main\" } or a thread name")
    for field in ("probe", "end", "release"):
        value = getattr(spec, field)
        if value is None or value.isdigit() or not names or value in names.values():
            continue
        raise ValueError(f"jobs_from.{field}: no probe named {value!r} in 'probes' ({', '.join(sorted(names.values()))}); "
                         "name it there, or give its id as digits")


#: Warm-up jobs of a declared application unless the file says: its first job (cold caches,
#: first-touch page faults).
DEFAULT_WARMUP_JOBS = 1


def plan_jobs_from(spec: Optional[JobsFromSpec], period_ns: Optional[int], warmup_jobs: Optional[int]) -> Optional[JobsFrom]:
    """The plan's form of the declaration: `period_ns` is the declared period (releases
    follow from it) or None (releases only from a release probe, else execution only);
    `warmup_jobs` the file's, or None for the default."""
    if spec is None:
        return None
    return JobsFrom(probe=spec.probe, end=spec.end, release=spec.release, trace=spec.trace, period_ns=period_ns,
                    warmup_jobs=DEFAULT_WARMUP_JOBS if warmup_jobs is None else warmup_jobs)
