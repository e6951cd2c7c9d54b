"""Index retained-log records by key, for compaction as a worker duty.

Compaction looks up, for each key among a step's records, that key's older
records and whether a newer one replaces each: an index probe per record
instead of a scan of the partition. Partial: records without a key are never
compacted, so they are not in it. It adds no column and rebuilds no table.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0011_jobs_index_cancel_requested"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="logrecord",
            index=models.Index(
                condition=models.Q(("key__isnull", False)),
                fields=["namespace", "topic", "partition", "key", "offset"],
                name="later_logrec_key_idx",
            ),
        ),
    ]
