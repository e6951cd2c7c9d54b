"""Fill in ``has_children`` for parents enqueued before migration 0006.

0006 added the column as false everywhere, but a job enqueued under 0005 may
already have continuations waiting on it. The outcome statement that stores a
batch on its own (PostgreSQL) trusts the flag, so such a parent would end
without releasing or cancelling its children, and they would wait forever.

It works in batches of ``BATCH`` parents, each in a transaction of its own
(the migration is not atomic), so no transaction holds many row locks or
runs for long, whatever the table holds. A batch reads the next parents of
waiting children in the order of the partial ``(namespace, parent_job_id)``
index (a keyset, so each batch starts where the last ended, and finished
jobs, which are not in that index, cost nothing) and sets the flag on each
through the unique ``(namespace, job_id)`` index. Releasing children looks at
stage ``waiting`` only, so children in any other stage need no flag. Run
again (after an interrupted migration), it finds the same parents and
changes nothing more.
"""

from django.db import migrations, transaction

from later_django.routers import runs_engine_sql

BATCH = 500

NEXT_PARENTS = """
SELECT DISTINCT namespace, parent_job_id FROM later_jobs_index
WHERE parent_job_id IS NOT NULL AND stage = 'waiting'
  AND (namespace, parent_job_id) > (%s, %s)
ORDER BY namespace, parent_job_id
LIMIT %s
"""
FLAG = """
UPDATE later_jobs_index SET has_children = TRUE
WHERE namespace = %s AND job_id = %s AND has_children = FALSE
"""


def backfill(apps, schema_editor, batch=BATCH):
    """Flag every parent of a waiting child; return how many batches it took."""
    connection = schema_editor.connection
    if not runs_engine_sql(connection):
        return 0
    after = ("", "")
    batches = 0
    while True:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(NEXT_PARENTS, [*after, batch])
            parents = cursor.fetchall()
            if parents:
                cursor.executemany(FLAG, parents)
        if not parents:
            return batches
        batches += 1
        after = tuple(parents[-1])


class Migration(migrations.Migration):
    # Each batch commits on its own.
    atomic = False

    dependencies = [("later", "0007_delivery_owner_index")]

    # Unapplying leaves the flags: they are true only where children wait, and
    # unapplying 0006 drops the column anyway.
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False)]
