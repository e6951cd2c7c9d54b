"""A job's database connections are checked around it, as Django checks them around a request.

A connection that broke during a job, or that outlived ``CONN_MAX_AGE``, is
closed when the job ends, so the next job on the same thread opens a fresh
one. PostgreSQL only: the tests tell sessions apart by their backend pid.
"""

from collections.abc import Iterator

import pytest
from django.db import connection, connections

from later_django.jobs import get_job
from later_django.states import Stage
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution
from tests.worker.in_process import worker_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: sessions are told apart by their backend pid")


@pytest.fixture
def conn_max_age() -> Iterator[None]:
    """Set the default database's CONN_MAX_AGE for the connections opened in the test."""
    settings = connections.settings["default"]
    before = settings["CONN_MAX_AGE"]

    def set_to(value: int | None) -> None:
        settings["CONN_MAX_AGE"] = value

    yield set_to
    settings["CONN_MAX_AGE"] = before


def sessions_of(count: int) -> list[str]:
    """The sessions of ``count`` record_session jobs run one after another on one slot."""
    with worker_thread(concurrency=1):
        for number in range(count):
            tasks.record_session.enqueue("session", number)
        wait_for(lambda: Execution.objects.filter(kind="session").count() == count, timeout=20)
    runs = Execution.objects.filter(kind="session").order_by("at")
    assert [r.value.split(":")[0] for r in runs] == [str(n) for n in range(count)]
    return [r.value.split(":")[1] for r in runs]


def test_each_job_opens_a_fresh_session_when_conn_max_age_is_zero(conn_max_age):
    conn_max_age(0)  # Django's default: a connection per request, here per job
    assert len(set(sessions_of(4))) == 4


def test_jobs_in_a_row_share_a_persistent_session(conn_max_age):
    conn_max_age(None)
    assert len(set(sessions_of(4))) == 1


def test_a_job_whose_session_ended_leaves_a_working_connection_to_the_next(conn_max_age):
    conn_max_age(None)
    with worker_thread(concurrency=1):
        broken = tasks.ends_its_session.enqueue()
        after = tasks.record.enqueue("after", "ok")
        wait_for(lambda: Execution.objects.filter(kind="after").exists(), timeout=20)
    assert get_job(broken.id, namespace="tests").stage == Stage.FAILED
    assert get_job(after.id, namespace="tests").stage == Stage.SUCCESS
