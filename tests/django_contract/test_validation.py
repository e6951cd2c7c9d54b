"""Django's validation of tasks and their ``using()`` options, with LaterBackend's bounds.

Django's messages are part of its contract (its tests match them); the tests
that expect them word for word fail today and are marked as such.
"""

from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from later_django.backend import LaterBackend
from later_django.tasks_api import InvalidTask, InvalidTaskBackend, task
from tests.django_contract import tasks
from tests.django_contract.matching import exactly, since_django_6_1, starting

PRIORITY_MESSAGE = "priority must be a whole number between -100 and 100."
NAIVE_MESSAGE = "run_after must be an aware datetime."
LATER = "later_django.backend.LaterBackend"
OPTIONS = settings.TASKS["default"]["OPTIONS"]


def with_queues(*queues):
    """Settings whose default alias is LaterBackend with these QUEUES (none: any queue)."""
    return override_settings(
        TASKS={"default": {"BACKEND": LATER, "QUEUES": list(queues), "OPTIONS": OPTIONS}}
    )


def test_using_returns_a_changed_copy_and_leaves_the_task_alone():
    # Django: tests/tasks/test_tasks.py test_using_priority, test_using_queue_name,
    # test_using_run_after, test_using_creates_new_instance
    now = timezone.now()
    assert tasks.noop.using(priority=1).priority == 1
    assert tasks.noop.using(queue_name="emails").queue_name == "emails"
    assert tasks.noop.using(run_after=now).run_after == now
    assert (tasks.noop.priority, tasks.noop.queue_name, tasks.noop.run_after) == (
        0,
        "default",
        None,
    )
    copy = tasks.noop.using()
    assert copy == tasks.noop
    assert copy is not tasks.noop


def test_chained_using_keeps_earlier_changes():
    # Django: tests/tasks/test_tasks.py test_chained_using
    now = timezone.now()
    deferred = tasks.noop.using(run_after=now)
    prioritised = deferred.using(priority=10)
    assert (prioritised.priority, prioritised.run_after) == (10, now)
    assert deferred.priority == 0


def test_run_after_may_be_a_timedelta_from_now():
    # later_django's addition to Django's test_using_run_after: a timedelta counts from now
    before = timezone.now()
    run_after = tasks.noop.using(run_after=timedelta(minutes=5)).run_after
    assert before + timedelta(minutes=5) <= run_after <= timezone.now() + timedelta(minutes=5)
    assert timezone.is_aware(run_after)


@pytest.mark.parametrize("priority", [-101, 101, 3.1])
def test_a_priority_outside_the_bounds_or_fractional_is_invalid(priority):
    # Django: tests/tasks/test_tasks.py test_invalid_priority
    with pytest.raises(InvalidTask):
        tasks.noop.using(priority=priority)


def test_the_priority_bounds_and_zero_are_valid():
    # Django: tests/tasks/test_tasks.py test_invalid_priority (the valid values)
    for priority in (100, -100, 0):
        assert tasks.noop.using(priority=priority).priority == priority


@pytest.mark.parametrize("priority", [-101, 101, 3.1])
def test_an_invalid_priority_has_djangos_message(priority):
    # Django: tests/tasks/test_tasks.py test_invalid_priority
    with pytest.raises(InvalidTask) as raised:
        tasks.noop.using(priority=priority)
    assert str(raised.value).startswith(PRIORITY_MESSAGE)


def test_a_naive_run_after_is_invalid():
    # Django: tests/tasks/test_tasks.py test_naive_datetime
    with pytest.raises(InvalidTask):
        tasks.noop.using(run_after=datetime.now())  # naive on purpose


def test_a_naive_run_after_has_djangos_message():
    # Django: tests/tasks/test_tasks.py test_naive_datetime
    with pytest.raises(InvalidTask) as raised:
        tasks.noop.using(run_after=datetime.now())  # naive on purpose
    assert str(raised.value).startswith(NAIVE_MESSAGE)


def test_a_queue_the_backend_does_not_list_is_invalid():
    # Django: tests/tasks/test_tasks.py test_unknown_queue_name
    with pytest.raises(InvalidTask):
        tasks.noop.using(queue_name="queue-2")


def test_an_unknown_queue_has_djangos_message():
    # Django: tests/tasks/test_tasks.py test_unknown_queue_name
    with pytest.raises(InvalidTask) as raised:
        tasks.noop.using(queue_name="queue-2")
    assert str(raised.value).startswith("Queue 'queue-2' is not valid for backend.")


@pytest.mark.django_db
def test_an_empty_queues_list_accepts_any_queue_name():
    # Django: tests/tasks/test_tasks.py test_unknown_queue_name (QUEUES = [] skips the check)
    with with_queues():
        result = tasks.noop.using(queue_name="queue-2").enqueue()
        assert tasks.noop.get_result(result.id).task.queue_name == "queue-2"


@pytest.mark.django_db
@pytest.mark.parametrize("asynchronous", [False, True], ids=["enqueue", "aenqueue"])
def test_enqueue_validates_the_task_again(asynchronous):
    # Django: tests/tasks/test_dummy_backend.py test_validate_on_enqueue, test_validate_on_aenqueue
    with with_queues():
        stray = tasks.noop.using(queue_name="unknown_queue")
    with with_queues("queue-1"), pytest.raises(InvalidTask):
        async_to_sync(stray.aenqueue)() if asynchronous else stray.enqueue()


@pytest.mark.django_db
def test_enqueue_of_a_task_on_an_unknown_queue_has_djangos_message():
    # Django: tests/tasks/test_dummy_backend.py test_validate_on_enqueue
    with with_queues():
        stray = tasks.noop.using(queue_name="unknown_queue")
    with with_queues("queue-1"), pytest.raises(InvalidTask) as raised:
        stray.enqueue()
    assert str(raised.value).startswith("Queue 'unknown_queue' is not valid for backend.")


def test_an_unknown_backend_alias_is_invalid():
    # Django: tests/tasks/test_tasks.py test_using_unknown_backend
    with pytest.raises(
        InvalidTaskBackend, match=exactly("The connection 'unknown' doesn't exist.")
    ):
        tasks.noop.using(backend="unknown")


def test_a_backend_that_cannot_be_imported_is_invalid():
    # Django: tests/tasks/test_tasks.py test_using_missing_backend
    with (
        override_settings(TASKS={**settings.TASKS, "missing": {"BACKEND": "does.not.exist"}}),
        pytest.raises(
            InvalidTaskBackend,
            match=exactly("Could not find backend 'does.not.exist': No module named 'does'"),
        ),
    ):
        tasks.noop.using(backend="missing")


def test_get_backend_follows_the_alias():
    # Django: tests/tasks/test_tasks.py test_get_backend
    other = {"BACKEND": LATER, "QUEUES": [], "OPTIONS": {**OPTIONS, "namespace": "other"}}
    with override_settings(TASKS={**settings.TASKS, "other": other}):
        assert isinstance(tasks.noop.get_backend(), LaterBackend)
        moved = tasks.noop.using(backend="other")
        assert moved.backend == "other"
        assert moved.get_backend().alias == "other"
        assert moved.get_backend().namespace == "other"


def task_defined_in_a_function():
    def inner():
        pass

    return inner


def test_a_task_function_must_be_defined_at_module_level():
    # Django: tests/tasks/test_tasks.py test_invalid_function
    for function in (any, task_defined_in_a_function()):
        with pytest.raises(
            InvalidTask, match=exactly("Task function must be defined at a module level.")
        ):
            task()(function)


def test_a_context_task_must_take_context_first():
    # Django: tests/tasks/test_tasks.py test_takes_context_without_taking_context
    with pytest.raises(
        InvalidTask,
        match=exactly("Task takes context but does not have a first argument of 'context'."),
    ):
        task(takes_context=True)(tasks.answer.func)


@since_django_6_1
def test_run_after_cannot_be_given_to_the_decorator():
    # Django: tests/tasks/test_tasks.py test_run_after_in_decorator
    with pytest.raises(TypeError, match=starting("run_after cannot be defined statically")):
        task(run_after=timezone.now())(tasks.answer.func)


@since_django_6_1
def test_unpickling_a_path_that_is_not_a_task_fails():
    # Django: tests/tasks/test_tasks.py test_unpickle_arbitrary_string,
    # test_unpickle_non_task_object
    for path in ("does.not.exist.fake_task", "builtins.any"):
        with pytest.raises(
            ValueError, match=exactly(f"Expected '{path}' to point to a Task instance.")
        ):
            type(tasks.noop)._reconstruct({"func": path})


def test_enqueue_without_any_configured_backend_is_invalid():
    # Django: tests/tasks/test_tasks.py test_no_backends
    with override_settings(TASKS={}), pytest.raises(InvalidTaskBackend):
        tasks.noop.enqueue()
