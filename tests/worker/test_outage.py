"""A worker outlives a database that refuses it for a while, and claims again once it is back."""

import re
import signal
import sqlite3
import time

import pytest
from django.db import connection

from later_django.models import JobIndexRow
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def outlasts_the_retries(worker, *lines: str) -> None:
    """Keep the database away until the worker has given up claiming (and logged ``lines``).

    The worker retries transient errors for about 2.5 s first (longer on a
    loaded machine), so a fixed wait could end before its retries do.
    """

    def gave_up() -> bool:
        """the worker logged that it cannot claim (and the lines asked for)"""
        log = worker.output()
        return all(line in log for line in ("cannot claim jobs: the database failed", *lines))

    try:
        wait_for(gave_up, timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{worker.output()}") from None
    time.sleep(1)  # a try or two more, with the pause between them
    assert worker.proc.poll() is None, worker.output()


def refuse_connections(refuse: bool) -> None:
    """Make the test database refuse new connections and cut the others but this test's; or undo.

    PostgreSQL will not change the database it is connected to, so this goes
    through the server's maintenance database.
    """
    import psycopg

    settings = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [mine] = cursor.fetchone()
    with psycopg.connect(
        dbname="postgres",
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        autocommit=True,
    ) as admin:
        name = settings["NAME"]
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if refuse else "true"}')
        if refuse:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> %s",
                [name, mine],
            )


def test_a_worker_keeps_running_through_a_database_outage(start_worker):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: a server that refuses connections for a while")
    worker = start_worker("--concurrency", "2")
    tasks.record.enqueue("outage", "before")

    def ran_before() -> bool:
        """the job enqueued before the outage has run"""
        return Execution.objects.filter(kind="outage", value="before").exists()

    wait_for(ran_before)
    across = tasks.sleep_only.enqueue(1)

    def running() -> bool:
        """the job that spans the outage is running"""
        # Not any running job: the first one's row says running until its outcome
        # is stored, which may be after its task has recorded its run.
        return JobIndexRow.objects.filter(job_id=across.id, stage="running").exists()

    wait_for(running)
    refuse_connections(True)
    try:
        tasks.record.enqueue("outage", "during")  # this connection is the one left open
        # The running job finishes meanwhile, and its outcome cannot be stored either.
        outlasts_the_retries(worker, "could not store 1 outcome(s); will try again")
    finally:
        refuse_connections(False)

    def ran_all() -> bool:
        """every job has run"""
        return JobIndexRow.objects.filter(stage="success").count() == 3

    wait_for(ran_all, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.output()
    assert sorted(Execution.objects.filter(kind="outage").values_list("value", flat=True)) == [
        "before",
        "during",
    ]
    across.refresh()
    assert across.return_value == 1
    log = worker.output()
    assert "cannot claim jobs: the database failed" in log
    assert "claiming again: the database answered after" in log
    # The job that finished while the database was away was stored once it was back.
    # With it, maybe, the job enqueued during the outage: claimed and run while the
    # writer waited to try again, its outcome joins the same statement.
    assert re.search(r"stored [12] outcome\(s\) held since the database failed", log)


def test_a_sqlite_worker_keeps_running_while_another_process_holds_the_write_lock(start_worker):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: one writer at a time")
    # A short busy timeout, so the worker's retries are spent within the test.
    worker = start_worker("--concurrency", "2", LATER_TEST_SQLITE_TIMEOUT="0.2")
    tasks.record.enqueue("locked", "before")

    def ran_before() -> bool:
        """the job enqueued before the lock was taken has run"""
        return Execution.objects.filter(kind="locked", value="before").exists()

    wait_for(ran_before)
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # an application's long write transaction
        outlasts_the_retries(worker)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    tasks.record.enqueue("locked", "after")

    def ran_after() -> bool:
        """the job enqueued after the lock was let go has run"""
        return Execution.objects.filter(kind="locked", value="after").exists()

    wait_for(ran_after, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.output()
    log = worker.output()
    assert "cannot claim jobs: the database failed error=database is locked" in log
    assert "claiming again: the database answered after" in log
