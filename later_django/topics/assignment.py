"""Spreading partitions over live workers by rendezvous hashing: an affinity hint.

Every worker computes, for each partition, a score per live worker and
prefers the partitions it scores highest on. All workers see the same live
set (``later_worker`` heartbeats), so they agree without talking; when a
worker joins or dies only its own share moves. The hint orders claiming, it
never decides it: a worker takes a partition that is not its own once the
head has waited ``steal_after`` seconds, and the partition lease is what
keeps two workers from running one partition at once.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from ..conf import later_settings
from ..db import connection_for, to_db


def score(worker_id: str, topic: str, partition: int) -> int:
    data = f"{worker_id}\x00{topic}\x00{partition}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def rendezvous_owner(topic: str, partition: int, workers: list[str]) -> str:
    """The live worker a partition prefers: the highest score, ties broken by id."""
    return max(workers, key=lambda w: (score(w, topic, partition), w))


def partition_token(topic: str, partition: int) -> str:
    """How claiming SQL names a partition: ``topic || ':' || partition``."""
    return f"{topic}:{partition}"


@dataclass(frozen=True)
class Preference:
    """The partitions one worker prefers; ``everything`` when it is the only live worker."""

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
        dead_before = timezone.now() - timedelta(seconds=later_settings.worker_dead_after)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT worker_id FROM later_worker WHERE namespace = %s AND heartbeat_at > %s",
                [self.namespace, to_db(connection, dead_before)],
            )
            workers = sorted({row[0] for row in cursor.fetchall()} | {self.worker_id})
            cursor.execute(
                "SELECT name, partition_count FROM later_topic WHERE namespace = %s",
                [self.namespace],
            )
            topics = sorted(cursor.fetchall())
        self.refreshed = time.monotonic()
        key = (tuple(workers), tuple(topics))
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
            for partition in range(count)
            if rendezvous_owner(topic, partition, workers) == self.worker_id
        )
        self.preference = Preference(tokens=mine, everything=False, steal_after=steal_after)
