"""A worker frozen in the middle of one of its own transactions does not hold its locks forever.

A stopped process (SIGSTOP, a paused VM, a debugger) keeps its connections
open, and with them the row locks of a transaction it was in: the partition
head it was renewing could never be taken over. PostgreSQL ends the worker's
own sessions once a transaction idles as long as a lease; task code is never
limited.
"""

import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings

from later_django.db import limit_idle_transactions
from later_django.sql import dialect
from later_django.storage import is_transient
from tests import tasks
from tests.conftest import stop_inside_a_transaction, wait_for
from tests.models import Execution

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
pytestmark = [pytest.mark.django_db(transaction=True), postgres_only]

LEASE = 2  # lease_seconds of the test backend (tests/settings.py)


def holding_thread(
    limit: float | None, work: Callable[[threading.Event], None], errors: list[BaseException]
) -> threading.Thread:
    """A thread that runs ``work`` in a transaction, its idle limit ``limit``; ``work``
    sets the event once it holds the one Execution row's lock."""
    locked = threading.Event()

    def run() -> None:
        try:
            limit_idle_transactions("default", limit)
            with transaction.atomic():
                work(locked)
        except Exception as e:  # noqa: BLE001  (the test looks at it)
            errors.append(e)
        finally:
            limit_idle_transactions("default", None)
            connections.close_all()
            locked.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert locked.wait(10)
    return thread


def idle_holder(limit: float | None, hold: float, errors: list[BaseException]) -> threading.Thread:
    """A thread that locks the one Execution row, then idles in its transaction for ``hold``."""

    def work(locked: threading.Event) -> None:
        Execution.objects.select_for_update().get()
        locked.set()
        time.sleep(hold)
        Execution.objects.count()

    return holding_thread(limit, work, errors)


def seconds_to_lock() -> float:
    began = time.monotonic()
    with transaction.atomic():
        Execution.objects.select_for_update().get()
    return time.monotonic() - began


def test_a_limited_thread_that_idles_in_a_transaction_loses_its_session_and_locks():
    Execution.objects.create(kind="row", value="", pid=0, at=0)
    errors: list[BaseException] = []
    holder = idle_holder(0.5, hold=3, errors=errors)
    waited = seconds_to_lock()
    holder.join()

    assert waited < 2, waited  # the lock went with the session, not after the 3 s idle
    assert len(errors) == 1
    assert is_transient(errors[0]), errors[0]  # the worker's retry opens a new session


def test_threads_without_a_limit_keep_their_transactions():
    Execution.objects.create(kind="row", value="", pid=0, at=0)
    errors: list[BaseException] = []
    holder = idle_holder(None, hold=1.5, errors=errors)
    waited = seconds_to_lock()
    holder.join()

    assert waited >= 1.4, waited
    assert errors == []


def test_a_thread_stopped_between_two_statements_of_a_batch_loses_its_session_and_locks():
    """The engine's batches of one statement over many rows (``execute_each``) send each
    statement alone. psycopg's ``executemany`` pipelines them: stopped in between, the
    session waits for the rest of the pipeline, which the server does not count as
    idle, and keeps the locks for as long as the thread stays stopped."""
    row = Execution.objects.create(kind="row", value="", pid=0, at=0)
    table = Execution._meta.db_table
    errors: list[BaseException] = []

    def work(locked: threading.Event) -> None:
        def rows() -> Iterator[tuple[int]]:
            yield (row.pk,)
            locked.set()
            time.sleep(3)  # as if the process were stopped between two statements
            yield (row.pk,)

        with connection.cursor() as cursor:
            statement = f"UPDATE {table} SET at = at + 1 WHERE id = %s"
            dialect(connection).execute_each(cursor, statement, rows())

    stopped = holding_thread(0.5, work, errors)
    time.sleep(0.1)  # the first statement has reached the server
    waited = seconds_to_lock()
    stopped.join()

    assert waited < 2, waited  # the lock went with the session, not after the 3 s stop
    assert len(errors) == 1, errors
    assert is_transient(errors[0]), errors[0]
    row.refresh_from_db()
    assert row.at == 0  # the stopped batch rolled back whole


def test_the_limit_can_be_turned_off_for_transaction_poolers():
    Execution.objects.create(kind="row", value="", pid=0, at=0)
    errors: list[BaseException] = []
    with override_settings(LATER_LIMIT_IDLE_TRANSACTIONS=False):
        holder = idle_holder(0.3, hold=1.5, errors=errors)
        waited = seconds_to_lock()
        holder.join()

    assert waited >= 1.4, waited
    assert errors == []


@pytest.mark.process
def test_a_worker_frozen_mid_transaction_loses_its_session_after_a_lease(start_worker):
    worker = start_worker("--concurrency", "2")
    wait_for(lambda: "worker starting" in worker.output(), timeout=30)
    time.sleep(0.5)  # its threads are claiming and renewing

    stuck = stop_inside_a_transaction(worker)
    caught_at = time.monotonic()
    try:

        def ended() -> bool:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [stuck])
                return cursor.fetchone()[0] == 0

        wait_for(ended, timeout=LEASE + 10)
        assert time.monotonic() - caught_at < LEASE + 3
    finally:
        worker.signal(signal.SIGCONT)

    # Woken again, the worker retries on a new session and goes on working.
    result = tasks.record.enqueue("after", 1)

    def succeeded() -> bool:
        """the job enqueued after the worker woke up has succeeded"""
        result.refresh()
        return result.status == "SUCCESSFUL"

    wait_for(succeeded, timeout=30)
    assert worker.proc.poll() is None, worker.output()


@pytest.mark.process
def test_task_code_may_leave_a_transaction_idle_longer_than_a_lease(start_worker):
    result = tasks.idles_in_a_transaction.enqueue("idle", LEASE + 1.5)
    start_worker("--concurrency", "2")
    wait_for(lambda: Execution.objects.filter(kind="idle", value="committed").exists(), timeout=30)
    wait_for(lambda: (result.refresh(), result.status)[1] == "SUCCESSFUL", timeout=10)
