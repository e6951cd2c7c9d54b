"""Upgrades: jobs stored under an older schema stay runnable after ``migrate``."""

import sqlite3
from importlib import import_module

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from later_django.jobs import cancel_job
from later_django.models import JobIndexRow
from tests import tasks
from tests.conftest import manage
from tests.continuations.inline import claim_ready, finish, stage_of

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_HAS_CHILDREN = ("later", "0005_stage_count_delta")


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_a_parent_enqueued_before_has_children_still_releases_its_child_after_the_upgrade():
    parent = tasks.record.enqueue("upgrade", "parent")
    child = tasks.record.using(after=parent).enqueue("upgrade", "child")
    alone = tasks.record.enqueue("upgrade", "alone")
    try:
        # Back to the schema without the column, as a database of an older release
        # with a continuation waiting: migrating forward adds it, false everywhere.
        migrate([BEFORE_HAS_CHILDREN])
    finally:
        migrate(latest())
    # On PostgreSQL a batch of outcomes is stored by one statement that leaves
    # children alone unless the parent's row says it has some: without the flag
    # filled in, this child would wait forever.
    finish(claim_ready())
    assert stage_of(child.id) == "enqueued"
    finish(claim_ready())
    assert stage_of(child.id) == "success"
    flags = dict(JobIndexRow.objects.values_list("job_id", "has_children"))
    assert flags == {parent.id: True, child.id: False, alone.id: False}


def test_the_has_children_backfill_works_in_batches_across_namespaces_and_can_run_again():
    backfill = import_module("later_django.migrations.0008_jobs_index_backfill_has_children")
    parents = [tasks.record.enqueue("backfill", f"parent {n}") for n in range(5)]
    for parent in parents:
        tasks.record.using(after=parent).enqueue("backfill", "child")
    tasks.record.using(after=parents[0]).enqueue("backfill", "second child")
    done = tasks.record.enqueue("backfill", "parent of a child that no longer waits")
    cancelled = tasks.record.using(after=done).enqueue("backfill", "cancelled child")
    cancel_job(cancelled.id, namespace="tests")
    # One parent and its child in another namespace: the keyset spans namespaces.
    moved = [
        parents[4].id,
        *JobIndexRow.objects.filter(parent_job_id=parents[4].id).values_list("job_id", flat=True),
    ]
    JobIndexRow.objects.filter(job_id__in=moved).update(namespace="elsewhere")
    # As a database of a release before the flag: false everywhere.
    JobIndexRow.objects.update(has_children=False)

    with connection.schema_editor(atomic=False) as editor:
        batches = backfill.backfill(None, editor, batch=2)
    assert batches == 3  # five parents with waiting children, two at a time
    flagged = set(JobIndexRow.objects.filter(has_children=True).values_list("job_id", flat=True))
    assert flagged == {parent.id for parent in parents}

    with connection.schema_editor(atomic=False) as editor:
        assert backfill.backfill(None, editor, batch=2) == 3
    again = set(JobIndexRow.objects.filter(has_children=True).values_list("job_id", flat=True))
    assert again == flagged


def test_migrate_puts_a_new_sqlite_database_in_wal_mode(tmp_path, vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite only: its journal mode")
    path = tmp_path / "new.sqlite3"
    done = manage("migrate", "--noinput", database_url=f"sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    fresh = sqlite3.connect(path)
    try:
        assert fresh.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        fresh.close()
