"""Claiming commands from the delivery queue, in one short transaction.

When at least ``SHARE_AT`` commands are ready a worker takes as many as it has
room for, up to ``BATCH``, at once; otherwise it takes one, so that a newly
started worker can share a short queue. On PostgreSQL the whole claim — lease
the commands (``FOR UPDATE SKIP LOCKED``), read their records, take their
execution leases, mark their index rows running — is one statement, run in
autocommit. SQLite serialises writers, so there it is a few statements in one
write transaction.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.utils import timezone

from ..claims import Claimed, decode_row, store_lost_attempts
from ..db import (
    connection_for,
    hot_cursor,
    is_postgres,
    placeholders,
    to_db,
    write_transaction,
)
from ..records import job_key
from ..states import Stage

# The logger keeps the name it had before the module moved, which operators filter on.
logger = logging.getLogger("later_django.worker.claiming")

# The most commands one claim takes. A claim, and a batch of outcomes, costs about
# the same for one job as for many: 48 drained no-op jobs about 1.5x as fast as 16.
BATCH = 48
# Fewer ready commands than this are claimed one at a time, so workers share them.
SHARE_AT = 16
LOST_ATTEMPTS_LIMIT = 5


PG_CLAIM = f"""
WITH picked AS (
    SELECT id, priority, available_at FROM later_delivery_queue
    WHERE namespace = %(ns)s AND available_at <= %(now)s {{queue_filter}}
      AND lease_owner IS DISTINCT FROM %(owner)s
    ORDER BY priority DESC, available_at, id
    LIMIT {{batch}} FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT id, available_at,
           row_number() OVER (ORDER BY priority DESC, available_at, id) AS position,
           count(*) OVER () AS ready
    FROM picked
), claimed AS (
    UPDATE later_delivery_queue AS q
    SET lease_owner = %(owner)s, available_at = %(expires)s
    FROM ranked
    WHERE q.id = ranked.id
      AND ranked.position <= CASE WHEN ranked.ready >= {{share_at}} THEN %(room)s ELSE 1 END
    RETURNING q.job_id, q.enqueued_at, ranked.available_at AS ready_at, ranked.position
), previous AS (
    SELECT job_id, owner FROM later_job_execution
    WHERE namespace = %(ns)s AND job_id IN (SELECT job_id FROM claimed)
), leased AS (
    INSERT INTO later_job_execution (namespace, job_id, owner, epoch, started_at, lease_expires_at)
    SELECT %(ns)s, job_id, %(owner)s, 1, %(now)s, %(expires)s FROM claimed
    ON CONFLICT (namespace, job_id) DO UPDATE SET
        owner = excluded.owner, epoch = later_job_execution.epoch + 1,
        started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at
    RETURNING job_id, epoch
), marked AS (
    UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1,
        started_at = %(now)s, transitioned_at = %(now)s, worker_id = %(owner)s,
        revision = revision + 1
    WHERE namespace = %(ns)s AND job_id IN (SELECT job_id FROM claimed)
)
SELECT c.job_id, c.enqueued_at, c.ready_at, l.epoch, p.owner, s.value
FROM claimed AS c
JOIN leased AS l ON l.job_id = c.job_id
LEFT JOIN previous AS p ON p.job_id = c.job_id
LEFT JOIN later_storage AS s ON s.namespace = %(ns)s AND s.key = 'job:' || c.job_id
ORDER BY c.position
"""


def _claim_postgres(cursor: Any, namespace, owner, queues, now, expires, room) -> list[tuple]:
    queue_filter = "AND queue_name = ANY(%(queues)s)" if queues else ""
    cursor.execute(
        PG_CLAIM.format(queue_filter=queue_filter, batch=BATCH, share_at=SHARE_AT),
        {
            "ns": namespace,
            "now": now,
            "queues": list(queues or ()),
            "owner": owner,
            "expires": expires,
            "room": min(room, BATCH),
        },
    )
    return cursor.fetchall()


def _claim_sqlite(cursor: Any, connection, namespace, owner, queues, now, expires, room):
    queue_filter = ""
    params: list[object] = [namespace, to_db(connection, now)]
    if queues:
        queue_filter = f"AND queue_name IN ({placeholders(len(queues))})"
        params.extend(queues)
    cursor.execute(
        "SELECT id, job_id, enqueued_at, available_at FROM later_delivery_queue "
        f"WHERE namespace = %s AND available_at <= %s {queue_filter} "
        "AND lease_owner IS NOT %s "
        f"ORDER BY priority DESC, available_at, id LIMIT {BATCH}",
        [*params, owner],
    )
    rows = cursor.fetchall()
    take = rows[: min(room, BATCH)] if len(rows) >= SHARE_AT else rows[:1]
    if not take:
        return []
    ids = [r[1] for r in take]
    marks = placeholders(len(ids))
    cursor.execute(
        "UPDATE later_delivery_queue SET lease_owner = %s, available_at = %s "
        f"WHERE id IN ({placeholders(len(take))})",
        [owner, to_db(connection, expires), *[r[0] for r in take]],
    )
    cursor.execute(
        "SELECT job_id, owner FROM later_job_execution "
        f"WHERE namespace = %s AND job_id IN ({marks})",
        [namespace, *ids],
    )
    previous = dict(cursor.fetchall())
    values = ", ".join(["(%s, %s, %s, 1, %s, %s)"] * len(ids))
    lease_params: list[object] = []
    for job_id in ids:
        lease_params += [
            namespace,
            job_id,
            owner,
            to_db(connection, now),
            to_db(connection, expires),
        ]
    cursor.execute(
        "INSERT INTO later_job_execution "
        "(namespace, job_id, owner, epoch, started_at, lease_expires_at) "
        f"VALUES {values} ON CONFLICT (namespace, job_id) DO UPDATE SET "
        "owner = excluded.owner, epoch = later_job_execution.epoch + 1, "
        "started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at "
        "RETURNING job_id, epoch",
        lease_params,
    )
    epochs = dict(cursor.fetchall())
    cursor.execute(
        f"UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1, "
        "started_at = %s, transitioned_at = %s, worker_id = %s, revision = revision + 1 "
        f"WHERE namespace = %s AND job_id IN ({marks})",
        [to_db(connection, now), to_db(connection, now), owner, namespace, *ids],
    )
    cursor.execute(
        f"SELECT key, value FROM later_storage WHERE namespace = %s AND key IN ({marks})",
        [namespace, *[job_key(i) for i in ids]],
    )
    values_by_id = {key[4:]: value for key, value in cursor.fetchall()}
    return [
        (
            job_id,
            enqueued_at,
            ready_at,
            epochs[job_id],
            previous.get(job_id),
            values_by_id.get(job_id),
        )
        for _, job_id, enqueued_at, ready_at in take
    ]


def claim(
    namespace: str,
    owner: str,
    *,
    queues: list[str] | None,
    free: int,
    lease_seconds: float,
    using: str,
    lazy: bool = False,
) -> list[Claimed]:
    """Lease up to ``free`` ready commands to ``owner`` and mark their jobs running.

    With ``lazy`` the records stay encoded until each item's ``load()``.

    Never a command whose lapsed lease is ``owner``'s own: a worker stopped
    past its lease (SIGSTOP, a paused VM) still holds that job in memory and
    renews the lease at its next heartbeat; claiming it again would run it
    twice in one process. Other workers take it over as usual.

    The attempt is added to each record in memory only; it is stored with the
    outcome. A job taken over from a worker that stopped responding gets that
    worker's attempt recorded as "lost" here, since nobody else will.
    """
    if free < 1:
        return []
    connection = connection_for(using)
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    if is_postgres(connection) and not connection.in_atomic_block:
        with hot_cursor(using) as cursor:
            rows = _claim_postgres(cursor, namespace, owner, queues, now, expires, free)
    else:
        with write_transaction(using, hot=True) as cursor:
            if is_postgres(connection):
                rows = _claim_postgres(cursor, namespace, owner, queues, now, expires, free)
            else:
                rows = _claim_sqlite(
                    cursor, connection, namespace, owner, queues, now, expires, free
                )
    claimed = [decode_row(row, owner, now, lazy=lazy) for row in rows]
    for item in claimed:
        if item.epoch > 1:
            item.load()  # a takeover: its lost attempt is stored now, below
    lost = [c for c in claimed if c.record is not None and c.record.attempts and c.epoch > 1]
    if lost:
        store_lost_attempts(namespace, lost, using)
    return claimed


def runnable(namespace: str, *, queues: list[str] | None, using: str) -> bool:
    """Whether any command is claimable now (a plain read: it neither locks nor skips)."""
    connection = connection_for(using)
    params: list[Any] = [namespace, to_db(connection, timezone.now())]
    queue_filter = ""
    if queues:
        queue_filter = f" AND queue_name IN ({placeholders(len(queues))})"
        params.extend(queues)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM later_delivery_queue WHERE namespace = %s AND available_at <= %s"
            f"{queue_filter} LIMIT 1",
            params,
        )
        return cursor.fetchone() is not None
