"""Claiming commands from the delivery queue, in one short transaction.

When at least ``BATCH`` commands are ready a worker takes up to ``BATCH`` (as
many as it has free slots) in one statement; otherwise it takes one, so that a
newly started worker can share a short queue. PostgreSQL skips rows other
workers hold (``FOR UPDATE SKIP LOCKED``); SQLite serialises writers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from ..db import connection_for, from_db, is_postgres, placeholders, to_db, write_transaction
from ..exceptions import PayloadDecodeError
from ..records import Attempt, JobRecord, job_key, to_micros

logger = logging.getLogger(__name__)

BATCH = 16
LOST_ATTEMPTS_LIMIT = 5


@dataclass
class Claimed:
    job_id: str
    epoch: int
    enqueued_at: datetime
    available_at: datetime
    record: JobRecord | None
    decode_error: PayloadDecodeError | None = None


PG_CLAIM = """
WITH picked AS (
    SELECT id, priority, available_at FROM later_delivery_queue
    WHERE namespace = %s AND available_at <= %s {queue_filter}
    ORDER BY priority DESC, available_at, id
    LIMIT {batch} FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT id, available_at,
           row_number() OVER (ORDER BY priority DESC, available_at, id) AS position,
           count(*) OVER () AS ready
    FROM picked
)
UPDATE later_delivery_queue AS q
SET lease_owner = %s, available_at = %s
FROM ranked
WHERE q.id = ranked.id AND ranked.position <= CASE WHEN ranked.ready >= {batch} THEN %s ELSE 1 END
RETURNING q.job_id, q.enqueued_at, ranked.available_at
"""


def _pick_sqlite(cursor, namespace, queues, now, owner, expires, free, connection):
    queue_filter = ""
    params: list[object] = [namespace, to_db(connection, now)]
    if queues:
        queue_filter = f"AND queue_name IN ({placeholders(len(queues))})"
        params.extend(queues)
    cursor.execute(
        "SELECT id, job_id, enqueued_at, available_at FROM later_delivery_queue "
        f"WHERE namespace = %s AND available_at <= %s {queue_filter} "
        f"ORDER BY priority DESC, available_at, id LIMIT {BATCH}",
        params,
    )
    rows = cursor.fetchall()
    take = rows[: min(free, BATCH)] if len(rows) >= BATCH else rows[:1]
    if not take:
        return []
    cursor.execute(
        "UPDATE later_delivery_queue SET lease_owner = %s, available_at = %s "
        f"WHERE id IN ({placeholders(len(take))})",
        [owner, to_db(connection, expires), *[r[0] for r in take]],
    )
    return [(r[1], r[2], r[3]) for r in take]


def claim(
    namespace: str,
    owner: str,
    *,
    queues: list[str] | None,
    free: int,
    lease_seconds: float,
    using: str,
) -> list[Claimed]:
    """Lease up to ``free`` ready commands to ``owner`` and mark their jobs running."""
    if free < 1:
        return []
    connection = connection_for(using)
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    with write_transaction(using) as cursor:
        if is_postgres(connection):
            queue_filter = "AND queue_name = ANY(%s)" if queues else ""
            params: list[object] = [namespace, now]
            if queues:
                params.append(list(queues))
            params += [owner, expires, min(free, BATCH)]
            cursor.execute(PG_CLAIM.format(queue_filter=queue_filter, batch=BATCH), params)
            picked = cursor.fetchall()
        else:
            picked = _pick_sqlite(cursor, namespace, queues, now, owner, expires, free, connection)
        if not picked:
            return []
        ids = [p[0] for p in picked]
        cursor.execute(
            "SELECT key, value FROM later_storage "
            f"WHERE namespace = %s AND key IN ({placeholders(len(ids))})",
            [namespace, *[job_key(i) for i in ids]],
        )
        raw = {key[4:]: bytes(value) for key, value in cursor.fetchall()}
        epochs = _take_execution_leases(cursor, connection, namespace, owner, ids, now, expires)
        claimed: list[Claimed] = []
        updates = []
        for job_id, enqueued_at, available_at in picked:
            item = Claimed(
                job_id=job_id,
                epoch=epochs[job_id],
                enqueued_at=from_db(enqueued_at) or now,
                available_at=from_db(available_at) or now,
                record=None,
            )
            if job_id not in raw:
                item.decode_error = PayloadDecodeError(
                    f"Job {job_id!r} has a queue command but no stored record; it must have "
                    "been deleted while queued."
                )
            else:
                try:
                    record = JobRecord.decode(raw[job_id], job_id=job_id)
                except PayloadDecodeError as e:
                    item.decode_error = e
                else:
                    for attempt in record.attempts:
                        if attempt.outcome is None:
                            attempt.outcome = "lost"
                            attempt.finished_at = to_micros(now)
                    record.attempts.append(Attempt(worker_id=owner, started_at=to_micros(now) or 0))
                    item.record = record
                    updates.append((record.encode(), namespace, job_key(job_id)))
            claimed.append(item)
        if updates:
            cursor.executemany(
                "UPDATE later_storage SET value = %s WHERE namespace = %s AND key = %s", updates
            )
        cursor.execute(
            "UPDATE later_jobs_index SET stage = 'running', attempts = attempts + 1, "
            "started_at = %s, transitioned_at = %s, worker_id = %s, revision = revision + 1 "
            f"WHERE namespace = %s AND job_id IN ({placeholders(len(ids))})",
            [to_db(connection, now), to_db(connection, now), owner, namespace, *ids],
        )
    return claimed


def _take_execution_leases(cursor, connection, namespace, owner, ids, now, expires):
    values = ", ".join(["(%s, %s, %s, 1, %s, %s)"] * len(ids))
    params: list[object] = []
    for job_id in ids:
        params += [namespace, job_id, owner, to_db(connection, now), to_db(connection, expires)]
    cursor.execute(
        "INSERT INTO later_job_execution "
        "(namespace, job_id, owner, epoch, started_at, lease_expires_at) "
        f"VALUES {values} ON CONFLICT (namespace, job_id) DO UPDATE SET "
        "owner = excluded.owner, epoch = later_job_execution.epoch + 1, "
        "started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at "
        "RETURNING job_id, epoch",
        params,
    )
    return dict(cursor.fetchall())
