"""Keeping the retained log: the worker duty that compacts and cleans topics by their policy.

A topic declared with ``log_compact`` and/or ``log_retention`` in its OPTIONS
(``options.LogPolicy``) is kept by every worker of the backend: each turn
visits at most ``PARTITIONS_PER_TURN`` partitions that some group has
committed in, after the one the last turn stopped at, and on each runs one
compaction step and one cleanup step of at most ``batch`` records. A turn
that ran out of partitions or found a full batch says so, and the worker
runs the next turn soon instead of at the next sweep interval, so a busy log
is caught up with in bounded turns. Several workers may run turns at once:
both steps are idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ..options import BackendOptions, LogPolicy
from .compaction import _boundaries, cleanup_step, compact_step, compacted_to

PARTITIONS_PER_TURN = 64


@dataclass
class Turn:
    compacted: int = 0
    cleaned: int = 0
    after: tuple[str, int] | None = None  # the last partition visited, when the turn stopped
    more: bool = False  # work was left: run the next turn soon


def keep(
    later: BackendOptions,
    policies: dict[str, LogPolicy],
    after: tuple[str, int] | None,
    *,
    batch: int,
) -> Turn:
    """One bounded turn of upkeep over the topics of ``policies``, resuming after ``after``."""
    turn = Turn()
    visited = 0
    for topic in sorted(policies):
        if after is not None and topic < after[0]:
            continue
        policy = policies[topic]
        found = _boundaries(later, topic)
        numbers = sorted(p for p in found if after is None or (topic, p) > after)
        done = compacted_to(later, topic, numbers) if policy.compact else {}
        for partition in numbers:
            if visited == PARTITIONS_PER_TURN:
                turn.more = True
                return turn
            visited += 1
            turn.after = (topic, partition)
            if policy.compact:
                removed, reached = compact_step(
                    later, topic, partition, found[partition], done[partition], limit=batch
                )
                turn.compacted += removed
                turn.more |= reached - done[partition] == batch
            if policy.retention_seconds is not None:
                age = timedelta(seconds=policy.retention_seconds)
                removed = cleanup_step(later, topic, partition, found[partition], age, limit=batch)
                turn.cleaned += removed
                turn.more |= removed == batch
    turn.after = None  # every partition seen: the next turn starts from the first again
    return turn
