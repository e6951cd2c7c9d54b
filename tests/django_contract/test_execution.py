"""What a worker process makes of a job: outcomes, errors, context and signals.

Django's ImmediateBackend runs a task inside ``enqueue()``; LaterBackend runs
it later in ``manage.py later_worker``. So each of Django's immediate-backend
checks is made here after one burst worker has run every job of this module.
"""

from dataclasses import replace
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from later_django.tasks_api import TaskResultStatus
from tests.django_contract import tasks
from tests.django_contract.matching import exactly, starting
from tests.django_contract.runs import worker_run

pytestmark = [pytest.mark.django_db, pytest.mark.process]

ARGUMENTS = (
    ["text", "ünïcode ✓", 7, -2.5, True, None, 2**62],
    {"nested": {"list": [1, [2, 3]], "empty": {}}, "pair": (4, 5), "raw": b"bytes"},
)


def enqueue_everything():
    before = timezone.now()
    return {
        "noop": tasks.noop.enqueue(1, two=3),
        "noop_async": tasks.noop_async.enqueue(1, two=3),
        "answer": tasks.answer.enqueue(),
        "answer_async": tasks.answer_async.enqueue(),
        "answer_aenqueued": async_to_sync(tasks.answer.aenqueue)(),
        "echo": tasks.echo.enqueue(*ARGUMENTS[0], **ARGUMENTS[1]),
        "tuple": tasks.returns_tuple.enqueue(),
        "function": tasks.returns_a_function.enqueue(),
        "value_error": tasks.fails_with_value_error.enqueue("this task failed on purpose"),
        "nested": tasks.fails_with_nested_exception.enqueue(),
        "own_id": tasks.returns_own_id.enqueue(),
        "context": tasks.describes_context.enqueue("ctx"),
        "second_attempt": tasks.succeeds_on_second_attempt.enqueue(),
        "high": tasks.noop.using(priority=100).enqueue("high"),
        "low": tasks.noop.using(priority=-100).enqueue("low"),
        "emails": tasks.noop.using(queue_name="emails").enqueue(),
        "past": tasks.noop.using(run_after=before - timedelta(minutes=5)).enqueue(),
        "future": tasks.noop.using(run_after=timedelta(hours=1)).enqueue(),
    }


@pytest.fixture(scope="module")
def run(django_db_setup, django_db_blocker, tmp_path_factory):
    log = tmp_path_factory.mktemp("contract") / "worker.log"
    with worker_run(django_db_blocker, log, enqueue_everything, "--concurrency", "1") as done:
        yield done


def test_the_burst_worker_finishes_every_due_job_and_exits_cleanly(run):
    assert run.finished, run.output
    assert run.exit_code == 0, run.output


@pytest.mark.parametrize("label", ["noop", "noop_async"])
def test_a_finished_job_is_successful_with_ordered_timestamps(run, label):
    # Django: tests/tasks/test_immediate_backend.py test_enqueue_task
    result = run.result(label)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished is True
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert result.return_value is None
    assert result.task == getattr(tasks, label)
    assert (result.args, result.kwargs) == ([1], {"two": 3})
    assert result.attempts == 1
    assert result.errors == []


def test_the_return_value_of_a_sync_or_async_task_is_kept(run):
    # Django: tests/tasks/test_immediate_backend.py test_result, test_result_async
    for label in ("answer", "answer_async", "answer_aenqueued"):
        result = run.result(label)
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42), label


def test_arguments_and_return_values_come_back_as_json(run):
    # Django: tests/tasks/test_tasks.py test_enqueue_with_invalid_argument (the valid side)
    result = run.result("echo")
    args = ["text", "ünïcode ✓", 7, -2.5, True, None, 2**62]
    kwargs = {"nested": {"list": [1, [2, 3]], "empty": {}}, "pair": [4, 5], "raw": "bytes"}
    assert (result.args, result.kwargs) == (args, kwargs)
    assert result.return_value == {"args": args, "kwargs": kwargs}
    assert run.result("tuple").return_value == [1, "two", [3.5, None]]


def test_an_exception_fails_the_job_with_its_class_path_and_traceback(run):
    # Django: tests/tasks/test_immediate_backend.py test_catches_exception (ValueError)
    result = run.result("value_error")
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished is True
    with pytest.raises(ValueError, match=exactly("Task failed")):
        _ = result.return_value
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at is not None
    [error] = result.errors
    assert error.exception_class_path == "builtins.ValueError"
    assert error.exception_class is ValueError
    assert error.traceback.endswith("ValueError: this task failed on purpose\n")
    assert (result.args, result.kwargs) == (["this task failed on purpose"], {})


def test_an_exception_wrapping_another_is_recorded_with_its_source_line(run):
    # Django: tests/tasks/test_immediate_backend.py test_complex_exception
    result = run.result("nested")
    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    [error] = result.errors
    assert error.exception_class is ValueError
    assert 'raise ValueError(KeyError("inner problem"))' in error.traceback
    assert result.started_at <= result.finished_at


def test_a_return_value_that_cannot_be_stored_fails_the_job(run):
    # Django: tests/tasks/test_immediate_backend.py test_complex_return_value
    result = run.result("function")
    assert result.status == TaskResultStatus.FAILED
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result._return_value is None
    [error] = result.errors
    assert "Unsupported type" in error.traceback


def test_a_return_value_that_cannot_be_stored_is_a_type_error(run):
    # Django: tests/tasks/test_immediate_backend.py test_complex_return_value
    [error] = run.result("function").errors
    assert issubclass(error.exception_class, TypeError)


def test_a_context_task_sees_its_own_result(run):
    # Django: tests/tasks/test_immediate_backend.py test_takes_context
    result = run.result("own_id")
    assert result.return_value == result.id


def test_the_context_holds_the_attempt_and_the_running_result(run):
    # Django: tests/tasks/test_immediate_backend.py test_context
    assert run.result("context").return_value == {
        "label": "ctx",
        "attempt": 1,
        "status": "RUNNING",
        "args": ["ctx"],
        "worker_ids": 1,
    }


def test_the_context_attempt_counts_every_attempt(run):
    # Django: tests/tasks/tasks.py test_context (attempt numbers), over a retry
    result = run.result("second_attempt")
    assert (result.status, result.return_value, result.attempts) == (
        TaskResultStatus.SUCCESSFUL,
        2,
        2,
    )
    assert result.started_at < result.last_attempted_at <= result.finished_at
    assert len(result.worker_ids) == 2
    [error] = result.errors
    assert error.exception_class is RuntimeError


def test_refresh_and_arefresh_read_what_the_worker_stored(run):
    # Django: tests/tasks/test_dummy_backend.py test_refresh_result, test_refresh_result_async
    for refresh in ("refresh", "arefresh"):
        stale = replace(run.enqueued["answer"])
        assert stale.status == TaskResultStatus.READY
        if refresh == "refresh":
            stale.refresh()
        else:
            async_to_sync(stale.arefresh)()
        assert (stale.status, stale.return_value, stale.attempts) == (
            TaskResultStatus.SUCCESSFUL,
            42,
            1,
        )


def test_get_result_and_aget_result_agree_on_a_finished_job(run):
    # Django: tests/tasks/test_tasks.py test_get_result, test_get_result_async
    job_id = run.enqueued["value_error"].id
    fetched = tasks.fails_with_value_error.get_result(job_id)
    assert fetched == async_to_sync(tasks.fails_with_value_error.aget_result)(job_id)
    assert fetched.status == TaskResultStatus.FAILED


def test_the_worker_sends_task_started_and_task_finished(run):
    # Django: tests/tasks/test_immediate_backend.py test_enqueue_logs, test_failed_logs,
    # test_successful_task_no_none_type_in_logs (Django logs from receivers of these signals)
    assert run.signals_of("noop") == [
        ("started", "RUNNING", "LaterBackend"),
        ("finished", "SUCCESSFUL", "LaterBackend", "NoneType"),
    ]
    assert run.signals_of("value_error") == [
        ("started", "RUNNING", "LaterBackend"),
        ("finished", "FAILED", "LaterBackend", "ValueError"),
    ]
    assert run.signals_of("second_attempt") == [
        ("started", "RUNNING", "LaterBackend"),
        ("finished", "READY", "LaterBackend", "RuntimeError"),
        ("started", "RUNNING", "LaterBackend"),
        ("finished", "SUCCESSFUL", "LaterBackend", "NoneType"),
    ]


def test_higher_priority_jobs_start_first(run):
    # Django: tests/tasks/test_tasks.py test_task_result_comparability_in_priority_queue
    # First attempts only: a retry comes back when its backoff is due, whatever its priority.
    started = list(dict.fromkeys(job_id for kind, job_id, *_ in run.signals if kind == "started"))
    assert started[0] == run.enqueued["high"].id
    assert started[-1] == run.enqueued["low"].id


def test_run_after_in_the_past_runs_and_in_the_future_waits(run):
    # Django: tests/tasks/test_tasks.py test_using_run_after (what a backend does with it)
    assert run.result("past").status == TaskResultStatus.SUCCESSFUL
    future = run.result("future")
    assert future.status == TaskResultStatus.READY
    assert future.started_at is None
    assert future.task.run_after == run.enqueued["future"].task.run_after


def test_a_job_on_another_configured_queue_runs_and_keeps_its_queue(run):
    # Django: tests/tasks/test_tasks.py test_using_queue_name (what a backend does with it)
    result = run.result("emails")
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.task.queue_name == "emails"


def test_a_stored_error_resolves_only_real_exception_classes(run):
    # Django: tests/tasks/test_tasks.py test_task_error_invalid_exception,
    # test_task_error_unknown_module
    [error] = run.result("value_error").errors
    object.__setattr__(error, "exception_class_path", "subprocess.run")
    with pytest.raises(
        ValueError, match=starting("'subprocess.run' does not reference a valid exception.")
    ):
        _ = error.exception_class
    object.__setattr__(error, "exception_class_path", "does.not.exist")
    with pytest.raises(ImportError):
        _ = error.exception_class
