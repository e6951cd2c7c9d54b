"""get_result/aget_result: Django TaskResults built from a job's record and index row."""

import re
import sys
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from later_django.models import JobIndexRow, StorageValue
from later_django.records import JobRecord
from later_django.results import UnavailableTask
from later_django.tasks_api import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    default_task_backend,
    task_finished,
    task_started,
)
from tests import tasks
from tests.models import Execution
from tests.worker.in_process import run_burst_in_process

pytestmark = pytest.mark.django_db
with_worker = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("stage", "status"),
    [
        ("delayed", TaskResultStatus.READY),
        ("waiting", TaskResultStatus.READY),
        ("enqueued", TaskResultStatus.READY),
        ("requeued", TaskResultStatus.READY),
        ("running", TaskResultStatus.RUNNING),
        ("success", TaskResultStatus.SUCCESSFUL),
        ("failed", TaskResultStatus.FAILED),
        ("cancelled", TaskResultStatus.FAILED),
    ],
)
def test_each_stage_maps_to_the_django_status(stage, status):
    result = tasks.add.enqueue(1, 2)
    JobIndexRow.objects.filter(job_id=result.id).update(stage=stage)
    assert default_task_backend.get_result(result.id).status == status


def test_a_new_job_reads_back_ready_with_its_arguments():
    result = tasks.add.using(priority=3).enqueue(1, b=(2,))
    fetched = tasks.add.get_result(result.id)

    assert fetched.status == TaskResultStatus.READY
    assert (fetched.args, fetched.kwargs) == ([1], {"b": [2]})
    assert fetched.task.priority == 3
    assert fetched.enqueued_at == pytest.approx(result.enqueued_at, abs=timedelta(milliseconds=1))
    assert (fetched.started_at, fetched.finished_at, fetched.last_attempted_at) == (None,) * 3
    assert (fetched.errors, fetched.worker_ids) == ([], [])
    with pytest.raises(ValueError, match=r"^Task has not finished yet$"):
        _ = fetched.return_value


def test_a_delayed_job_reads_back_with_its_run_after_and_options():
    when = timezone.now() + timedelta(hours=2)
    result = tasks.add.using(run_after=when, queue_name="slow", priority=-7).enqueue(1, 1)
    fetched = default_task_backend.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    assert fetched.task.run_after == pytest.approx(when, abs=timedelta(microseconds=1))
    assert (fetched.task.queue_name, fetched.task.priority) == ("slow", -7)


@with_worker
def test_a_successful_job_has_its_return_value_worker_and_times():
    result = tasks.add.enqueue(20, 22)
    worker = run_burst_in_process()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert result.worker_ids == [worker.id]
    assert result.errors == []
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at


@with_worker
def test_a_failed_job_keeps_one_worker_id_and_one_error_per_attempt():
    result = tasks.always_fails.enqueue("out of cheese")
    worker = run_burst_in_process()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.worker_ids == [worker.id] * 3
    assert [e.exception_class_path for e in result.errors] == ["builtins.RuntimeError"] * 3
    assert all(e.exception_class is RuntimeError for e in result.errors)
    for error in result.errors:
        assert error.traceback.startswith("Traceback (most recent call last):")
        assert "raise RuntimeError(message)" in error.traceback
        assert error.traceback.endswith("RuntimeError: out of cheese\n")
    assert result.last_attempted_at > result.started_at
    with pytest.raises(ValueError, match=r"^Task failed$"):
        _ = result.return_value


@with_worker
def test_an_async_task_runs_and_returns_its_value():
    result = tasks.async_add.enqueue(2, 3)
    run_burst_in_process()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5


@with_worker
def test_aget_result_reads_the_same_result():
    result = tasks.add.enqueue(1, 1)
    run_burst_in_process()
    fetched = async_to_sync(tasks.add.aget_result)(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value == 2
    async_to_sync(result.arefresh)()
    assert result.return_value == 2


@with_worker
def test_context_attempt_counts_from_one():
    result = tasks.report_attempt.enqueue("ctx")
    run_burst_in_process()
    result.refresh()
    assert result.return_value == 1
    assert list(Execution.objects.values_list("value", flat=True)) == ["1"]


@with_worker
def test_context_attempt_rises_with_each_retry():
    tasks.fails_reporting_attempt.enqueue("ctx-retry")
    run_burst_in_process()
    assert list(Execution.objects.order_by("id").values_list("value", flat=True)) == [
        "1",
        "2",
        "3",
    ]


@with_worker
def test_a_return_value_that_cannot_be_stored_fails_the_job_naming_it():
    result = tasks.returns_unstorable.enqueue()
    run_burst_in_process()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "later_django.exceptions.SerializationError"
    # Django's own backends record a TypeError for a value JSON cannot carry.
    assert issubclass(error.exception_class, TypeError)
    assert (
        "Argument return value of task 'tests.tasks.returns_unstorable' is {1, 2, 3} of type set"
        in error.traceback
    )


@with_worker
def test_task_signals_are_sent_by_the_worker_with_the_current_status():
    seen = []

    def on_started(sender, task_result, **kwargs):
        seen.append(("started", task_result.task.name, task_result.status, None))

    def on_finished(sender, task_result, **kwargs):
        # Django's own receiver logs sys.exc_info(): for a failure it must be the task's error.
        exc = sys.exc_info()[1]
        seen.append(("finished", task_result.task.name, task_result.status, repr(exc)))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        tasks.add.enqueue(1, 2)
        run_burst_in_process(concurrency=1)
        tasks.fails_reporting_attempt.enqueue("signals")
        run_burst_in_process(concurrency=1)
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)

    ready, running, failed, ok = (
        TaskResultStatus.READY,
        TaskResultStatus.RUNNING,
        TaskResultStatus.FAILED,
        TaskResultStatus.SUCCESSFUL,
    )
    name = "fails_reporting_attempt"
    assert seen == [
        ("started", "add", running, None),
        ("finished", "add", ok, "None"),
        ("started", name, running, None),
        ("finished", name, ready, "RuntimeError('attempt 1')"),
        ("started", name, running, None),
        ("finished", name, ready, "RuntimeError('attempt 2')"),
        ("started", name, running, None),
        ("finished", name, failed, "RuntimeError('attempt 3')"),
    ]


def test_an_unknown_id_does_not_exist():
    with pytest.raises(TaskResultDoesNotExist, match=r"^01h0000000000000000000000$"):
        default_task_backend.get_result("01h0000000000000000000000")


def test_a_result_of_another_task_is_a_mismatch():
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(
        TaskResultMismatch, match=r"^Task does not match \(received 'tests\.tasks\.add'\)$"
    ):
        tasks.noop.get_result(result.id)


def test_a_job_past_its_retention_no_longer_exists():
    result = tasks.add.enqueue(1, 2)
    past = timezone.now() - timedelta(seconds=1)
    JobIndexRow.objects.filter(job_id=result.id).update(stage="success", date_expire=past)
    StorageValue.objects.filter(key=f"job:{result.id}").update(date_expire=past)
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)


def test_a_job_whose_task_module_is_gone_still_reads_back_and_refreshes():
    result = tasks.add.using(priority=4, queue_name="slow").enqueue(1, 2)
    JobIndexRow.objects.filter(job_id=result.id).update(task_path="tests.removed_module.add")
    stored = StorageValue.objects.get(key=f"job:{result.id}")
    record = JobRecord.decode(bytes(stored.value), job_id=result.id)
    record.task_path = "tests.removed_module.add"
    stored.value = record.encode()
    stored.save()

    fetched = default_task_backend.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    assert (fetched.args, fetched.kwargs) == ([1, 2], {})
    assert isinstance(fetched.task, UnavailableTask)
    assert (fetched.task.module_path, fetched.task.name) == ("tests.removed_module.add", "add")
    assert (fetched.task.queue_name, fetched.task.priority) == ("slow", 4)
    reason = (
        "Task 'tests.removed_module.add' cannot be imported (No module named "
        "'tests.removed_module'); it must name a function decorated with django.tasks.task."
    )
    assert fetched.task.reason == reason
    with pytest.raises(InvalidTask, match=f"^{re.escape(reason)}$"):
        fetched.task.enqueue(1, 2)
    JobIndexRow.objects.filter(job_id=result.id).update(stage="running")
    fetched.refresh()
    assert fetched.status == TaskResultStatus.RUNNING
    # Asked through a Task that does exist, it is another task's result, as Django says.
    with pytest.raises(TaskResultMismatch, match=r"received 'tests\.removed_module\.add'"):
        tasks.add.get_result(result.id)
