"""The native core of the explorer (``explorer/``, Rust binary ``xtalk-explore``).

The compiled model goes to the binary as JSON on stdin; it answers the counter maxima,
UPPAAL-style statistics and, on request, witness interleavings as JSON on stdout. The
algorithm is the one of :mod:`xtalk.model.explorer` (same states, same symmetry
representatives, same dynamic programming), with a compact state encoding and layers
dropped once expanded. Where the binary is absent (no cargo on the host) the Python
explorer is used and says once, on stderr, that it is the slow path.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from xtalk.model.semantics import Compiled
from xtalk.model.platform import CacheStorage

__all__ = ["binary", "available", "model_json", "run", "warn_slow_path", "NativeError"]

_ENV = "XTALK_EXPLORE"
_warned = False


class NativeError(RuntimeError):
    """The native core failed (a bug, not bad input: the model was validated before)."""


def binary() -> Path | None:
    """Path of ``xtalk-explore``: $XTALK_EXPLORE, the crate's release build, or PATH."""
    env = os.environ.get(_ENV)
    if env is not None:
        # an empty or missing path turns the native core off (tests use it for the slow path)
        return Path(env) if env and Path(env).is_file() else None
    root = Path(__file__).resolve().parents[3]
    built = root / "explorer" / "target" / "release" / "xtalk-explore"
    if built.is_file():
        return built
    found = shutil.which("xtalk-explore")
    return Path(found) if found else None


def available() -> bool:
    """True when the native core can be run."""
    return binary() is not None


def warn_slow_path() -> None:
    """Say once per process that the Python explorer (about 40 000 states/s) is in use."""
    global _warned
    if not _warned:
        _warned = True
        print(
            "xtalk model: native explorer not built (make setup needs cargo); "
            "using the Python explorer, the slow path (tens of times slower)",
            file=sys.stderr,
        )


def _conf(state: tuple) -> list:
    # per storage a list of [key, tags]; a DRAM row becomes a one-element list
    return [[[k, list(v) if isinstance(v, tuple) else [v]] for k, v in m] for m in state]


def model_json(cm: Compiled) -> dict:
    """The compiled model in the form ``xtalk-explore`` reads."""
    return {
        "n_tasks": cm.n_tasks,
        "n_transports": cm.n_transports,
        "n_epochs": cm.n_epochs,
        "n_comp": len(cm.comp_names),
        "n_gseg": cm.n_gseg,
        "epoch_seg": cm.epoch_seg,
        "mu": cm.mu,
        "transport_of": cm.transport_of,
        "storages": [
            {
                "cache": isinstance(s, CacheStorage),
                "ways": s.ways if isinstance(s, CacheStorage) else 1,
                "lru": not isinstance(s, CacheStorage) or s.policy == "lru",
                "state_rule": s.interference == "state",
            }
            for s in cm.storages
        ],
        "chains": [[[[list(step) for step in ch] for ch in seg] for seg in t] for t in cm.chains],
        "init_actual": _conf(cm.init_actual),
        "init_private": [_conf(p) for p in cm.init_private],
        "sym_classes": cm.sym_classes,
    }


def run(
    cm: Compiled,
    symmetry: bool = True,
    max_states: int | None = None,
    witness_cols: list[int] | None = None,
) -> dict:
    """Run the native core on ``cm``; the parsed JSON answer (see explorer/src/main.rs)."""
    exe = binary()
    if exe is None:
        raise NativeError("xtalk-explore is not built")
    model = model_json(cm)
    if not symmetry:
        model["sym_classes"] = []
    req: dict = {"model": model, "witness_cols": witness_cols or []}
    if max_states is not None:
        req["max_states"] = int(max_states)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([str(exe)], input=json.dumps(req), capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise NativeError(f"xtalk-explore exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    out = json.loads(proc.stdout)
    # CPU time of the core (user + system): on a loaded machine the stabler figure
    out["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out
