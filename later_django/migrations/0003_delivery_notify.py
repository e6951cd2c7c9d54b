"""Wake idle PostgreSQL workers when commands enter the delivery queue.

A statement-level trigger sends one NOTIFY per namespace per statement on the
``later_delivery`` channel; PostgreSQL delivers it at commit, so no worker hears
of a job before it is visible. SQLite has no equivalent: its workers watch
``PRAGMA data_version`` instead.
"""

from django.db import migrations

FORWARD = [
    """
    CREATE FUNCTION later_delivery_notify() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('later_delivery', ns)
        FROM (SELECT DISTINCT namespace AS ns FROM new_rows) AS s;
        RETURN NULL;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER later_delivery_notify AFTER INSERT ON later_delivery_queue
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION later_delivery_notify()
    """,
]
BACKWARD = [
    "DROP TRIGGER IF EXISTS later_delivery_notify ON later_delivery_queue",
    "DROP FUNCTION IF EXISTS later_delivery_notify()",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("later", "0002_stage_count_triggers")]

    operations = [migrations.RunPython(forward, backward)]
