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

from ..claims import UNHELD_RECORD, Claimed, decode_row, store_lost_attempts, unheld_rows
from ..db import connection_for, from_db, hot_cursor, placeholders, to_db, write_transaction
from ..sql import dialect
from ..sql.shared import BATCH, SHARE_AT

# The logger keeps the name it had before the module moved, which operators filter on.
logger = logging.getLogger("later_django.worker.claiming")

__all__ = [
    "BATCH",
    "LOST_ATTEMPTS_LIMIT",
    "SHARE_AT",
    "Claimed",
    "Claims",
    "claim",
    "runnable",
    "unheld",
]

LOST_ATTEMPTS_LIMIT = 5


class Claims(list[Claimed]):
    """The jobs of one claim, in claim order.

    ``left_over`` tells whether ready commands may remain that the claim did not
    take, so that claiming again at once can find more (``sql.shared.left_over``).
    """

    left_over: bool = False


def claim(
    namespace: str,
    owner: str,
    *,
    queues: list[str] | None,
    free: int,
    lease_seconds: float,
    using: str,
    lazy: bool = False,
) -> Claims:
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
        return Claims()
    connection = connection_for(using)
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    sql = dialect(connection)
    if sql.ALONE and not connection.in_atomic_block:
        with hot_cursor(using) as cursor:
            rows, left_over = sql.claim(cursor, namespace, owner, queues, now, expires, free)
    else:
        with write_transaction(using, hot=True) as cursor:
            rows, left_over = sql.claim(cursor, namespace, owner, queues, now, expires, free)
    claimed = Claims(decode_row(row, owner, now, lazy=lazy) for row in rows)
    claimed.left_over = left_over
    for item in claimed:
        if item.epoch > 1:
            item.load()  # a takeover: its lost attempt is stored now, below
    lost = [c for c in claimed if c.record is not None and c.record.attempts and c.epoch > 1]
    if lost:
        store_lost_attempts(namespace, lost, using)
    return claimed


def unheld(namespace: str, owner: str, held: set[str], *, using: str) -> list[Claimed]:
    """Commands leased to ``owner`` in the database whose jobs ``owner`` does not hold.

    A claim can commit and still reach its worker as an error: the connection
    broke after the server committed, before the answer arrived. The worker
    then holds leases it does not know of, and renews them with the rest at
    each heartbeat; since no worker claims a command leased to itself, nobody
    would ever run those jobs. The worker reads them back with this and runs
    them as claimed (``held``: every job it has in memory, claimed, running or
    with an outcome not yet stored). Each comes with the attempt and epoch its
    lost claim gave it.
    """
    rows = unheld_rows(
        f"SELECT e.job_id, q.enqueued_at, e.started_at, e.epoch, NULL, {UNHELD_RECORD} "
        "FROM later_job_execution AS e JOIN later_delivery_queue AS q "
        "ON q.namespace = e.namespace AND q.job_id = e.job_id AND q.lease_owner = e.owner",
        namespace,
        owner,
        held,
        using,
    )
    now = timezone.now()
    return [decode_row(row, owner, from_db(row[2]) or now, lazy=True) for row in rows]


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
