"""Fill in ``has_children`` for parents enqueued before migration 0006.

0006 added the column as false everywhere, but a job enqueued under 0005 may
already have continuations waiting on it. The outcome statement that stores a
batch on its own (PostgreSQL) trusts the flag, so such a parent would end
without releasing or cancelling its children, and they would wait forever.

One statement for the whole table, on both databases: it starts from the
waiting children (few, and found by ``parent_job_id``) and reaches each
parent through the unique ``(namespace, job_id)`` index, so it costs the same
on a table of millions of finished jobs. Releasing children looks at stage
``waiting`` only, so children in any other stage need no flag.
"""

from django.db import migrations

BACKFILL = """
UPDATE later_jobs_index SET has_children = TRUE
WHERE has_children = FALSE AND (namespace, job_id) IN (
    SELECT namespace, parent_job_id FROM later_jobs_index
    WHERE parent_job_id IS NOT NULL AND stage = 'waiting'
)
"""


class Migration(migrations.Migration):
    dependencies = [("later", "0007_delivery_owner_index")]

    # Unapplying leaves the flags: they are true only where children wait, and
    # unapplying 0006 drops the column anyway.
    operations = [migrations.RunSQL(BACKFILL, migrations.RunSQL.noop, elidable=False)]
