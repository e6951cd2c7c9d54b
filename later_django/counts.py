"""Exact per-stage job counts: folded totals plus the deltas not yet folded.

On PostgreSQL the triggers on ``later_jobs_index`` append deltas to
``later_stage_count_delta`` (migration 0005) rather than lock the counter
rows; ``fold`` moves them into ``later_stage_counts``. On SQLite the triggers
update the totals directly and the delta table stays empty. Either way a read
touches at most a few rows per stage, however many jobs there are.

``oldest_in_stage`` reads one entry at the old end of the jobs-by-stage index
(``later_jobsindex_stage_idx``), so it too costs the same at any queue length.
A queued job without a topic has no entry there: the delivery queue's claim
index gives the oldest of those, one entry for each priority in use.
"""

from __future__ import annotations

from datetime import datetime

from .db import connection_for, from_db, write_transaction
from .sql import dialect
from .states import Stage


def stage_counts(namespace: str, *, using: str = "default") -> dict[str, int]:
    """Every stage's job count in ``namespace`` (zero for stages with none)."""
    counts = dict.fromkeys(map(str, Stage), 0)
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            "SELECT stage, SUM(n) FROM ("
            " SELECT stage, count AS n FROM later_stage_counts WHERE namespace = %s"
            " UNION ALL"
            " SELECT stage, delta FROM later_stage_count_delta WHERE namespace = %s"
            ") AS parts GROUP BY stage",
            [namespace, namespace],
        )
        for stage, count in cursor.fetchall():
            counts[stage] = int(count)
    return counts


# The oldest waiting command of each priority in use, priorities found by a
# recursive walk down the claim index (a loose index scan, on either database).
OLDEST_COMMAND = """
WITH RECURSIVE level(priority) AS (
    SELECT (SELECT priority FROM later_delivery_queue WHERE namespace = %s
            ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT q.priority FROM later_delivery_queue AS q
            WHERE q.namespace = %s AND q.priority < level.priority
            ORDER BY q.priority DESC LIMIT 1)
    FROM level WHERE level.priority IS NOT NULL
)
SELECT (SELECT q.available_at FROM later_delivery_queue AS q
        WHERE q.namespace = %s AND q.priority = level.priority AND q.lease_owner IS NULL
        ORDER BY q.available_at LIMIT 1)
FROM level WHERE level.priority IS NOT NULL
"""


def oldest_in_stage(namespace: str, stage: str, *, using: str = "default") -> datetime | None:
    """When the job that has been in ``stage`` longest entered it; None when no job is in it.

    For the enqueued stage, a job with a delivery command entered it when the
    command became available: its enqueue, promotion or release, or an earlier
    ``run_after`` it was enqueued with.
    """
    queued = stage == Stage.ENQUEUED
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            "SELECT transitioned_at FROM later_jobs_index WHERE namespace = %s AND stage = %s "
            f"{'AND topic IS NOT NULL ' if queued else ''}ORDER BY transitioned_at, id LIMIT 1",
            [namespace, stage],
        )
        found = [from_db(row[0]) for row in cursor.fetchall()]
        if queued:
            cursor.execute(OLDEST_COMMAND, [namespace, namespace, namespace])
            found += [from_db(row[0]) for row in cursor.fetchall() if row[0] is not None]
    moments = [moment for moment in found if moment is not None]
    return min(moments) if moments else None


def fold(*, using: str = "default") -> None:
    """Move every pending delta into the totals, in one short transaction (PostgreSQL)."""
    sql = dialect(connection_for(using))
    if not sql.COUNT_DELTAS:
        return
    with write_transaction(using) as cursor:
        sql.fold_counts(cursor)
