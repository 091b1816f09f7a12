"""State-count estimate before an exploration, and the budget that refuses a model.

The estimate explores the first three epochs for real (same engine, same reductions) and
extrapolates: each remaining epoch is counted as large as the last probed one times its
growth over the one before (growth below 1 counts as 1). Epoch 0 starts from one state
and later epochs from many, so the epoch counts grow and then saturate once the storage
states they start from are all reachable; the extrapolation overestimates models still
growing at the third epoch (docs/models.md gives measured examples). A model of at most
three epochs is counted exactly. The probes (epoch 0, then epochs 0–2) may use the budget's share of their epochs
(budget × k / epochs): a probe beyond it is refused at once, as the later epochs are
not expected to be smaller than the first ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xtalk.model.semantics import Compiled
from xtalk.sched.inputs import InputError

__all__ = ["Estimate", "estimate_states", "check_budget", "DEFAULT_BUDGET", "PROBE_EPOCHS"]

#: State budgets: about one minute of exploration on one core for each engine.
DEFAULT_BUDGET = {"native": 20_000_000, "python": 1_000_000}
PROBE_EPOCHS = 3


@dataclass
class Estimate:
    """An estimated number of states and where it came from."""

    states: int
    exact: bool
    probed: list[int]  # states of each probed epoch (over_probe: [number of epochs probed])
    n_epochs: int
    over_probe: bool = False  # the probe itself exceeded the budget (states is a lower bound)

    def describe(self) -> str:
        """One phrase: the estimate and its basis."""
        if self.exact:
            return f"{self.states} states (counted: {self.n_epochs} epoch(s))"
        if self.over_probe:
            return (
                f"more than {self.states} states in the first {self.probed[0]} of {self.n_epochs} epoch(s) alone "
                f"(their share of the budget)"
            )
        per = ", ".join(str(s) for s in self.probed)
        return f"about {self.states:.3g} states (first {len(self.probed)} of {self.n_epochs} epochs: {per} states)"


def _truncated(cm: Compiled, k: int) -> Compiled:
    # the same model cut after k epochs: the probe explores exactly those epochs
    return dataclasses.replace(
        cm, epoch_bounds=cm.epoch_bounds[: k + 1], epoch_seg=[row[:k] for row in cm.epoch_seg]
    )


def estimate_states(cm: Compiled, budget: int, engine: str = "auto") -> Estimate:
    """Estimate the states of exploring ``cm`` (probe capped at ``budget`` states)."""
    from xtalk.model.explorer import ExplorationLimit, explore

    # epoch 0 alone first: a model far over the budget is refused after its share only
    for k in sorted({1, min(PROBE_EPOCHS, cm.n_epochs)}):
        cap = max(1, budget * k // cm.n_epochs)
        try:
            res = explore(_truncated(cm, k), witnesses=False, max_states=cap, engine=engine)
        except ExplorationLimit:
            return Estimate(states=cap, exact=False, probed=[k], n_epochs=cm.n_epochs, over_probe=True)
    if k == cm.n_epochs:
        return Estimate(states=res.states, exact=True, probed=res.epoch_states[:k], n_epochs=cm.n_epochs)
    probed = res.epoch_states[:k]
    # growth from epoch 1 on: epoch 0 starts from a single state and would inflate it
    growth = max(1.0, probed[-1] / probed[-2]) if k >= 3 and probed[-2] > 0 else 1.0
    rest = (cm.n_epochs - k) * probed[-1] * growth
    return Estimate(states=int(sum(probed) + rest) + 1, exact=False, probed=probed, n_epochs=cm.n_epochs)


def check_budget(cm: Compiled, budget: int, engine: str = "auto") -> Estimate:
    """The estimate, or :class:`InputError` (one line, with the flag to force) beyond ``budget``."""
    est = estimate_states(cm, budget, engine)
    if est.over_probe or est.states > budget:
        raise InputError(
            "model",
            f"{est.describe()}, over the budget of {budget} states",
            "--force to explore anyway, --max-states N for another budget, or fewer cores, segments or requests",
        )
    return est
