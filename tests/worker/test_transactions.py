"""Jobs enqueued in the caller's transaction: invisible to workers until it commits."""

import signal
import threading
import time

import pytest
from django.db import connections, transaction

from later_django.engine.claiming import claim
from later_django.models import JobIndexRow
from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution, Order

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def executions(kind: str) -> list[str]:
    return list(Execution.objects.filter(kind=kind).values_list("value", flat=True))


def test_a_worker_never_runs_a_job_before_its_transaction_commits(start_worker):
    worker = start_worker("--concurrency", "2")
    tasks.record.enqueue("tx", "warm-up")
    wait_for(lambda: executions("tx") == ["warm-up"], timeout=20)

    with transaction.atomic():
        Order.objects.create(reference="B-1")
        result = tasks.record.enqueue("tx", "inside")
        # The worker is idle and polling every 50 ms (SQLite: waiting for the write lock).
        time.sleep(1.5)
        committed_at = time.time()
    wait_for(lambda: JobIndexRow.objects.get(job_id=result.id).stage == "success", timeout=20)

    run = Execution.objects.get(kind="tx", value="inside")
    assert run.at >= committed_at
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    assert "database is locked" not in worker.output()


def test_a_job_from_a_rolled_back_transaction_never_runs(run_burst):
    def enqueue_then_fail():
        with transaction.atomic():
            tasks.record.enqueue("rolled-back", "never")
            raise RuntimeError("abandon")

    with pytest.raises(RuntimeError, match=r"^abandon$"):
        enqueue_then_fail()
    tasks.record.enqueue("committed", "yes")
    worker = run_burst()

    assert executions("rolled-back") == []
    assert executions("committed") == ["yes"]
    assert "worker stopped" in worker.output()
    assert " claimed=1 " in worker.output()


def test_a_burst_worker_leaves_an_uncommitted_job_alone(vendor, run_burst):
    if vendor != "postgresql":
        pytest.skip("a SQLite worker waits for the enqueuer's write lock instead")
    with transaction.atomic():
        result = tasks.record.enqueue("open", "later")
        worker = run_burst()
        assert " claimed=0 " in worker.output()
    assert executions("open") == []
    assert JobIndexRow.objects.get(job_id=result.id).stage == "enqueued"

    run_burst()
    assert executions("open") == ["later"]


def test_an_open_transaction_that_enqueued_does_not_hold_up_claims_of_other_jobs(vendor):
    if vendor != "postgresql":
        pytest.skip("SQLite has a single writer by design")
    committed = tasks.add.enqueue(1, 1).id
    finished = threading.Event()
    claimed: list[str] = []

    def claim_the_committed_job():
        try:
            found = claim("tests", "other", queues=None, free=1, lease_seconds=30, using="default")
            claimed.extend(c.job_id for c in found)
        finally:
            finished.set()
            connections.close_all()

    with transaction.atomic():
        tasks.add.enqueue(2, 2)
        thread = threading.Thread(target=claim_the_committed_job)
        thread.start()
        on_time = finished.wait(2)
    thread.join(10)
    assert claimed == [committed]
    assert on_time, "the claim waited for an unrelated open transaction to commit"
