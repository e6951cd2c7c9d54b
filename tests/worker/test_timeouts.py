"""Task timeouts: the job fails with a timeout error and its slot is free again promptly."""

import time

import pytest
from django.tasks import TaskResultStatus

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
    enqueued = time.time()
    slow = slow_task.enqueue()
    tasks.record.enqueue("after-timeout", "next")
    worker = run_burst("--concurrency", "1")

    slow.refresh()
    assert slow.status == TaskResultStatus.FAILED
    [error] = slow.errors
    assert error.exception_class_path == error_path
    assert message in error.traceback
    # 0.5 s timeout, then up to 1 s for an interrupt to land before the thread is abandoned.
    [after] = Execution.objects.filter(kind="after-timeout")
    assert after.at - enqueued < 3.5
    assert " failed=1 " in worker.output()
