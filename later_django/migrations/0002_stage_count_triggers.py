"""Keep later_stage_counts exact with triggers on later_jobs_index.

SQLite's row triggers touch both counters of a transition in one UPDATE, so
the two rows are locked in index order.
"""

from django.db import migrations

from later_django.routers import runs_engine_sql

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

# PostgreSQL counts per statement from transition tables: one upsert per
# statement however many rows it touched, with the counter rows locked in a
# fixed order (ORDER BY), so batched claims and bulk enqueues stay cheap and
# concurrent transitions cannot deadlock on the counters.
_PG_APPLY = """
        INSERT INTO later_stage_counts (namespace, stage, count)
        SELECT namespace, stage, SUM(delta) FROM ({rows}) AS changes
        GROUP BY namespace, stage HAVING SUM(delta) <> 0
        ORDER BY namespace, stage
        ON CONFLICT (namespace, stage)
        DO UPDATE SET count = later_stage_counts.count + excluded.count;
"""
POSTGRES_FORWARD = [
    f"""
    CREATE FUNCTION later_jobs_index_count_insert() RETURNS trigger AS $$
    BEGIN
        {_PG_APPLY.format(rows="SELECT namespace, stage, 1 AS delta FROM new_rows")}
        RETURN NULL;
    END
    $$ LANGUAGE plpgsql
    """,
    f"""
    CREATE FUNCTION later_jobs_index_count_update() RETURNS trigger AS $$
    BEGIN
        {_PG_APPLY.format(rows="SELECT namespace, stage, 1 AS delta FROM new_rows "
                               "UNION ALL SELECT namespace, stage, -1 FROM old_rows")}
        RETURN NULL;
    END
    $$ LANGUAGE plpgsql
    """,
    f"""
    CREATE FUNCTION later_jobs_index_count_delete() RETURNS trigger AS $$
    BEGIN
        {_PG_APPLY.format(rows="SELECT namespace, stage, -1 AS delta FROM old_rows")}
        RETURN NULL;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER later_jobs_index_count_insert AFTER INSERT ON later_jobs_index
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION later_jobs_index_count_insert()
    """,
    """
    CREATE TRIGGER later_jobs_index_count_update AFTER UPDATE ON later_jobs_index
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION later_jobs_index_count_update()
    """,
    """
    CREATE TRIGGER later_jobs_index_count_delete AFTER DELETE ON later_jobs_index
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION later_jobs_index_count_delete()
    """,
]
POSTGRES_BACKWARD = [
    "DROP TRIGGER IF EXISTS later_jobs_index_count_insert ON later_jobs_index",
    "DROP TRIGGER IF EXISTS later_jobs_index_count_update ON later_jobs_index",
    "DROP TRIGGER IF EXISTS later_jobs_index_count_delete ON later_jobs_index",
    "DROP FUNCTION IF EXISTS later_jobs_index_count_insert()",
    "DROP FUNCTION IF EXISTS later_jobs_index_count_update()",
    "DROP FUNCTION IF EXISTS later_jobs_index_count_delete()",
]

STATEMENTS = {
    "sqlite": (SQLITE_FORWARD, SQLITE_BACKWARD),
    "postgresql": (POSTGRES_FORWARD, POSTGRES_BACKWARD),
}


def _run(schema_editor, which):
    # Skipped on a database of another kind that Later does not use (Django made
    # the tables there only because no router said otherwise); refused on one it uses.
    if not runs_engine_sql(schema_editor.connection):
        return
    for statement in STATEMENTS[schema_editor.connection.vendor][which]:
        schema_editor.execute(statement)


def forward(apps, schema_editor):
    _run(schema_editor, 0)


def backward(apps, schema_editor):
    _run(schema_editor, 1)


class Migration(migrations.Migration):
    dependencies = [("later", "0001_initial")]

    operations = [migrations.RunPython(forward, backward)]
