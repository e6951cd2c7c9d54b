"""Spreading partitions over live workers by rendezvous hashing: an affinity hint.

Every worker computes, for each partition, a score per live worker, and the
partitions go to the workers they score highest on, with the loads kept even:
each live worker prefers ``count // workers`` or one more of a topic's
partitions (pure highest-score choice leaves a worker with none of eight
partitions one time in 128 with two workers). All workers see the same live
set (``later_worker`` heartbeats), so they agree without talking; when a
worker joins or dies, mostly its own share moves. The hint orders claiming, it
never decides it: a worker takes a partition that is not its own once the
head has waited ``steal_after`` seconds, and the partition lease is what
keeps two workers from running one partition at once.

A worker that died keeps its place in the spread until ``LATER_WORKER_DEAD_AFTER``
(so that a late heartbeat does not move partitions about), but once it has been
silent for ``SILENT_AFTER_BEATS`` heartbeat intervals its partitions are
*orphaned*: every live worker claims their heads at once, as its own, instead of
stealing one head per ``steal_after``.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from typing import cast

from django.utils import timezone

from ..conf import later_settings
from ..db import connection_for, to_db

# Heartbeat intervals of silence after which a worker's partitions are orphaned.
SILENT_AFTER_BEATS = 3


def score(worker_id: str, topic: str, partition: int) -> int:
    data = f"{worker_id}\x00{topic}\x00{partition}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def spread(name: str, count: int, workers: Sequence[str]) -> list[str]:
    """Each of ``count`` partitions' preferred worker, with every worker given
    ``count // len(workers)`` or one more of them.

    Rendezvous hashing with bounded loads: the (worker, partition) pairs are
    taken from the highest score down, and a pair is kept while its partition
    has no worker yet and its worker is below its bound. The result depends only
    on the set of workers, never on their order.
    """
    if not workers:
        raise ValueError("spread() needs at least one worker")
    return list(_spread(name, count, tuple(sorted(set(workers)))))


# A consumer group spreads its partitions at every poll, over a live set that
# rarely changes: 256 partitions over 10 members cost about 4 ms to work out.
@lru_cache(maxsize=256)
def _spread(name: str, count: int, workers: tuple[str, ...]) -> tuple[str, ...]:
    floor, extra = divmod(count, len(workers))
    pairs = sorted(((score(w, name, p), w, p) for w in workers for p in range(count)), reverse=True)
    owners: list[str | None] = [None] * count
    load: Counter[str] = Counter()
    left = count
    for _, worker, partition in pairs:
        if owners[partition] is not None:
            continue
        if load[worker] == floor:
            if not extra:
                continue
            extra -= 1
        elif load[worker] > floor:
            continue
        owners[partition] = worker
        load[worker] += 1
        left -= 1
        if not left:
            break
    return tuple(cast("list[str]", owners))


def partition_token(topic: str, partition: int) -> str:
    """How claiming SQL names a partition: ``topic || ':' || partition``."""
    return f"{topic}:{partition}"


@dataclass(frozen=True)
class Preference:
    """The partitions one worker claims at once (its own share, and the shares of
    silent workers); ``everything`` when it is the only live worker. It takes
    other heads once they have waited ``steal_after`` seconds."""

    tokens: frozenset[str] = frozenset()
    everything: bool = True
    steal_after: float = 0.0


@dataclass
class Assignment:
    """One worker's cached view of the live set and of its preferred partitions."""

    namespace: str
    worker_id: str
    using: str
    refreshed: float = field(default=-1e18)
    preference: Preference = field(default_factory=Preference)
    _key: tuple = ()

    def current(self) -> Preference:
        """The preference, recomputed at most once per heartbeat interval."""
        if time.monotonic() - self.refreshed >= later_settings.heartbeat_interval:
            self.refresh()
        return self.preference

    def refresh(self) -> None:
        connection = connection_for(self.using)
        now = timezone.now()
        dead_before = now - timedelta(seconds=later_settings.worker_dead_after)
        silent_before = now - timedelta(
            seconds=SILENT_AFTER_BEATS * later_settings.heartbeat_interval
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT worker_id, heartbeat_at <= %s FROM later_worker "
                "WHERE namespace = %s AND heartbeat_at > %s",
                [to_db(connection, silent_before), self.namespace, to_db(connection, dead_before)],
            )
            heard = cursor.fetchall()
            workers = sorted({row[0] for row in heard} | {self.worker_id})
            silent = frozenset(w for w, quiet in heard if quiet and w != self.worker_id)
            cursor.execute(
                "SELECT name, partition_count FROM later_topic WHERE namespace = %s",
                [self.namespace],
            )
            topics = sorted(cursor.fetchall())
        self.refreshed = time.monotonic()
        key = (tuple(workers), tuple(topics), silent)
        if key == self._key:
            return
        self._key = key
        steal_after = later_settings.heartbeat_interval
        if len(workers) == 1:
            self.preference = Preference(everything=True, steal_after=steal_after)
            return
        mine = frozenset(
            partition_token(topic, partition)
            for topic, count in topics
            for partition, owner in enumerate(spread(topic, count, workers))
            if owner == self.worker_id or owner in silent
        )
        self.preference = Preference(tokens=mine, everything=False, steal_after=steal_after)
