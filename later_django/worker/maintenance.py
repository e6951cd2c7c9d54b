"""Periodic duties every worker runs: promotion, sweeping, samples, counter repair.

Each duty is safe to run from several workers at once: promotion and sweeping
are idempotent, samples are upserts, and reconciliation holds a lock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from ..counts import stage_counts
from ..db import connection_for, placeholders, to_db, write_transaction
from ..sql import dialect
from ..states import SCHEDULED, Stage, sql_list

logger = logging.getLogger(__name__)

PROMOTE_BATCH = 500
SAMPLE_RETENTION = timedelta(days=7)
METRIC_RETENTION = timedelta(days=2)
RECONCILE_LOCK_TIMEOUT_MS = 200


def promote_due(
    namespace: str, *, using: str, now: datetime | None = None, skip_locked: bool = True
) -> list[str]:
    """Move delayed and requeued jobs whose time has come into the delivery queue.

    With ``skip_locked=False`` (PostgreSQL) it waits for a promotion another
    thread or worker has in flight instead of passing over its rows, so an empty
    answer means nothing is due any more.
    """
    connection = connection_for(using)
    now = now or timezone.now()
    sql = dialect(connection)
    lock = sql.SKIP_LOCKED if skip_locked else sql.LOCK
    with write_transaction(using) as cursor:
        cursor.execute(
            "SELECT job_id, queue_name, priority, enqueued_at FROM later_jobs_index "
            f"WHERE namespace = %s AND stage IN ({sql_list(SCHEDULED)}) AND run_at <= %s "
            "AND topic IS NULL ORDER BY run_at LIMIT %s" + lock,
            [namespace, to_db(connection, now), PROMOTE_BATCH],
        )
        due = cursor.fetchall()
        if not due:
            return []
        ids = [row[0] for row in due]
        dialect(cursor.db).execute_each(
            cursor,
            "INSERT INTO later_delivery_queue "
            "(namespace, queue_name, job_id, priority, available_at, enqueued_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, job_id) DO NOTHING",
            [
                (namespace, queue, job_id, priority, to_db(connection, now), enqueued_at)
                for job_id, queue, priority, enqueued_at in due
            ],
        )
        cursor.execute(
            f"UPDATE later_jobs_index SET stage = '{Stage.ENQUEUED}', transitioned_at = %s, "
            "revision = revision + 1 WHERE namespace = %s "
            f"AND job_id IN ({placeholders(len(ids))}) AND stage IN ({sql_list(SCHEDULED)})",
            [to_db(connection, now), namespace, *ids],
        )
        sql.notify_queued(cursor, namespace)
    return ids


def sweep_jobs_index(namespace: str, *, limit: int, using: str) -> int:
    """Delete at most ``limit`` expired index rows of finished jobs."""
    connection = connection_for(using)
    now = to_db(connection, timezone.now())
    with write_transaction(using) as cursor:
        cursor.execute(
            "DELETE FROM later_jobs_index WHERE id IN (SELECT id FROM later_jobs_index "
            "WHERE date_expire IS NOT NULL AND date_expire <= %s AND namespace = %s "
            "ORDER BY date_expire LIMIT %s)",
            [now, namespace, limit],
        )
        return cursor.rowcount


def trim_metrics(namespace: str, *, using: str) -> None:
    """Drop metric buckets and queue samples older than anything the dashboard shows."""
    connection = connection_for(using)
    now = timezone.now()
    with write_transaction(using) as cursor:
        for table in ("later_job_transition_metrics", "later_job_wait_metrics"):
            cursor.execute(
                f"DELETE FROM {table} WHERE namespace = %s AND bucket < %s",
                [namespace, to_db(connection, now - METRIC_RETENTION)],
            )
        cursor.execute(
            "DELETE FROM later_queue_sample WHERE namespace = %s AND minute < %s",
            [namespace, to_db(connection, now - SAMPLE_RETENTION)],
        )


def record_queue_sample(namespace: str, *, using: str, now: datetime | None = None) -> None:
    """Store the queue length for the current minute (replacing an earlier reading of it)."""
    connection = connection_for(using)
    now = now or timezone.now()
    # Counted before the write: on SQLite a full count inside the write transaction
    # would hold every writer back for as long as it takes.
    queued = stage_counts(namespace, using=using)[Stage.ENQUEUED]
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_partition_job WHERE namespace = %s", [namespace])
        partitioned = cursor.fetchone()[0]
    with write_transaction(using) as cursor:
        cursor.execute(
            "INSERT INTO later_queue_sample (namespace, minute, queued, partitioned) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, minute) DO UPDATE SET "
            "queued = excluded.queued, partitioned = excluded.partitioned",
            [
                namespace,
                to_db(connection, now.replace(second=0, microsecond=0)),
                queued,
                partitioned,
            ],
        )


def reconcile_stage_counts(namespace: str, *, using: str) -> dict[str, int]:
    """Recount every stage from the index and replace the counters; return the counts."""
    connection = connection_for(using)
    with write_transaction(using) as cursor:
        # No writer of the index may run during the recount; a lock that cannot be
        # had quickly is given up (LockNotAvailable, transient), not waited for.
        dialect(connection).lock_for_recount(cursor, RECONCILE_LOCK_TIMEOUT_MS)
        cursor.execute(
            "SELECT stage, COUNT(*) FROM later_jobs_index WHERE namespace = %s GROUP BY stage",
            [namespace],
        )
        counts = dict(cursor.fetchall())
        # Deltas of this namespace are all older than the lock: the recount replaces them.
        cursor.execute("DELETE FROM later_stage_count_delta WHERE namespace = %s", [namespace])
        stages = sorted(set(counts) | set(Stage))
        dialect(cursor.db).execute_each(
            cursor,
            "INSERT INTO later_stage_counts (namespace, stage, count) VALUES (%s, %s, %s) "
            "ON CONFLICT (namespace, stage) DO UPDATE SET count = excluded.count",
            [(namespace, stage, counts.get(stage, 0)) for stage in stages],
        )
    return counts


# The tables whose plans matter on the hot path: a claim picks from the delivery
# queue by index only while the planner knows the queue is more than a handful
# of rows, and an outcome finds its index rows and records by their keys only
# while it knows those tables' keys are not a handful of values.
HOT_TABLES = ("later_delivery_queue", "later_jobs_index", "later_job_execution", "later_storage")
ANALYZE_SLACK = 1000


def refresh_statistics(*, using: str) -> list[str]:
    """ANALYZE hot tables whose planner statistics are missing or stale (PostgreSQL).

    Autovacuum looks at a database about once a minute; a queue that fills from
    empty within that minute would be planned as if it were still empty (a full
    sort of every ready row for each claim, and a scan of every index row for
    each outcome). A table counts as stale when it was never analysed, or holds
    more than twice the rows it had at its last ANALYZE (plus a slack): a table
    filling from empty is analysed at about 1,000, 3,000, 7,000 rows and so on.
    On PostgreSQL, also more than twice its pages (plus a slack): the execution
    leases keep few live rows while deleted ones fill their pages.
    ``SKIP_LOCKED`` passes over a table autovacuum is working on. Returns the
    tables analysed.
    """
    connection = connection_for(using)
    with connection.cursor() as cursor:
        stale = dialect(connection).analyze_stale(cursor, HOT_TABLES, ANALYZE_SLACK)
    if stale:
        logger.debug("planner statistics refreshed tables=%s", ",".join(stale))
    return stale
