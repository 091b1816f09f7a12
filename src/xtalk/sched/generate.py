"""Random task-set generation, always seeded through a numpy ``Generator``.

* UUniFast (Bini & Buttazzo 2005) and UUniFast-Discard (Davis & Burns 2009) for a given
  total utilisation.
* Seed 001 §3.4.4 distributions (Baker 2005 / Brandenburg 2011, as used for LITMUS^RT):
  uni-light U[0.001, 0.1], uni-medium U[0.1, 0.4], exp-light exponential with mean 0.10
  (redrawn outside (0, 1]), bimo-light U[0.001, 0.5) w.p. 8/9 or U[0.5, 0.9] w.p. 1/9,
  bimo-medium U[0.001, 0.5) w.p. 6/9 or U[0.5, 0.9] w.p. 3/9 (the seed names them only;
  the parameters follow Brandenburg's dissertation).
* Periods uniform in [10, 100] ms (seed 001 §3.4.4), log-uniform, or drawn from a set
  (small hyperperiods for simulation).
* n = m · k tasks (seed 001 §3.4.4: m processors, k tasks per processor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from xtalk.sched.taskset import Task

if TYPE_CHECKING:  # numpy: loaded by a draw, not by `xtalk sched --help`
    import numpy as np

__all__ = [
    "DISTRIBUTIONS",
    "uunifast",
    "uunifast_discard",
    "draw_utilizations",
    "draw_periods",
    "make_tasks",
    "generate_taskset",
    "generate_until_capacity",
]

DISTRIBUTIONS = ("uni-light", "uni-medium", "exp-light", "bimo-light", "bimo-medium")


def uunifast(n: int, total: float, rng: np.random.Generator) -> np.ndarray:
    """n utilisations summing to ``total`` uniformly over the simplex (Bini & Buttazzo)."""
    import numpy as np

    if n < 1 or total < 0:
        raise ValueError("need n >= 1 and total >= 0")
    out = np.empty(n)
    rest = total
    for i in range(n - 1):
        nxt = rest * rng.random() ** (1.0 / (n - 1 - i))
        out[i] = rest - nxt
        rest = nxt
    out[-1] = rest
    return out


def uunifast_discard(n: int, total: float, rng: np.random.Generator, max_tries: int = 10_000) -> np.ndarray:
    """UUniFast redrawn until every u_i ≤ 1 (Davis & Burns, for total > 1 on multiprocessors)."""
    import numpy as np

    for _ in range(max_tries):
        u = uunifast(n, total, rng)
        if np.all(u <= 1.0):
            return u
    raise RuntimeError(f"no valid utilisation vector after {max_tries} tries (n={n}, total={total})")


def _one(dist: str, rng: np.random.Generator) -> float:
    if dist == "uni-light":
        return float(rng.uniform(0.001, 0.1))
    if dist == "uni-medium":
        return float(rng.uniform(0.1, 0.4))
    if dist == "exp-light":
        while True:
            u = float(rng.exponential(0.10))
            if 0 < u <= 1:
                return u
    if dist in ("bimo-light", "bimo-medium"):
        heavy = 1 / 9 if dist == "bimo-light" else 3 / 9
        if rng.random() < heavy:
            return float(rng.uniform(0.5, 0.9))
        return float(rng.uniform(0.001, 0.5))
    raise ValueError(f"unknown distribution {dist!r}; use one of {', '.join(DISTRIBUTIONS)}")


def draw_utilizations(n: int, dist: str, rng: np.random.Generator) -> np.ndarray:
    """n utilisations from a named seed 001 distribution."""
    import numpy as np

    return np.array([_one(dist, rng) for _ in range(n)])


def draw_periods(
    n: int,
    rng: np.random.Generator,
    kind: str = "uniform",
    low: float = 10.0,
    high: float = 100.0,
    choices: Sequence[float] | None = None,
    integer: bool = True,
) -> np.ndarray:
    """Periods in ms: ``uniform`` U[low, high] (seed 001), ``log-uniform``, or ``choice``
    from ``choices`` (e.g. divisors of 120 for short hyperperiods). ``integer`` rounds to ms."""
    import numpy as np

    if kind == "uniform":
        p = rng.uniform(low, high, n)
    elif kind == "log-uniform":
        p = np.exp(rng.uniform(np.log(low), np.log(high), n))
    elif kind == "choice":
        if not choices:
            raise ValueError("kind='choice' needs choices")
        return rng.choice(np.asarray(choices, dtype=float), n)
    else:
        raise ValueError(f"unknown period kind {kind!r}; use uniform, log-uniform or choice")
    return np.maximum(np.round(p), 1.0) if integer else p


def make_tasks(utils: np.ndarray, periods: np.ndarray, prefix: str = "T") -> list[Task]:
    """Tasks with e_i = u_i · p_i and implicit deadlines."""
    return [Task(f"{prefix}{i + 1}", float(u * p), float(p)) for i, (u, p) in enumerate(zip(utils, periods))]


def generate_taskset(
    rng: np.random.Generator,
    m: int = 1,
    k: int = 5,
    dist: str | None = "uni-medium",
    total: float | None = None,
    periods: str = "uniform",
    choices: Sequence[float] | None = None,
) -> list[Task]:
    """n = m·k tasks. With ``total`` the utilisations come from UUniFast(-Discard) and sum to
    it; otherwise each is drawn from ``dist``."""
    n = m * k
    if total is not None:
        utils = uunifast(n, total, rng) if total <= 1 else uunifast_discard(n, total, rng)
    else:
        utils = draw_utilizations(n, dist or "uni-medium", rng)
    return make_tasks(utils, draw_periods(n, rng, periods, choices=choices))


def generate_until_capacity(
    rng: np.random.Generator, capacity: float, dist: str, periods: str = "uniform"
) -> list[Task]:
    """Seed 001 §3.4.4: add tasks while the total utilisation stays within ``capacity``."""
    import numpy as np

    utils: list[float] = []
    while True:
        u = _one(dist, rng)
        if sum(utils) + u > capacity:
            break
        utils.append(u)
    arr = np.array(utils)
    return make_tasks(arr, draw_periods(len(arr), rng, periods))
