"""PostgreSQL: the enqueue statements count their new jobs themselves.

Since 0005 a statement trigger on ``later_jobs_index`` appended each
insert's per-stage sums to ``later_stage_count_delta``, running a PL/pgSQL
function over a transition table for every enqueue. The three statements
that insert index rows (``sql/postgres.py``) now append that row in a CTE of
their own, and the insert trigger goes; the update and delete triggers stay.
SQLite keeps its row triggers. Jobs enqueued by processes still running an
earlier release while this one migrates are not counted until the workers'
hourly recount.
"""

from django.db import migrations

TRIGGER = (
    "CREATE TRIGGER later_jobs_index_count_insert AFTER INSERT ON later_jobs_index "
    "REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION later_jobs_index_count_insert()"
)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS later_jobs_index_count_insert ON later_jobs_index"
        )


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER)


class Migration(migrations.Migration):
    dependencies = [("later", "0014_sqlite_wal")]

    operations = [migrations.RunPython(forward, backward)]
