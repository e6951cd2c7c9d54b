"""Upgrades: jobs stored under an older schema stay runnable after ``migrate``."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from later_django.models import JobIndexRow
from tests import tasks
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
