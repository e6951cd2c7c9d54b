"""A continuation committed while its parent completes is never left waiting."""

import threading
import time

import pytest
from django.db import connection, transaction

from tests import tasks

from .inline import claim_ready, finish, has_command, stage_of

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(target):
    """Run ``target`` on its own thread and database connection; return the thread."""

    def run():
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_parent_completion_waits_for_a_child_being_enqueued_then_releases_it():
    parent = tasks.record.enqueue("race", "parent")
    claimed = claim_ready()
    children = []
    enqueued, commit = threading.Event(), threading.Event()

    def enqueue_child_in_a_long_transaction():
        with transaction.atomic():
            children.append(tasks.record.using(after=parent).enqueue("race", "child"))
            enqueued.set()
            commit.wait(10)

    enqueuer = in_thread(enqueue_child_in_a_long_transaction)
    assert enqueued.wait(10)
    completer = in_thread(lambda: finish(claimed))
    time.sleep(0.3)
    # Without the parent-row lock the completion would commit now, miss the
    # uncommitted child, and strand it in "waiting" for ever.
    assert completer.is_alive()
    commit.set()
    enqueuer.join(10)
    completer.join(10)
    assert not completer.is_alive()
    child = children[0]
    assert (stage_of(parent.id), stage_of(child.id)) == ("success", "enqueued")
    assert has_command(child.id)


def test_child_enqueued_while_the_parent_completes_sees_the_final_stage():
    parent = tasks.always_fails.enqueue("race")
    claimed = claim_ready()
    children = []
    completing, commit = threading.Event(), threading.Event()

    def fail_parent_in_a_long_transaction():
        with transaction.atomic():
            finish(claimed, "failed")
            completing.set()
            commit.wait(10)

    completer = in_thread(fail_parent_in_a_long_transaction)
    assert completing.wait(10)
    enqueuer = in_thread(
        lambda: children.append(tasks.record.using(after=parent).enqueue("race", "child"))
    )
    time.sleep(0.3)
    assert enqueuer.is_alive()
    commit.set()
    completer.join(10)
    enqueuer.join(10)
    assert stage_of(children[0].id) == "cancelled"
