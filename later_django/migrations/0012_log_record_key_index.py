"""Index retained-log records by key, for compaction as a worker duty.

Compaction looks up, for each key among a step's records, that key's older
records and whether a newer one replaces each: an index probe per record
instead of a scan of the partition. Partial: records without a key are never
compacted, so they are not in it. It adds no column and rebuilds no table.

Like 0002, it is skipped on a database of another kind that Later does not use
(MySQL cannot index the key's blob column) and refused on one it uses.
"""

from django.db import migrations, models

from later_django.routers import runs_engine_sql

INDEX = models.Index(
    condition=models.Q(("key__isnull", False)),
    fields=["namespace", "topic", "partition", "key", "offset"],
    name="later_logrec_key_idx",
)


def forward(apps, schema_editor):
    if runs_engine_sql(schema_editor.connection):
        schema_editor.add_index(apps.get_model("later", "LogRecord"), INDEX)


def backward(apps, schema_editor):
    if runs_engine_sql(schema_editor.connection):
        schema_editor.remove_index(apps.get_model("later", "LogRecord"), INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0011_jobs_index_cancel_requested"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="logrecord", index=INDEX)],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
