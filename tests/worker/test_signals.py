"""Two-phase shutdown: the first signal drains within --shutdown-timeout, the second exits."""

import signal
import time

import pytest
from django.utils import timezone

from later_django.models import DeliveryCommand, JobExecution, JobIndexRow, StorageValue
from later_django.records import JobRecord
from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def stage(job_id: str) -> str:
    return JobIndexRow.objects.get(job_id=job_id).stage


def wait_until_running(job_id: str) -> None:
    wait_for(lambda: stage(job_id) == "running", timeout=20)
    # Claimed is not yet started: give the slot a moment to call the task.
    time.sleep(0.3)


def record_of(job_id: str) -> JobRecord:
    raw = StorageValue.objects.get(key=f"job:{job_id}").value
    return JobRecord.decode(bytes(raw), job_id=job_id)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_lets_the_running_job_finish_then_exits(start_worker, signum):
    worker = start_worker("--concurrency", "1")
    result = tasks.sleep_then_record.enqueue("drain", "finished", 1.0)
    wait_until_running(result.id)

    worker.signal(signum)
    assert worker.wait(timeout=20) == 0

    assert list(Execution.objects.values_list("value", flat=True)) == ["finished"]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    output = worker.output()
    name = signal.Signals(signum).name
    assert f"{name} received: no new jobs; waiting up to 30.0s for" in output
    assert " claimed=1 succeeded=1 failed=0 retried=0 released=0 " in output
    [summary] = [line for line in output.splitlines() if "worker stopped" in line]
    assert summary.split("worker stopped ")[1].startswith("id=")


def test_the_first_signal_starts_no_job_that_was_waiting(start_worker):
    worker = start_worker("--concurrency", "1")
    first = tasks.sleep_then_record.enqueue("drain", "first", 1.0)
    second = tasks.sleep_then_record.enqueue("drain", "second", 1.0)
    wait_until_running(first.id)

    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0

    assert list(Execution.objects.values_list("value", flat=True)) == ["first"]
    assert stage(second.id) == "enqueued"
    assert JobIndexRow.objects.get(job_id=second.id).attempts == 0
    command = DeliveryCommand.objects.get(job_id=second.id)
    assert command.lease_owner is None


def test_a_job_still_running_at_the_shutdown_timeout_is_released_without_using_an_attempt(
    start_worker, run_burst
):
    worker = start_worker("--concurrency", "1", "--shutdown-timeout", "0.5")
    result = tasks.sleep_then_record.enqueue("released", "done", 2)
    wait_until_running(result.id)

    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    assert time.monotonic() - started < 2.5

    assert f"job id={result.id} released at shutdown" in worker.output()
    assert " released=1 " in worker.output()
    row = JobIndexRow.objects.get(job_id=result.id)
    assert (row.stage, row.attempts) == ("enqueued", 0)
    # Released, not left to lapse: claimable at once, no execution lease left behind.
    command = DeliveryCommand.objects.get(job_id=result.id)
    assert command.lease_owner is None
    assert command.available_at <= timezone.now()
    assert not JobExecution.objects.filter(job_id=result.id).exists()
    assert record_of(result.id).attempts == []

    second = run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert len(result.worker_ids) == 1
    assert result.worker_ids[0] in second.output()
    assert list(Execution.objects.values_list("value", flat=True)) == ["done"]


def test_a_second_signal_exits_at_once_and_the_lease_lapses_to_another_worker(
    start_worker, run_burst
):
    worker = start_worker("--concurrency", "1")
    result = tasks.sleep_then_record.enqueue("abandoned", "done", 2)
    wait_until_running(result.id)

    worker.signal(signal.SIGTERM)
    time.sleep(0.2)
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=10) == 1
    assert time.monotonic() - started < 1.0
    assert "SIGTERM received again: exiting now" in worker.output()
    assert stage(result.id) == "running"
    assert Execution.objects.count() == 0

    # The lease (2 s in the test settings) lapses; then another worker takes the job over.
    wait_for(lambda: DeliveryCommand.objects.get(job_id=result.id).available_at < timezone.now())
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert len(result.worker_ids) == 2
    assert [a.outcome for a in record_of(result.id).attempts] == ["lost", "success"]
    assert list(Execution.objects.values_list("value", flat=True)) == ["done"]


def test_an_idle_worker_stops_promptly_on_the_first_signal(start_worker):
    worker = start_worker()
    wait_for(lambda: "worker starting" in worker.output(), timeout=20)
    started = time.monotonic()
    worker.signal(signal.SIGINT)
    assert worker.wait(timeout=10) == 0
    assert time.monotonic() - started < 2.0
    assert " claimed=0 " in worker.output()
