"""Index the delivery queue's claimed commands by owner, for lease renewal.

Every worker renews the leases of the commands it holds at each heartbeat
(``WHERE namespace = ? AND lease_owner = ?``). Without an index that read
scanned the whole queue, backlog included: about 100 ms a heartbeat per
worker at a million waiting commands, and on SQLite under the write lock.
The index is partial, so waiting commands (``lease_owner`` is NULL) are not in
it and enqueueing writes nothing more. Creating it adds no column and
rebuilds no table, on either database.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("later", "0006_jobs_index_has_children"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="deliverycommand",
            index=models.Index(
                condition=models.Q(("lease_owner__isnull", False)),
                fields=["namespace", "lease_owner"],
                name="later_delivery_owner_idx",
            ),
        ),
    ]
