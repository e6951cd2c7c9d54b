"""A running job's cancel request: ``later_jobs_index.cancel_requested_at``.

Nullable with no default, so adding it rewrites nothing, and rows written by
raw inserts that do not name it (the enqueue statements, older releases) have
no request.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0010_schedule_paused"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobindexrow",
            name="cancel_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
