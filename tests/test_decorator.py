"""``later_django.task``: Django's decorator plus Later's options, on every Django version."""

import inspect

import pytest
from django.test import override_settings

import later_django
from later_django.backend import LaterTask
from later_django.backoff import Fixed
from later_django.tasks_api import Task, task
from tests import tasks
from tests.conftest import DUMMY_BACKEND

WITH_DUMMY = {
    "default": {"BACKEND": "later_django.backend.LaterBackend", "OPTIONS": {"namespace": "tests"}},
    "dummy": {"BACKEND": DUMMY_BACKEND},
}
# Django 6.1's @task and the django-tasks backport pass extra keywords on to
# the backend's task_class; Django 6.0's takes none.
DJANGO_TASK_FORWARDS_OPTIONS = any(
    p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(task).parameters.values()
)


def test_the_decorator_is_a_public_name_of_the_package():
    assert "task" in later_django.__all__
    from later_django import task as imported

    assert imported is later_django.task


def test_it_takes_every_parameter_of_django_s_decorator_with_the_same_default():
    ours = inspect.signature(later_django.task).parameters
    for name, parameter in inspect.signature(task).parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        assert name in ours
        assert ours[name].default == parameter.default, name


def test_used_bare_it_builds_a_later_task_with_default_options():
    made = later_django.task(tasks.add.func)
    assert isinstance(made, LaterTask)
    assert made == task(tasks.add.func)
    assert (made.max_attempts, made.backoff, made.timeout, made.topic) == (None, None, None, None)


def test_with_django_s_arguments_it_builds_what_django_s_decorator_builds():
    arguments = {"priority": 5, "queue_name": "emails", "takes_context": True}
    function = tasks.report_attempt.func
    assert later_django.task(**arguments)(function) == task(**arguments)(function)


def test_it_sets_later_s_options_on_the_task():
    made = later_django.task(
        priority=3,
        queue_name="slow",
        max_attempts=4,
        backoff={"policy": "fixed", "seconds": 2},
        timeout=9.5,
        topic="orders",
    )(tasks.add.func)
    assert isinstance(made, LaterTask)
    assert (made.priority, made.queue_name) == (3, "slow")
    assert (made.max_attempts, made.timeout, made.topic) == (4, 9.5, "orders")
    assert made.get_backend().backoff_for(made) == Fixed(seconds=2)


def test_the_fixture_tasks_with_options_were_built_by_it():
    assert tasks.always_fails.max_attempts == 3
    assert tasks.too_slow_python.timeout == 0.5


def test_run_after_cannot_be_set_by_the_decorator():
    with pytest.raises(TypeError, match="unexpected keyword argument 'run_after'"):
        later_django.task(run_after=None)(tasks.add.func)


@override_settings(TASKS=WITH_DUMMY)
def test_later_options_for_a_backend_that_cannot_take_them_are_refused_naming_them():
    with pytest.raises(TypeError) as raised:
        later_django.task(backend="dummy", max_attempts=2, topic="orders")(tasks.add.func)
    assert str(raised.value) == (
        "later_django.task got max_attempts=2, topic='orders' for task backend 'dummy', whose "
        "Task takes no Later options; use them with a backend whose BACKEND is "
        '"later_django.backend.LaterBackend".'
    )


@override_settings(TASKS=WITH_DUMMY)
def test_without_later_options_it_builds_any_backend_s_task():
    made = later_django.task(backend="dummy", priority=2)(tasks.add.func)
    assert type(made) is Task
    assert (made.backend, made.priority) == ("dummy", 2)


@pytest.mark.skipif(not DJANGO_TASK_FORWARDS_OPTIONS, reason="this @task forwards no options")
def test_where_django_s_decorator_forwards_options_it_builds_the_same_task():
    options = {"max_attempts": 3, "backoff": "immediate", "timeout": 4}
    assert task(**options)(tasks.add.func) == later_django.task(**options)(tasks.add.func)


@pytest.mark.skipif(DJANGO_TASK_FORWARDS_OPTIONS, reason="this @task forwards options")
def test_where_django_s_decorator_forwards_nothing_it_refuses_later_options():
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_attempts'"):
        task(max_attempts=3)(tasks.add.func)
