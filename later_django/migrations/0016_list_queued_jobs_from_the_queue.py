"""The job index's listing indexes leave out queued jobs without a topic.

The enqueued page lists those from their delivery commands and the health
check and metrics find the oldest of them through the claim index, so an
enqueue writes two index entries fewer. The queued jobs of topics have no
delivery command and stay in both indexes.
"""

from django.db import migrations, models

# Every stage but enqueued, and the enqueued jobs of topics (models.dashboard.INDEX_LISTED_ROWS).
LISTED = models.Q(
    ("topic__isnull", False),
    ("stage", "delayed"),
    ("stage", "waiting"),
    ("stage", "running"),
    ("stage", "requeued"),
    ("stage", "success"),
    ("stage", "failed"),
    ("stage", "cancelled"),
    _connector="OR",
)


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0015_count_enqueues_in_statements"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="jobindexrow",
            name="later_jobsindex_stage_idx",
        ),
        migrations.RemoveIndex(
            model_name="jobindexrow",
            name="later_jobsindex_task_idx",
        ),
        migrations.AddIndex(
            model_name="jobindexrow",
            index=models.Index(
                models.F("namespace"),
                models.F("stage"),
                models.OrderBy(models.F("transitioned_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=LISTED,
                name="later_jobsindex_stage_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="jobindexrow",
            index=models.Index(
                models.F("namespace"),
                models.F("task_path"),
                models.F("stage"),
                models.OrderBy(models.F("transitioned_at"), descending=True),
                condition=LISTED,
                name="later_jobsindex_task_idx",
            ),
        ),
    ]
