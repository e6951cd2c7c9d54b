"""Enqueueing through Django's API: the TaskResult it returns, reading it back, signals.

Django runs these checks against its DummyBackend, which keeps results in a
list; here the same expectations hold for jobs stored in the database.
"""

import dataclasses
import pickle
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from later_django.backend import LaterBackend, LaterTask
from later_django.models import JobIndexRow
from later_django.tasks_api import (
    DEFAULT_TASK_QUEUE_NAME,
    Task,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    default_task_backend,
    task_backends,
    task_enqueued,
)
from tests.django_contract import tasks
from tests.django_contract.matching import exactly, since_django_6_1, starting

pytestmark = pytest.mark.django_db


def test_the_default_backend_is_a_later_backend_with_its_options():
    # Django: tests/tasks/test_dummy_backend.py test_using_correct_backend
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], LaterBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == settings.TASKS["default"]["OPTIONS"]


def test_the_backend_supports_defer_async_results_and_priority():
    # Django: tests/tasks/test_immediate_backend.py test_cannot_pass_run_after,
    # test_cannot_get_result (the opposite holds for a database backend)
    backend = default_task_backend
    assert (backend.supports_defer, backend.supports_async_task) == (True, True)
    assert (backend.supports_get_result, backend.supports_priority) == (True, True)


def test_the_backend_passes_its_own_system_check():
    # Django: tests/tasks/test_dummy_backend.py test_check
    assert list(default_task_backend.check()) == []


def test_the_task_decorator_builds_tasks_of_the_backend_class():
    # Django: tests/tasks/test_tasks.py test_task_decorator
    for task in (tasks.noop, tasks.noop_async, tasks.noop_from_bare_decorator):
        assert isinstance(task, Task)
        assert isinstance(task, LaterTask)


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async], ids=["sync", "async"])
def test_enqueue_returns_a_ready_result_holding_the_call(task):
    # Django: tests/tasks/test_dummy_backend.py test_enqueue_task; test_tasks.py test_enqueue_task
    before = timezone.now()
    result = task.enqueue(1, two=3)
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None,) * 3
    assert before <= result.enqueued_at <= timezone.now()
    with pytest.raises(ValueError, match=exactly("Task has not finished yet")):
        _ = result.return_value
    assert result.task == task
    assert (result.args, result.kwargs) == ([1], {"two": 3})
    assert (result.backend, result.attempts, result.errors, result.worker_ids) == (
        "default",
        0,
        [],
        [],
    )
    assert isinstance(result.id, str)
    assert JobIndexRow.objects.filter(job_id=result.id).exists()


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async], ids=["sync", "async"])
def test_aenqueue_returns_a_ready_result(task):
    # Django: tests/tasks/test_dummy_backend.py test_enqueue_task_async
    result = async_to_sync(task.aenqueue)()
    assert (result.status, result.task, result.args, result.kwargs) == (
        TaskResultStatus.READY,
        task,
        [],
        {},
    )
    assert result.attempts == 0
    assert default_task_backend.get_result(result.id) == result


def test_the_result_carries_the_options_given_to_using():
    # Django: tests/tasks/test_tasks.py test_using_priority, test_using_queue_name,
    # test_using_run_after (as seen on the enqueued and the stored result)
    run_after = timezone.now() + timedelta(minutes=10)
    task = tasks.noop.using(priority=-7, queue_name="emails", run_after=run_after)
    result = task.enqueue()
    stored = tasks.noop.get_result(result.id)
    for found in (result, stored):
        assert (found.task.priority, found.task.queue_name) == (-7, "emails")
        assert found.task.run_after == run_after
        assert found.status == TaskResultStatus.READY


def test_get_result_and_aget_result_equal_the_enqueued_result():
    # Django: tests/tasks/test_tasks.py test_get_result, test_get_result_async;
    # tests/tasks/test_dummy_backend.py test_get_result, test_get_result_async
    result = default_task_backend.enqueue(tasks.noop, (), {})
    assert tasks.noop.get_result(result.id) == result
    assert async_to_sync(tasks.noop.aget_result)(result.id) == result
    assert default_task_backend.get_result(result.id) == result
    assert async_to_sync(default_task_backend.aget_result)(result.id) == result


def test_refreshing_a_result_nobody_ran_changes_nothing():
    # Django: tests/tasks/test_tasks.py test_refresh_result
    result = async_to_sync(tasks.noop.aenqueue)()
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    async_to_sync(result.arefresh)()
    assert dataclasses.asdict(result) == before


def test_an_unknown_result_id_does_not_exist():
    # Django: tests/tasks/test_tasks.py test_get_missing_result;
    # tests/tasks/test_dummy_backend.py test_get_missing_result
    with pytest.raises(TaskResultDoesNotExist):
        tasks.noop.get_result("123")
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(tasks.noop.aget_result)("123")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("123")


def test_reading_a_result_through_another_task_is_a_mismatch():
    # Django: tests/tasks/test_tasks.py test_get_incorrect_result, test_get_incorrect_result_async
    result = default_task_backend.enqueue(tasks.noop_async, (), {})
    with pytest.raises(TaskResultMismatch, match=starting("Task does not match")):
        tasks.noop.get_result(result.id)
    with pytest.raises(TaskResultMismatch, match=starting("Task does not match")):
        async_to_sync(tasks.noop.aget_result)(result.id)


def test_enqueue_sends_task_enqueued_with_the_result():
    # Django: tests/tasks/test_dummy_backend.py test_enqueue_logs (logged by a receiver)
    seen = []

    def on_enqueued(sender, task_result, **kwargs):
        seen.append((sender, task_result.id, task_result.status, task_result.enqueued_at))

    task_enqueued.connect(on_enqueued)
    try:
        result = tasks.noop.enqueue()
        aresult = async_to_sync(tasks.noop.aenqueue)()
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert seen == [
        (LaterBackend, result.id, TaskResultStatus.READY, result.enqueued_at),
        (LaterBackend, aresult.id, TaskResultStatus.READY, aresult.enqueued_at),
    ]


def test_enqueue_inside_a_transaction_returns_at_once():
    # Django: tests/tasks/test_dummy_backend.py test_doesnt_wait_until_transaction_commit_by_default
    with transaction.atomic():
        result = tasks.noop.enqueue()
        assert result.enqueued_at is not None
        assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY


def test_a_context_task_is_enqueued_like_any_other():
    # Django: tests/tasks/test_dummy_backend.py test_takes_context
    assert tasks.returns_own_id.enqueue().status == TaskResultStatus.READY


def test_a_non_json_argument_is_refused_and_nothing_is_stored():
    # Django: tests/tasks/test_tasks.py test_enqueue_with_invalid_argument (what is stored)
    with pytest.raises((TypeError, ValueError)):
        tasks.noop.enqueue(timezone.now())
    with pytest.raises((TypeError, ValueError)):
        async_to_sync(tasks.noop.aenqueue)(kwarg=object())
    assert not JobIndexRow.objects.exists()


def test_a_non_json_argument_raises_type_error():
    # Django: tests/tasks/test_tasks.py test_enqueue_with_invalid_argument
    with pytest.raises(TypeError):
        tasks.noop.enqueue(timezone.now())


def test_a_non_json_argument_to_aenqueue_raises_type_error():
    # Django: tests/tasks/test_tasks.py test_aenqueue_with_invalid_argument
    with pytest.raises(TypeError):
        async_to_sync(tasks.noop.aenqueue)(timezone.now())


def test_enqueue_works_with_use_tz_off():
    # Django: tests/tasks/test_tasks.py test_naive_datetime (naive is fine without USE_TZ)
    with override_settings(USE_TZ=False):
        run_after = timezone.now() + timedelta(minutes=1)
        result = tasks.noop.using(run_after=run_after).enqueue()
        assert result.status == TaskResultStatus.READY
        assert tasks.noop.get_result(result.id).task.run_after == run_after


@since_django_6_1
def test_tasks_and_results_pickle():
    # Django: tests/tasks/test_tasks.py test_pickle_task, test_pickle_task_result
    assert pickle.loads(pickle.dumps(tasks.noop)) == tasks.noop
    configured = tasks.succeeds_on_second_attempt.using(priority=3)
    assert pickle.loads(pickle.dumps(configured)) == configured
    result = tasks.noop.enqueue(1, a=[2])
    assert pickle.loads(pickle.dumps(result)) == result


def test_a_task_has_a_name_and_an_importable_module_path():
    # Django: tests/tasks/test_tasks.py test_name, test_module_path
    assert (tasks.noop.name, tasks.noop_async.name) == ("noop", "noop_async")
    for task in (tasks.noop, tasks.noop_async):
        assert task.module_path == f"tests.django_contract.tasks.{task.name}"
        assert import_string(task.module_path) is task


def test_call_and_acall_run_the_function_in_process():
    # Django: tests/tasks/test_tasks.py test_call_task, test_call_task_async,
    # test_call_async_task, test_call_async_task_sync
    assert tasks.answer.call() == 42
    assert async_to_sync(tasks.answer.acall)() == 42
    assert async_to_sync(tasks.noop_async.acall)() is None
    assert tasks.noop_async.call() is None


def test_the_default_queue_is_djangos():
    # Django: tests/tasks/test_tasks.py test_using_queue_name (the default)
    assert tasks.noop.queue_name == DEFAULT_TASK_QUEUE_NAME
    assert (tasks.noop.priority, tasks.noop.run_after, tasks.noop.backend) == (0, None, "default")


def test_an_integer_beyond_64_bits_is_refused_at_enqueue():
    # Deliberate difference from Django's JSON-only check: jobs are stored as msgpack,
    # whose integers hold 64 bits, so a larger one is refused before anything is stored.
    with pytest.raises((TypeError, ValueError), match="is 18446744073709551616 of type int"):
        tasks.noop.enqueue(2**64)
    assert not JobIndexRow.objects.exists()
