"""Task timeouts: the job fails with a timeout error and its slot is free again promptly."""

import pytest

from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


@pytest.mark.parametrize(
    ("slow_task", "error_path", "message"),
    [
        (
            tasks.too_slow_python,
            "later_django.exceptions.InterruptedByTimeout",
            "InterruptedByTimeout: The task ran longer than its timeout and was interrupted.",
        ),
        (
            tasks.too_slow_async,
            "later_django.exceptions.TaskTimeout",
            "TaskTimeout: Task 'tests.tasks.too_slow_async' ran longer than its timeout of 0.5 "
            "seconds.",
        ),
        (
            tasks.too_slow_blocking,
            "later_django.exceptions.TaskTimeout",
            "ran longer than its timeout of 0.5 seconds and did not stop when interrupted.",
        ),
    ],
    ids=["python-loop", "async", "blocked-in-c"],
)
def test_a_task_past_its_timeout_fails_and_the_next_job_runs_promptly(
    run_burst, slow_task, error_path, message
):
    slow = slow_task.enqueue()
    tasks.record.enqueue("after-timeout", "next")
    worker = run_burst("--concurrency", "1")

    slow.refresh()
    assert slow.status == TaskResultStatus.FAILED
    [error] = slow.errors
    assert error.exception_class_path == error_path
    assert message in error.traceback
    # 0.5 s timeout, then up to 1 s for an interrupt to land before the thread is
    # abandoned; counted from the slow job's start, so the worker's own start-up
    # (slow on a loaded machine) is left out.
    [after] = Execution.objects.filter(kind="after-timeout")
    assert after.at - slow.started_at.timestamp() < 3.0
    assert " failed=1 " in worker.output()


def test_an_abandoned_attempt_is_retried_by_the_tasks_policy(run_burst):
    result = tasks.blocks_on_its_first_attempt.enqueue("abandoned-then-retried")
    worker = run_burst("--concurrency", "1")

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, worker.output()
    [error] = result.errors
    assert error.exception_class_path == "later_django.exceptions.TaskTimeout"
    assert "did not stop when interrupted" in error.traceback
    assert result.attempts == 2
    assert [e.value for e in Execution.objects.filter(kind="abandoned-then-retried")] == ["2"]


@pytest.mark.parametrize(
    ("slow_task", "longest"),
    [(tasks.too_slow_python, 0.9), (tasks.too_slow_blocking, 1.9)],
    ids=["interrupted", "abandoned"],
)
def test_a_timeout_is_enforced_when_it_falls_due_not_at_the_next_poll(
    run_burst, slow_task, longest
):
    # A long poll interval and every slot busy: nothing else wakes the loop.
    slow = slow_task.enqueue()
    run_burst("--concurrency", "1", LATER_TEST_POLL_INTERVAL="5")

    slow.refresh()
    assert slow.status == TaskResultStatus.FAILED
    # A 0.5 s timeout; then the interrupt lands at once, or a blocked thread is
    # abandoned after 1 s of grace.
    ran = (slow.finished_at - slow.started_at).total_seconds()
    assert ran < longest, ran
