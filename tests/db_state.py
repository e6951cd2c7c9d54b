"""Reading what the later_* tables hold, for assertions about the database itself."""

from __future__ import annotations

from django.apps import apps
from django.db import connection

from later_django.counts import stage_counts as counted_stages
from later_django.models import JobIndexRow, StageCountDelta


def later_row_counts() -> dict[str, int]:
    """Rows in every later_* table, by table name; stage counters at zero do not count.

    Compare a snapshot taken before an action with one taken after: some rows are
    configuration (topics registered after migrate), not job state.
    """
    counts = {
        model._meta.db_table: model.objects.count()
        for model in apps.get_app_config("later").get_models()
    }
    # Counters count as their non-zero (namespace, stage) totals, folded or not:
    # on PostgreSQL new changes wait in later_stage_count_delta until a worker folds them.
    counts.pop("later_stage_count_delta", None)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM (SELECT namespace, stage, SUM(n) AS total FROM ("
            " SELECT namespace, stage, count AS n FROM later_stage_counts UNION ALL"
            " SELECT namespace, stage, delta FROM later_stage_count_delta) AS parts"
            " GROUP BY namespace, stage) AS totals WHERE total <> 0"
        )
        counts["later_stage_counts"] = cursor.fetchone()[0]
    return counts


def stage_counts(namespace: str) -> dict[str, int]:
    """The stage counters of a namespace (totals plus unfolded deltas), without zeros."""
    return {stage: count for stage, count in counted_stages(namespace).items() if count != 0}


def index_stage_counts(namespace: str) -> dict[str, int]:
    """A GROUP BY over later_jobs_index: what later_stage_counts must equal."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT stage, COUNT(*) FROM later_jobs_index WHERE namespace = %s GROUP BY stage",
            [namespace],
        )
        return dict(cursor.fetchall())


def stage_of(job_id: str) -> str:
    return JobIndexRow.objects.get(job_id=job_id).stage


def count_new_rows(*rows: JobIndexRow) -> None:
    """Count index rows a test wrote by hand in their stages, as the engine's enqueue
    statements count theirs on PostgreSQL; SQLite's row triggers count them already."""
    if connection.vendor == "postgresql":
        StageCountDelta.objects.bulk_create(
            StageCountDelta(namespace=row.namespace, stage=row.stage, delta=1) for row in rows
        )
