"""Index the finished jobs of each topic partition by sequence, for bounded history.

A topic declared with ``keep_last`` keeps only the newest finished jobs of
each partition; the worker finds the older ones by skipping the newest
``keep_last`` entries of this index, so the read never meets the partition's
queued jobs. The index is partial: only finished jobs of topics are in it, so
enqueueing writes nothing more. Creating it adds no column and rebuilds no
table, on either database.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0008_jobs_index_backfill_has_children"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="jobindexrow",
            index=models.Index(
                condition=models.Q(
                    ("stage__in", ["success", "failed", "cancelled"]), ("topic__isnull", False)
                ),
                fields=["namespace", "topic", "partition", "sequence"],
                name="later_jobsindex_done_idx",
            ),
        ),
    ]
