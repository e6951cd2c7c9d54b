"""PostgreSQL's wake-up NOTIFY moves from a trigger into the statements that queue jobs.

The statement trigger of 0003 ran a PL/pgSQL function over a transition
table for every enqueue. Each statement that puts commands in the
delivery queue now calls ``pg_notify('later_delivery', namespace)`` itself
(``sql/postgres.py``, and ``notify_queued`` after the other inserts); the
notification is still delivered at commit, once per namespace and
transaction. SQLite never had the trigger: its workers watch
``PRAGMA data_version``.
"""

import importlib

from django.db import migrations

_FIRST = importlib.import_module("later_django.migrations.0003_delivery_notify")


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in _FIRST.BACKWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in _FIRST.FORWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("later", "0012_log_record_key_index")]

    operations = [migrations.RunPython(forward, backward)]
