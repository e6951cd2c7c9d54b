"""Schedules can be paused: a ``paused`` flag, and a due index that leaves paused ones out.

The flag has a database default, so rows written by the schedule upsert (raw
SQL that does not name it) and by older releases start unpaused. The due index
becomes partial, so a worker's tick never reads a paused schedule however long
it stays due.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0009_jobs_index_done_index"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="schedule",
            name="later_schedule_due_idx",
        ),
        migrations.AddField(
            model_name="schedule",
            name="paused",
            field=models.BooleanField(db_default=False),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("paused", False)),
                fields=["namespace", "next_run_at"],
                name="later_schedule_due_idx",
            ),
        ),
    ]
