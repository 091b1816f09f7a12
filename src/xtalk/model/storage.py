"""Storage-component semantics: actual state vs private ("as if alone") state.

Seed 000 §4.4: a storage component keeps its actual state and, per task, the state it
would have if the task were alone; an access is a delayed interference when the two
differ. States are immutable tuples so that explorer states can be hashed.

A cache set is a tuple of tags, most recent first (LRU) or newest first (FIFO). A DRAM
bank's state is the open row (``None`` when no row is open).
"""

from __future__ import annotations

from typing import Optional

from xtalk.model.platform import CacheStorage, DramBank

__all__ = ["locate", "lookup", "update", "is_interference"]

Key = int
Tag = int


def locate(comp: CacheStorage | DramBank, address: int) -> tuple[Key, Tag]:
    """Map an address to (set index, tag) for a cache, or (bank, row) for DRAM."""
    if isinstance(comp, CacheStorage):
        line = address // comp.line_bytes
        return line % comp.sets, line // comp.sets
    row = address // comp.row_bytes
    return row % comp.banks, row


def lookup(comp: CacheStorage | DramBank, state: Optional[tuple], tag: Tag) -> bool:
    """True when ``tag`` hits in the set (cache) or is the open row (DRAM)."""
    if isinstance(comp, CacheStorage):
        return state is not None and tag in state
    return state == tag


def update(comp: CacheStorage | DramBank, state: Optional[tuple], tag: Tag):
    """State of the set / row buffer after an access to ``tag``."""
    if isinstance(comp, CacheStorage):
        cur = state or ()
        if comp.policy == "lru":
            rest = tuple(t for t in cur if t != tag)
            return ((tag,) + rest)[: comp.ways]
        # FIFO: a hit does not reorder; a miss inserts at the front and drops the oldest.
        if tag in cur:
            return cur
        return ((tag,) + cur)[: comp.ways]
    return tag


def is_interference(
    comp: CacheStorage | DramBank, actual: Optional[tuple], private: Optional[tuple], tag: Tag
) -> bool:
    """Seed 000 §4.4 decision for one access of a task.

    ``outcome`` mode: the access hits in the private view but misses in the actual one
    (the difference changes the latency). ``state`` mode: the seed's literal rule, the
    private and actual states of the accessed set / row buffer differ.
    """
    if comp.interference == "state":
        if isinstance(comp, CacheStorage):
            # An empty set and a never-touched set are the same state.
            return (actual or ()) != (private or ())
        return actual != private
    return lookup(comp, private, tag) and not lookup(comp, actual, tag)
