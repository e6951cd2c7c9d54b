"""Index rows record whether a job has continuations.

A child's enqueue sets ``has_children`` on its parent's index row (which also
locks it against the parent's completion), so a worker can store the outcomes
of jobs without children in a single statement and keep the transaction that
releases or cancels children for the jobs that have some.

The column is added with ``ALTER TABLE ... ADD COLUMN`` on both databases:
Django's SQLite schema editor would rebuild the table, dropping the stage
counter triggers.
"""

from django.db import migrations, models

ADD = "ALTER TABLE later_jobs_index ADD COLUMN has_children boolean NOT NULL DEFAULT false"
DROP = "ALTER TABLE later_jobs_index DROP COLUMN has_children"


class Migration(migrations.Migration):
    dependencies = [("later", "0005_stage_count_delta")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(ADD, DROP)],
            state_operations=[
                migrations.AddField(
                    model_name="jobindexrow",
                    name="has_children",
                    field=models.BooleanField(db_default=False),
                )
            ],
        )
    ]
