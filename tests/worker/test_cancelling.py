"""Cancelling running jobs in real worker processes: cooperative stops, interrupts, chains.

Each test waits for the task to record its start (a row), so the cancel always
meets a running job, and then for the stage the job ends in.
"""

from __future__ import annotations

import signal

import pytest

import later_django
from later_django.jobs import get_job
from later_django.models import JobIndexRow
from later_django.states import FINISHED, Stage
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution
from tests.topics import tasks as topic_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

INTERRUPTED = "did not stop within LATER_CANCEL_GRACE, so it was interrupted"


def started(kind: str) -> bool:
    return Execution.objects.filter(kind=f"{kind}:start").exists()


def ended(job_id: str) -> bool:
    return JobIndexRow.objects.filter(job_id=job_id, stage__in=FINISHED).exists()


def cancel_when_started(job_id: str, kind: str, reason: str = "customer asked") -> None:
    wait_for(lambda: started(kind), timeout=30)
    assert later_django.cancel(job_id, reason=reason) == Stage.RUNNING
    wait_for(lambda: ended(job_id), timeout=30)


def test_a_task_that_sees_the_cancel_stops_and_the_job_ends_cancelled(start_worker):
    job = tasks.stops_when_cancelled.enqueue("coop")
    worker = start_worker("--concurrency", "2", log_level="INFO")
    cancel_when_started(job.id, "coop")
    view = get_job(job.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.CANCELLED, "customer asked")
    assert view.errors == []  # it returned: nothing was interrupted
    assert view.return_value == "stopped early"  # kept, though the job did not succeed
    assert Execution.objects.filter(kind="coop:saw-cancel").count() == 1
    assert f"cancel requested for job id={job.id}" in worker.output()
    result = tasks.stops_when_cancelled.get_result(job.id)
    assert result.status == "FAILED"


@pytest.mark.parametrize(
    ("slow_task", "message"),
    [
        (tasks.ignores_cancel, INTERRUPTED),
        (tasks.async_ignores_cancel, INTERRUPTED),
        (tasks.blocks_ignoring_cancel, "did not stop when interrupted; its thread was abandoned"),
    ],
    ids=["python-loop", "async", "blocked-in-c"],
)
def test_a_task_that_ignores_the_cancel_is_interrupted_after_the_grace(
    start_worker, slow_task, message
):
    job = slow_task.enqueue("stubborn")
    after = tasks.record.enqueue("after-cancel", "next")
    start_worker("--concurrency", "1", LATER_TEST_CANCEL_GRACE="0.5")
    cancel_when_started(job.id, "stubborn")
    view = get_job(job.id, namespace="tests")
    assert view.stage == Stage.CANCELLED
    [error] = view.errors
    assert error.exception_class_path == "later_django.exceptions.InterruptedByCancel"
    assert message in error.traceback
    assert not Execution.objects.filter(kind="stubborn").exists()  # it never ran to its end
    # The thread (or its replacement) runs the next job. Its body's row commits before
    # its outcome is stored: wait for the outcome, not for the row.
    wait_for(lambda: ended(after.id), timeout=30)
    assert JobIndexRow.objects.get(job_id=after.id).stage == Stage.SUCCESS
    assert Execution.objects.filter(kind="after-cancel").exists()


def test_cancelling_a_running_parent_cancels_its_waiting_children(start_worker):
    parent = tasks.stops_when_cancelled.enqueue("parent")
    child = tasks.record.using(after=parent).enqueue("child", "c")
    grandchild = tasks.record.using(after=child).enqueue("grandchild", "g")
    start_worker()
    cancel_when_started(parent.id, "parent")
    assert get_job(parent.id, namespace="tests").stage == Stage.CANCELLED
    for job, its_parent in ((child, parent), (grandchild, child)):
        view = get_job(job.id, namespace="tests")
        assert (view.stage, view.cancel_reason) == (
            Stage.CANCELLED,
            f"Cancelled because its parent job {its_parent.id!r} ended cancelled.",
        )
    assert not Execution.objects.filter(kind__in=["child", "grandchild"]).exists()


def test_cancelling_a_running_partition_head_lets_the_partition_move_on(start_worker):
    head = topic_tasks.ordered_stops_when_cancelled.using(partition_key="k").enqueue("k")
    behind = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    start_worker()
    cancel_when_started(head.id, "cancellable:k")
    assert get_job(head.id, namespace="tests").stage == Stage.CANCELLED
    wait_for(lambda: ended(behind.id), timeout=30)
    assert get_job(behind.id, namespace="tests").stage == Stage.SUCCESS
    assert [e.value for e in Execution.objects.filter(kind="step:k")] == ["1"]


def test_a_job_whose_worker_died_after_the_request_is_not_run_again(start_worker):
    job = tasks.ignores_cancel.enqueue("orphaned")
    first = start_worker(LATER_TEST_CANCEL_GRACE="600")
    wait_for(lambda: started("orphaned"), timeout=30)
    assert later_django.cancel(job.id, reason="stop it") == Stage.RUNNING
    first.signal(signal.SIGKILL)
    first.wait(timeout=10)
    start_worker()  # takes the job over once its lease lapses
    wait_for(lambda: ended(job.id), timeout=30)
    view = get_job(job.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.CANCELLED, "stop it")
    assert [a.outcome for a in view.record.attempts] == ["lost", "cancelled"]
    assert Execution.objects.filter(kind="orphaned:start").count() == 1
