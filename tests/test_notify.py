"""PostgreSQL: every write that makes a job runnable sends the wake-up NOTIFY, at commit.

Idle workers LISTEN on ``later_delivery`` and fall back to polling, so a write
that forgets to notify still runs its jobs, a poll interval late. These tests
listen on a connection of their own and check each such write, one by one.
"""

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from later_django.db import NOTIFY_CHANNEL
from later_django.engine.outcomes import FAILED, SUCCESS
from later_django.jobs import retry_job
from later_django.worker.maintenance import promote_due
from tests import tasks
from tests.conftest import postgres_session
from tests.continuations.inline import claim_ready, finish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite workers watch the file instead")


@pytest.fixture
def listener() -> Iterator[psycopg.Connection]:
    with postgres_session(autocommit=True) as conn:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        yield conn


def heard(listener: psycopg.Connection) -> list[str]:
    """The payloads of the notifications that reached ``listener`` so far."""
    return [n.payload for n in listener.notifies(timeout=0.3)]


def test_an_enqueue_in_autocommit_wakes_the_namespace(listener):
    tasks.noop.enqueue()
    assert heard(listener) == ["tests"]


def test_an_enqueue_in_a_transaction_wakes_workers_at_its_commit_only(listener):
    with transaction.atomic():
        tasks.noop.enqueue()
        tasks.noop.enqueue()
        assert heard(listener) == []
    assert heard(listener) == ["tests"]  # one per transaction and namespace


def test_a_rolled_back_enqueue_wakes_nobody(listener):
    with transaction.atomic():
        tasks.noop.enqueue()
        transaction.set_rollback(True)
    assert heard(listener) == []


def test_a_bulk_enqueue_wakes_the_namespace_once(listener):
    tasks.noop.enqueue_many([((), {})] * 3)
    assert heard(listener) == ["tests"]


def test_a_delayed_job_wakes_nobody_until_it_is_promoted(listener):
    tasks.noop.using(run_after=timezone.now() + timedelta(seconds=30)).enqueue()
    assert heard(listener) == []
    assert promote_due("tests", using="default", now=timezone.now() + timedelta(seconds=31))
    assert heard(listener) == ["tests"]


def test_a_manual_retry_wakes_the_namespace(listener):
    job = tasks.noop.enqueue()
    finish(claim_ready(), FAILED)
    heard(listener)
    retry_job(job.id, namespace="tests")
    assert heard(listener) == ["tests"]


def test_a_parent_that_ends_wakes_the_namespace_for_its_children(listener):
    parent = tasks.noop.enqueue()
    child = tasks.noop.using(after=parent.id).enqueue()
    heard(listener)  # the parent's own enqueue
    finish(claim_ready(), SUCCESS)
    assert heard(listener) == ["tests"]
    assert [c.job_id for c in claim_ready()] == [child.id]
