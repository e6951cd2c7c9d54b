"""Exact per-stage job counts: folded totals plus the deltas not yet folded.

On PostgreSQL the triggers on ``later_jobs_index`` append deltas to
``later_stage_count_delta`` (migration 0005) rather than lock the counter
rows; ``fold`` moves them into ``later_stage_counts``. On SQLite the triggers
update the totals directly and the delta table stays empty. Either way a read
touches at most a few rows per stage, however many jobs there are.
"""

from __future__ import annotations

from .db import connection_for, is_postgres, write_transaction
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
