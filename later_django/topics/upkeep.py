"""Partition upkeep a worker runs with its heartbeat: lease renewal, truncation, healing.

* Renewal pushes the expiry of the partition leases of heads this worker is
  running, and their heads' ``available_at`` with them.
* Truncation deletes ``later_partition_job`` rows behind a head. Finishing a
  head deletes its row in the same transaction, so none is normally left; the
  pass removes any leftover, at most ``TRUNCATE_BATCH`` per turn, so the rows
  behind every head are gone within one heartbeat interval per
  ``TRUNCATE_BATCH`` leftovers. It reads only the rows below each head,
  never the queued ones.
* Healing gives a head back to a partition that has rows but no head, which
  only an interrupted upgrade or a hand edit can leave: its first row becomes
  the head. It visits one row per partition (``later_partition_sequence``),
  never the retained rows.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction
from ..sql import dialect
from ..sql.shared import SAME_PARTITION

TRUNCATE_BATCH = 1000


def renew(namespace: str, owner: str, *, lease_seconds: float, using: str) -> int:
    """Extend the leases of the partitions whose heads ``owner`` is running; return how many.

    On PostgreSQL a head or lease locked at this moment is skipped, as for
    execution leases (``worker/leases.py``): an outcome storing several heads
    locks them in order, and waiting here in another order could deadlock.
    """
    connection = connection_for(using)
    until = to_db(connection, timezone.now() + timedelta(seconds=lease_seconds))
    skip_locked = dialect(connection).SKIP_LOCKED
    with write_transaction(using) as cursor:
        # Heads before leases: the order claiming and outcomes lock them in.
        cursor.execute(
            "UPDATE later_partition_head SET available_at = %s WHERE id IN ("
            "SELECT h.id FROM later_partition_head h WHERE h.namespace = %s "
            "AND h.job_id IN (SELECT job_id FROM later_job_execution "
            "WHERE namespace = %s AND owner = %s) "
            "AND EXISTS (SELECT 1 FROM later_partition_lease l WHERE "
            + SAME_PARTITION.format(a="l", b="h")
            + f" AND l.owner = %s){skip_locked})",
            [until, namespace, namespace, owner, owner],
        )
        cursor.execute(
            "UPDATE later_partition_lease SET expires_at = %s WHERE id IN ("
            "SELECT l.id FROM later_partition_lease l WHERE l.namespace = %s AND l.owner = %s "
            "AND EXISTS (SELECT 1 FROM later_partition_head h JOIN later_job_execution e "
            "ON e.namespace = h.namespace AND e.job_id = h.job_id AND e.owner = %s WHERE "
            + SAME_PARTITION.format(a="h", b="l")
            + f"){skip_locked})",
            [until, namespace, owner, owner],
        )
        return cursor.rowcount


def truncate(namespace: str, *, using: str, limit: int = TRUNCATE_BATCH) -> int:
    """Delete up to ``limit`` partition rows behind their heads; return how many."""
    statement = dialect(connection_for(using)).TRUNCATE
    with write_transaction(using) as cursor:
        cursor.execute(statement, {"ns": namespace, "limit": limit})
        return cursor.rowcount


def heal(namespace: str, *, using: str) -> int:
    """Give each partition that has rows but no head its first row as head; return how many."""
    with write_transaction(using) as cursor:
        cursor.execute(
            "INSERT INTO later_partition_head "
            '(namespace, topic, "partition", sequence, job_id, available_at) '
            'SELECT j.namespace, j.topic, j."partition", j.sequence, j.job_id, j.available_at '
            "FROM later_partition_sequence s JOIN later_partition_job j ON "
            + SAME_PARTITION.format(a="j", b="s")
            + " WHERE s.namespace = %s AND NOT EXISTS (SELECT 1 FROM later_partition_head h WHERE "
            + SAME_PARTITION.format(a="h", b="s")
            + ") AND j.sequence = (SELECT MIN(m.sequence) FROM later_partition_job m WHERE "
            + SAME_PARTITION.format(a="m", b="s")
            + ') ON CONFLICT (namespace, topic, "partition") DO NOTHING',
            [namespace],
        )
        return cursor.rowcount
