"""An idle worker wakes on a commit (LISTEN/NOTIFY, SQLite's data_version), else it polls.

The poll interval is a setting read by the worker, so these tests run a real
Worker in a thread of the test process under ``override_settings``: with a
30-second poll, only the wake-up path can explain a start within milliseconds.
"""

import statistics
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution
from tests.worker.in_process import worker_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def latency_of_one_job(value: str) -> float:
    """Seconds from enqueue to the task running, for a job enqueued to an idle worker."""
    time.sleep(0.3)  # let the worker finish its last pass and go idle
    before = time.time()
    tasks.record.enqueue("wake", value)
    wait_for(lambda: Execution.objects.filter(kind="wake", value=value).exists(), timeout=10)
    return Execution.objects.get(kind="wake", value=value).at - before


@override_settings(LATER_POLL_INTERVAL=30)
def test_an_idle_worker_starts_a_new_job_within_milliseconds_of_its_commit():
    with worker_thread(concurrency=1):
        latencies = [latency_of_one_job(str(i)) for i in range(5)]
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 0.5, latencies


@override_settings(LATER_POLL_INTERVAL=30)
def test_a_job_committed_inside_a_transaction_wakes_the_worker_at_commit():
    with worker_thread(concurrency=1):
        time.sleep(0.3)
        with transaction.atomic():
            tasks.record.enqueue("wake", "tx")
            time.sleep(0.5)
            committed = time.time()
        wait_for(lambda: Execution.objects.filter(kind="wake").exists(), timeout=10)
    assert 0 <= Execution.objects.get(kind="wake").at - committed < 0.5


@override_settings(LATER_POLL_INTERVAL=0.5)
def test_a_job_whose_notification_never_arrives_is_found_by_polling(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: NOTIFY is its wake-up path")
    with worker_thread(concurrency=1):
        time.sleep(0.3)
        # A job made runnable by hand, by a write that sends no NOTIFY: enqueued for
        # later (no command, no notification), then given its command at once.
        with transaction.atomic(), connection.cursor() as cursor:
            job = tasks.record.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(
                "wake", "silent"
            )
            cursor.execute(
                "UPDATE later_jobs_index SET stage = 'enqueued', run_at = now() WHERE job_id = %s",
                [job.id],
            )
            cursor.execute(
                "INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, "
                "available_at, enqueued_at) VALUES ('tests', 'default', %s, 0, now(), now())",
                [job.id],
            )
        committed = time.time()
        wait_for(lambda: Execution.objects.filter(kind="wake").exists(), timeout=10)
    assert Execution.objects.get(kind="wake").at - committed < 1.5
