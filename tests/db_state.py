"""Reading what the later_* tables hold, for assertions about the database itself."""

from __future__ import annotations

from django.apps import apps
from django.db import connection

from later_django.models import JobIndexRow, StageCount


def later_row_counts() -> dict[str, int]:
    """Rows in every later_* table, by table name; stage counters at zero do not count.

    Compare a snapshot taken before an action with one taken after: some rows are
    configuration (topics registered after migrate), not job state.
    """
    counts = {
        model._meta.db_table: model.objects.count()
        for model in apps.get_app_config("later").get_models()
    }
    counts["later_stage_counts"] = StageCount.objects.exclude(count=0).count()
    return counts


def stage_counts(namespace: str) -> dict[str, int]:
    """later_stage_counts for a namespace, without the zero rows."""
    return dict(
        StageCount.objects.filter(namespace=namespace)
        .exclude(count=0)
        .values_list("stage", "count")
    )


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
