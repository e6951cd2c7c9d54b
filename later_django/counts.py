"""Exact per-stage job counts: folded totals plus the deltas not yet folded.

On PostgreSQL the triggers on ``later_jobs_index`` append deltas to
``later_stage_count_delta`` (migration 0005) rather than lock the counter
rows; ``fold`` moves them into ``later_stage_counts``. On SQLite the triggers
update the totals directly and the delta table stays empty. Either way a read
touches at most a few rows per stage, however many jobs there are.

``oldest_in_stage`` reads one entry at the old end of the jobs-by-stage index
(``later_jobsindex_stage_idx``), so it too costs the same at any queue length.
"""

from __future__ import annotations

from datetime import datetime

from .db import connection_for, from_db, is_postgres, write_transaction
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


def oldest_in_stage(namespace: str, stage: str, *, using: str = "default") -> datetime | None:
    """When the job that has been in ``stage`` longest entered it; None when no job is in it."""
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            "SELECT transitioned_at FROM later_jobs_index WHERE namespace = %s AND stage = %s "
            "ORDER BY transitioned_at, id LIMIT 1",
            [namespace, stage],
        )
        row = cursor.fetchone()
    return None if row is None else from_db(row[0])


def fold(*, using: str = "default") -> None:
    """Move every pending delta into the totals, in one short transaction (PostgreSQL)."""
    connection = connection_for(using)
    if not is_postgres(connection):
        return
    with write_transaction(using) as cursor:
        cursor.execute(
            "WITH taken AS (DELETE FROM later_stage_count_delta "
            " RETURNING namespace, stage, delta) "
            "INSERT INTO later_stage_counts (namespace, stage, count) "
            "SELECT namespace, stage, SUM(delta) FROM taken GROUP BY namespace, stage "
            "ORDER BY namespace, stage "
            "ON CONFLICT (namespace, stage) "
            "DO UPDATE SET count = later_stage_counts.count + excluded.count"
        )
