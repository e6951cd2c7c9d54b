"""Keep later_stage_counts exact with triggers on later_jobs_index.

Each trigger touches both counters of a transition in one UPDATE, so the two
rows are locked in index order and concurrent transitions do not deadlock on
them in opposite orders.
"""

from django.db import migrations

SQLITE_FORWARD = [
    """
    CREATE TRIGGER later_jobs_index_count_insert AFTER INSERT ON later_jobs_index
    BEGIN
        INSERT INTO later_stage_counts (namespace, stage, count)
        VALUES (NEW.namespace, NEW.stage, 1)
        ON CONFLICT (namespace, stage) DO UPDATE SET count = count + 1;
    END
    """,
    """
    CREATE TRIGGER later_jobs_index_count_update AFTER UPDATE OF stage ON later_jobs_index
    WHEN OLD.stage <> NEW.stage
    BEGIN
        INSERT INTO later_stage_counts (namespace, stage, count)
        VALUES (NEW.namespace, NEW.stage, 0)
        ON CONFLICT (namespace, stage) DO NOTHING;
        UPDATE later_stage_counts
        SET count = count + CASE WHEN stage = NEW.stage THEN 1 ELSE -1 END
        WHERE namespace = NEW.namespace AND stage IN (OLD.stage, NEW.stage);
    END
    """,
    """
    CREATE TRIGGER later_jobs_index_count_delete AFTER DELETE ON later_jobs_index
    BEGIN
        UPDATE later_stage_counts SET count = count - 1
        WHERE namespace = OLD.namespace AND stage = OLD.stage;
    END
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS later_jobs_index_count_insert",
    "DROP TRIGGER IF EXISTS later_jobs_index_count_update",
    "DROP TRIGGER IF EXISTS later_jobs_index_count_delete",
]

POSTGRES_FORWARD = [
    """
    CREATE FUNCTION later_jobs_index_count() RETURNS trigger AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO later_stage_counts (namespace, stage, count)
            VALUES (NEW.namespace, NEW.stage, 1)
            ON CONFLICT (namespace, stage)
            DO UPDATE SET count = later_stage_counts.count + 1;
        ELSIF TG_OP = 'UPDATE' THEN
            INSERT INTO later_stage_counts (namespace, stage, count)
            VALUES (NEW.namespace, NEW.stage, 0)
            ON CONFLICT (namespace, stage) DO NOTHING;
            UPDATE later_stage_counts
            SET count = count + CASE WHEN stage = NEW.stage THEN 1 ELSE -1 END
            WHERE namespace = NEW.namespace AND stage IN (OLD.stage, NEW.stage);
        ELSE
            UPDATE later_stage_counts SET count = count - 1
            WHERE namespace = OLD.namespace AND stage = OLD.stage;
        END IF;
        RETURN NULL;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER later_jobs_index_count_insert_delete
    AFTER INSERT OR DELETE ON later_jobs_index
    FOR EACH ROW EXECUTE FUNCTION later_jobs_index_count()
    """,
    """
    CREATE TRIGGER later_jobs_index_count_update
    AFTER UPDATE OF stage ON later_jobs_index
    FOR EACH ROW WHEN (OLD.stage IS DISTINCT FROM NEW.stage)
    EXECUTE FUNCTION later_jobs_index_count()
    """,
]
POSTGRES_BACKWARD = [
    "DROP TRIGGER IF EXISTS later_jobs_index_count_insert_delete ON later_jobs_index",
    "DROP TRIGGER IF EXISTS later_jobs_index_count_update ON later_jobs_index",
    "DROP FUNCTION IF EXISTS later_jobs_index_count()",
]

STATEMENTS = {
    "sqlite": (SQLITE_FORWARD, SQLITE_BACKWARD),
    "postgresql": (POSTGRES_FORWARD, POSTGRES_BACKWARD),
}


def _run(schema_editor, which):
    vendor = schema_editor.connection.vendor
    if vendor not in STATEMENTS:
        raise RuntimeError(
            f"later_django supports SQLite and PostgreSQL; this database is {vendor!r}."
        )
    for statement in STATEMENTS[vendor][which]:
        schema_editor.execute(statement)


def forward(apps, schema_editor):
    _run(schema_editor, 0)


def backward(apps, schema_editor):
    _run(schema_editor, 1)


class Migration(migrations.Migration):
    dependencies = [("later", "0001_initial")]

    operations = [migrations.RunPython(forward, backward)]
