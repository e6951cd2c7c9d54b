"""PostgreSQL: what an enqueue sends to the server, read from libpq's protocol trace."""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, transaction

from later_django.engine.enqueue import STREAMED_BATCH
from tests import tasks
from tests.conftest import postgres_session
from tests.continuations.inline import claim_ready, finish
from tests.models import Order

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")


@contextmanager
def traced() -> Iterator[list[str]]:
    """The names of the protocol messages the client sends inside the block."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    sent: list[str] = []
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        try:
            yield sent
        finally:
            pgconn.untrace()
        trace.seek(0)
        for line in trace.read().decode(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) >= 4 and fields[1] == "F":
                sent.append(fields[3] + (fields[4] if fields[3] == "Query" else ""))


def job_is_visible_elsewhere(job_id: str) -> bool:
    with postgres_session() as other:
        return (
            other.execute("SELECT 1 FROM later_jobs_index WHERE job_id = %s", [job_id]).fetchone()
            is not None
        )


def test_an_enqueue_outside_a_transaction_is_one_statement_in_autocommit():
    tasks.add.enqueue(0, 1)  # the statement is prepared on first use
    with traced() as sent:
        result = tasks.add.enqueue(1, 2)
    assert sent.count("Execute") == 1
    assert not [m for m in sent if m.startswith("Query")], sent  # no BEGIN, no COMMIT
    assert job_is_visible_elsewhere(result.id)


def test_an_enqueue_inside_a_transaction_commits_with_it():
    tasks.add.enqueue(0, 1)
    with traced() as sent, transaction.atomic():
        Order.objects.create(reference="order-1")
        result = tasks.add.enqueue(1, 2)
        assert not job_is_visible_elsewhere(result.id)
    assert [m for m in sent if m in ('Query "BEGIN"', 'Query "COMMIT"')] == [
        'Query "BEGIN"',
        'Query "COMMIT"',
    ]
    assert job_is_visible_elsewhere(result.id)


def test_a_bulk_enqueue_outside_a_transaction_is_one_statement_in_autocommit():
    tasks.add.enqueue_many([((0, 1), {}), ((1, 1), {})])
    with traced() as sent:
        results = tasks.add.enqueue_many([((i, 1), {}) for i in range(50)])
    assert sent.count("Execute") == 1
    assert not [m for m in sent if m.startswith("Query")], sent
    assert all(job_is_visible_elsewhere(r.id) for r in results[::10])


def test_a_bulk_enqueue_of_many_batches_sends_them_without_waiting_between_them():
    count = 3 * STREAMED_BATCH
    tasks.add.enqueue_many([((i, 1), {}) for i in range(STREAMED_BATCH + 1)])  # prepares
    with traced() as sent:
        results = tasks.add.enqueue_many([((i, 1), {}) for i in range(count)])
    # One transaction of its own, in which the three statements follow one another
    # with no Sync, the message after which the client waits for the server.
    executes = [i for i, m in enumerate(sent) if m == "Execute"]
    assert len(executes) == 1 + 3, sent  # BEGIN, then a statement per batch
    assert "Sync" not in sent[executes[1] : executes[-1]], sent
    assert sent[-1] == 'Query "COMMIT"', sent
    assert len(results) == count
    assert all(job_is_visible_elsewhere(r.id) for r in results[:: STREAMED_BATCH // 2])


def finish_all() -> list[str]:
    """Claim every runnable job, store its success, and return what storing sent."""
    claimed = claim_ready()
    with traced() as sent:
        written = finish(claimed)
    assert len(written) == len(claimed)
    return sent


def test_outcomes_of_jobs_without_children_are_one_statement_in_autocommit():
    tasks.add.enqueue(0, 1)
    finish_all()  # prepares the statement
    tasks.add.enqueue_many([((i, 1), {}) for i in range(16)])
    sent = finish_all()
    assert sent.count("Execute") == 1
    assert not [m for m in sent if m.startswith("Query")], sent


def test_a_job_with_children_ends_in_the_transaction_that_releases_them():
    parent = tasks.add.enqueue(0, 1)
    child = tasks.add.using(after=parent).enqueue(1, 1)
    sent = finish_all()
    # The one statement leaves the parent alone; a transaction stores it and releases the child.
    assert 'Query "BEGIN"' in sent
    assert 'Query "COMMIT"' in sent
    child.refresh()
    parent.refresh()
    assert (parent.status, child.status) == ("SUCCESSFUL", "READY")
    assert job_is_visible_elsewhere(child.id)
