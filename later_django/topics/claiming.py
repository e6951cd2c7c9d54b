"""Claiming runnable partition heads, in one short transaction per round.

Claiming reads ``later_partition_head`` (one row per active partition), never
the retained partition rows. A head is runnable when it is due, its job is not
``waiting`` for a parent, and its partition lease is free or lapsed. Taking it
leases the partition to this worker with an epoch one higher than before,
gives the job an execution lease with that same epoch (so the fenced outcome
path applies unchanged), and pushes the head's ``available_at`` to the lease
expiry: a worker that dies leaves a head that becomes runnable again when its
lease lapses, with no recovery pass. Heads whose job already ended (cancelled
while queued) are skipped: the partition moves on to its next row.

The statements are each database's (``sql.take_heads``): on PostgreSQL picking
(``FOR UPDATE SKIP LOCKED``), leasing, pushing the heads and marking the jobs
running is one statement; SQLite serialises writers, so there it is a few
statements in the claim's write transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from ..claims import UNHELD_RECORD, Claimed, decode_row, store_lost_attempts, unheld_rows
from ..db import connection_for, from_db, hot_cursor, to_db, write_transaction
from ..sql import dialect
from ..states import FINISHED, Stage
from .assignment import Preference
from .completion import PARTITION, advance

logger = logging.getLogger(__name__)

ROUNDS = 4


@dataclass
class PartitionClaimed(Claimed):
    """A claimed head: the job, plus where it sits and the partition lease's epoch."""

    topic: str = ""
    partition: int = 0
    sequence: int = 0


def claim_heads(
    namespace: str,
    owner: str,
    *,
    free: int,
    lease_seconds: float,
    preference: Preference,
    queues: list[str] | None,
    running: set[str],
    using: str,
) -> list[PartitionClaimed]:
    """Lease up to ``free`` runnable heads to ``owner``; preferred partitions first."""
    claimed: list[PartitionClaimed] = []
    if not _any_due(namespace, using):
        return claimed  # one cheap read instead of a write transaction when no head is due
    for _ in range(ROUNDS):
        if free - len(claimed) < 1:
            break
        try:
            got, skipped = _round(
                namespace,
                owner,
                free - len(claimed),
                lease_seconds,
                preference,
                queues,
                running,
                using,
            )
        except DatabaseError as e:
            if not claimed:
                raise
            # The rounds before it committed: their heads are this worker's now, and
            # an error raised past them would leave them leased to nobody who knows.
            logger.warning(
                "a round of the partition claim failed; keeping the %s head(s) claimed "
                "before it error=%s",
                len(claimed),
                e,
            )
            break
        claimed += got
        if not skipped:
            break
    lost = [c for c in claimed if c.record is not None and _took_over(c)]
    if lost:
        store_lost_attempts(namespace, list(lost), using)
    return claimed


def unheld_heads(
    namespace: str, owner: str, held: set[str], *, using: str
) -> list[PartitionClaimed]:
    """Partition heads leased to ``owner`` in the database whose jobs it does not hold.

    The partition side of ``engine.claiming.unheld``: a claim that committed
    although its worker saw it fail. The head's execution lease and its
    partition's lease are both the worker's, with one epoch.
    """
    rows = unheld_rows(
        f"SELECT e.job_id, j.enqueued_at, e.started_at, e.epoch, NULL, {UNHELD_RECORD}, "
        'h.topic, h."partition", h.sequence FROM later_job_execution AS e '
        "JOIN later_partition_head AS h ON h.namespace = e.namespace AND h.job_id = e.job_id "
        "JOIN later_partition_lease AS l ON l.namespace = h.namespace AND l.topic = h.topic "
        'AND l."partition" = h."partition" AND l.owner = e.owner AND l.epoch = e.epoch '
        "LEFT JOIN later_jobs_index AS j ON j.namespace = e.namespace AND j.job_id = e.job_id",
        namespace,
        owner,
        held,
        using,
    )
    now = timezone.now()
    items = []
    for row in rows:
        item = decode_row(row[:6], owner, from_db(row[2]) or now, lazy=True)
        items.append(
            PartitionClaimed(
                **{f.name: getattr(item, f.name) for f in fields(Claimed)},
                topic=row[6],
                partition=row[7],
                sequence=row[8],
            )
        )
    return items


def _any_due(namespace: str, using: str) -> bool:
    connection = connection_for(using)
    with hot_cursor(using) as cursor:
        cursor.execute(
            "SELECT 1 FROM later_partition_head h LEFT JOIN later_jobs_index j "
            "ON j.namespace = h.namespace AND j.job_id = h.job_id WHERE h.namespace = %s "
            f"AND (h.available_at <= %s OR j.stage = '{Stage.CANCELLED}') LIMIT 1",
            [namespace, to_db(connection, timezone.now())],
        )
        return cursor.fetchone() is not None


def _took_over(item: PartitionClaimed) -> bool:
    attempts = item.record.attempts if item.record else []
    return len(attempts) >= 2 and attempts[-2].outcome == "lost"


def _round(namespace, owner, room, lease_seconds, preference, queues, running, using):
    sql = dialect(connection_for(using))
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    with write_transaction(using, hot=True) as cursor:
        rows, taken = sql.take_heads(
            cursor, namespace, owner, now, expires, room, preference, queues, running
        )
        ended = [r for r in rows if r[6] is None or r[6] in FINISHED]
        if ended:
            _skip(cursor, namespace, ended, now)
    items = []
    for head, row in taken:
        item = decode_row(row, owner, now)
        items.append(
            PartitionClaimed(
                **{f.name: getattr(item, f.name) for f in fields(Claimed)},
                topic=head[1],
                partition=head[2],
                sequence=head[3],
            )
        )
        logger.debug(
            "partition head claimed topic=%s partition=%s sequence=%s job id=%s epoch=%s",
            head[1],
            head[2],
            head[3],
            head[4],
            item.epoch,
        )
    return items, bool(ended)


def _skip(cursor: Any, namespace: str, ended: list[tuple], now) -> None:
    """Move partitions past heads whose job already ended.

    Such a head was cancelled while queued, or was left by an outcome that
    could not advance it while a producer held its partition's sequence row.
    """
    dialect(cursor.db).execute_each(
        cursor,
        f"DELETE FROM later_partition_job WHERE {PARTITION} AND sequence = %s",
        [(namespace, r[1], r[2], r[3]) for r in ended],
    )
    steps = advance(cursor, namespace, [(r[1], r[2]) for r in ended], now)
    for _, topic, partition, _, job_id, _, stage, *_ in ended:
        logger.debug(
            "partition head skipped topic=%s partition=%s job id=%s stage=%s: %s",
            topic,
            partition,
            job_id,
            stage,
            steps[(topic, partition)],
        )
