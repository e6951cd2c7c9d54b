"""Retries follow the task's backoff policy and keep every attempt's error."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.models import DeliveryCommand, JobIndexRow, StorageValue
from later_django.records import JobRecord
from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

SLACK = 0.005  # microsecond rounding of stored times


def record_of(job_id: str) -> JobRecord:
    raw = StorageValue.objects.get(key=f"job:{job_id}").value
    return JobRecord.decode(bytes(raw), job_id=job_id)


def gaps(job_id: str) -> list[float]:
    """Seconds from the end of each attempt to the start of the next."""
    attempts = record_of(job_id).attempts
    return [
        (later.started_at - earlier.finished_at) / 1e6
        for earlier, later in itertools.pairwise(attempts)
    ]


def finished(job_id: str) -> bool:
    return JobIndexRow.objects.get(job_id=job_id).stage in ("success", "failed")


def test_a_job_that_fails_then_succeeds_keeps_the_errors_of_its_failed_attempts(start_worker):
    result = tasks.fails_then_succeeds.enqueue("flaky", "k", 2)
    start_worker()
    wait_for(lambda: finished(result.id), timeout=20)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 2
    assert len(result.worker_ids) == 3
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert result.errors[0].traceback.endswith("ValueError: failure 1 of 2\n")
    assert result.errors[1].traceback.endswith("ValueError: failure 2 of 2\n")
    # Fixed backoff of 0.2 s before each retry.
    assert all(gap >= 0.2 - SLACK for gap in gaps(result.id))


def test_exponential_backoff_doubles_the_wait_and_the_last_attempt_fails_the_job(start_worker):
    result = tasks.fails_with_exponential_backoff.enqueue("exp")
    start_worker()
    wait_for(lambda: finished(result.id), timeout=20)

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert Execution.objects.filter(kind="exp").count() == 3
    assert [e.traceback.splitlines()[-1] for e in result.errors] == ["ValueError: exponential"] * 3
    first, second = gaps(result.id)
    assert 0.3 - SLACK <= first < 0.3 + 1.0
    assert 0.6 - SLACK <= second < 0.6 + 1.0


def test_jittered_backoff_waits_no_longer_than_its_cap(start_worker):
    result = tasks.fails_with_jittered_backoff.enqueue("jitter")
    start_worker()
    wait_for(lambda: finished(result.id), timeout=20)

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 4
    assert all(gap < 0.2 + 1.0 for gap in gaps(result.id))


def test_a_callable_policy_can_stop_retrying_before_max_attempts(start_worker):
    result = tasks.fails_with_given_error.enqueue("picky", "first")
    start_worker()
    wait_for(lambda: finished(result.id), timeout=20)

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    # max_attempts is 5, but the policy retries ValueError only (after a 0.1 s timedelta).
    assert [e.exception_class_path for e in result.errors] == [
        "builtins.ValueError",
        "builtins.TypeError",
    ]
    assert result.errors[1].traceback.endswith("TypeError: first then TypeError\n")
    [gap] = gaps(result.id)
    assert gap >= 0.1 - SLACK


def test_a_retry_waiting_for_its_time_is_requeued_and_reads_as_ready(run_burst):
    result = tasks.fails_and_retries_in_a_minute.enqueue("waits")
    before = timezone.now()
    run_burst()  # runs the first attempt; the retry is not runnable yet, so it exits

    row = JobIndexRow.objects.get(job_id=result.id)
    assert row.stage == "requeued"
    assert row.run_at >= before + timedelta(seconds=60)
    assert not DeliveryCommand.objects.filter(job_id=result.id).exists()
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert len(result.errors) == 1

    # Once its time has come (moved up here rather than waited for), a burst worker
    # promotes it and runs the second and last attempt.
    JobIndexRow.objects.filter(job_id=result.id).update(run_at=timezone.now())
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 2
    assert Execution.objects.filter(kind="waits").count() == 2


def test_a_retry_delay_too_large_for_a_date_fails_the_job_with_the_tasks_own_error(run_burst):
    result = tasks.fails_with_an_unreachable_retry.enqueue("unreachable")
    worker = run_burst("--concurrency", "1")

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in result.errors] == ["builtins.RuntimeError"]
    assert "backoff policy failed for job id=" in worker.output()
    assert Execution.objects.filter(kind="unreachable").count() == 1
