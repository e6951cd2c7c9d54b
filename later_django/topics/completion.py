"""Finishing and retrying partition heads, in the transaction that stores the outcome.

``lock_heads`` runs first in ``record_outcomes``' transaction, before the
execution leases are checked, so heads are always locked before execution
leases (the order claiming uses too). ``settle`` then acts for every outcome
the worker still held: a finished head (success, or failure after its last
attempt) deletes its ``later_partition_job`` row and advances the head to the
next row; a retried or released head stays the head with a new runnable time.
Either way the partition lease is released (its owner kept as an affinity
hint) and must match this worker and the outcome's epoch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..db import placeholders, to_db
from ..sql import dialect
from ..states import FINISHED, Stage

logger = logging.getLogger(__name__)

PARTITION = 'namespace = %s AND topic = %s AND "partition" = %s'


@dataclass
class Head:
    topic: str
    partition: int
    sequence: int
    job_id: str
    owner: str | None
    epoch: int | None


def lock_heads(cursor: Any, namespace: str, outcomes: list[Any]) -> dict[str, Head]:
    """Lock the heads that outcomes may finish; return them by job id."""
    places = sorted(
        {
            (o.record.topic, o.record.partition)
            for o in outcomes
            if o.record is not None and o.record.topic is not None
        }
    )
    # A job whose record could not be decoded may still be a head; find it by id.
    unknown = sorted(o.job_id for o in outcomes if o.record is None)
    if not places and not unknown:
        return {}
    where, params = [], [namespace]
    if places:
        where.append(f'(h.topic, h."partition") IN ({", ".join(["(%s, %s)"] * len(places))})')
        params += [v for place in places for v in place]
    if unknown:
        where.append(f"h.job_id IN ({placeholders(len(unknown))})")
        params += unknown
    cursor.execute(
        'SELECT h.topic, h."partition", h.sequence, h.job_id, l.owner, l.epoch '
        "FROM later_partition_head h LEFT JOIN later_partition_lease l "
        'ON l.namespace = h.namespace AND l.topic = h.topic AND l."partition" = h."partition" '
        f"WHERE h.namespace = %s AND ({' OR '.join(where)}) "
        'ORDER BY h.topic, h."partition"' + dialect(cursor.db).LOCK_HEAD,
        params,
    )
    ids = {o.job_id for o in outcomes}
    return {row[3]: Head(*row) for row in cursor.fetchall() if row[3] in ids}


def settle(
    cursor: Any,
    namespace: str,
    owner: str,
    plans: list[tuple],
    heads: dict[str, Head],
    now: datetime,
) -> None:
    """Advance or keep the heads of held outcomes; ``plans`` are (outcome, stage, run_at, _)."""
    connection = cursor.db
    released, kept, finished = [], [], []
    for outcome, stage, run_at, _ in plans:
        head = heads.get(outcome.job_id)
        if head is None:
            continue  # not a head: an ordinary job, or one retried outside its partition
        if head.owner != owner or head.epoch != outcome.epoch:
            logger.error(
                "partition lease of topic=%s partition=%s is owner=%s epoch=%s, not owner=%s "
                "epoch=%s; head job id=%s left for claiming to settle",
                head.topic,
                head.partition,
                head.owner,
                head.epoch,
                owner,
                outcome.epoch,
                head.job_id,
            )
            continue
        released.append((to_db(connection, now), namespace, head.topic, head.partition))
        if stage in FINISHED:
            finished.append(head)
            if stage != Stage.SUCCESS:
                logger.warning(
                    "partition moves on: topic=%s partition=%s sequence=%s job id=%s %s",
                    head.topic,
                    head.partition,
                    head.sequence,
                    head.job_id,
                    stage,
                )
        else:
            kept.append((head, run_at or now))
            if run_at is not None and run_at > now:
                logger.info(
                    "partition blocked: topic=%s partition=%s until=%s by retrying job id=%s",
                    head.topic,
                    head.partition,
                    run_at.isoformat(),
                    head.job_id,
                )
    if released:
        dialect(cursor.db).execute_each(
            cursor, f"UPDATE later_partition_lease SET expires_at = %s WHERE {PARTITION}", released
        )
    if kept:
        dialect(cursor.db).execute_each(
            cursor,
            f"UPDATE later_partition_head SET available_at = %s WHERE {PARTITION}",
            [(to_db(connection, at), namespace, h.topic, h.partition) for h, at in kept],
        )
        dialect(cursor.db).execute_each(
            cursor,
            f"UPDATE later_partition_job SET available_at = %s WHERE {PARTITION} AND sequence = %s",
            [
                (to_db(connection, at), namespace, h.topic, h.partition, h.sequence)
                for h, at in kept
            ],
        )
    if finished:
        dialect(cursor.db).execute_each(
            cursor,
            f"DELETE FROM later_partition_job WHERE {PARTITION} AND sequence = %s",
            [(namespace, h.topic, h.partition, h.sequence) for h in finished],
        )
        advance(cursor, namespace, [(h.topic, h.partition) for h in finished], now)


def advance(
    cursor: Any, namespace: str, places: list[tuple[str, int]], now: datetime
) -> dict[tuple[str, int], str]:
    """Point locked heads at their partitions' first remaining rows, or end the partitions.

    The finished rows must already be deleted. Returns, per partition,
    "advanced", "emptied" or "deferred". A producer that has allocated a
    sequence number but not committed (PostgreSQL only) holds the partition's
    sequence row; its row is invisible here, so ending the partition now would
    strand it. Such a head is left on the finished job, runnable at once, and
    the next claim advances it (claiming skips heads whose job has ended).

    A new head is available from now at the earliest, not from its job's
    enqueue: the steal delay of rendezvous assignment counts from the moment a
    row becomes its partition's head, so the partition's preferred worker gets
    the first chance at every head, not only at the first of a backlog.
    """
    if not places:
        return {}
    connection = cursor.db
    places = sorted(set(places))
    steps: dict[tuple[str, int], str] = {}
    sql = dialect(connection)
    busy = sql.held_partitions(cursor, namespace, places)
    if busy:
        sql.execute_each(
            cursor,
            f"UPDATE later_partition_head SET available_at = %s WHERE {PARTITION}",
            [(to_db(connection, now), namespace, *place) for place in busy],
        )
        steps.update((place, "deferred") for place in busy)
        places = [place for place in places if place not in busy]
        if not places:
            return steps
    rows = sql.next_rows(cursor, namespace, places, now)
    following = {(row[0], row[1]): row[2:] for row in rows}
    if following:
        sql.execute_each(
            cursor,
            "UPDATE later_partition_head SET sequence = %s, job_id = %s, available_at = %s "
            f"WHERE {PARTITION}",
            [(*row, namespace, *place) for place, row in following.items()],
        )
        steps.update((place, "advanced") for place in following)
    emptied = [place for place in places if place not in following]
    if emptied:
        sql.execute_each(
            cursor,
            f"DELETE FROM later_partition_head WHERE {PARTITION}",
            [(namespace, *place) for place in emptied],
        )
        sql.execute_each(
            cursor,
            f"UPDATE later_partition_lease SET owner = NULL, expires_at = NULL WHERE {PARTITION}",
            [(namespace, *place) for place in emptied],
        )
        steps.update((place, "emptied") for place in emptied)
    return steps
